"""`load_environment("tictactoe", ...)`: the environment's arguments, checked, and its dataset.

The arguments and the rubric they set are described in rlve.envs.tictactoe.env's docstring.
"""

from __future__ import annotations

import math

from rlve.envs.base import require_int
from rlve.envs.parsers import XMLParser
from rlve.envs.rubric import Rubric
from rlve.envs.tictactoe.dataset import example_rows
from rlve.envs.tictactoe.env import TicTacToeEnv
from rlve.envs.tictactoe.prompts import BOARDS, SYSTEM_PROMPTS
from rlve.envs.tictactoe.rewards import (
    FORMAT_WEIGHT,
    INVALID_PENALTIES,
    format_reward,
    mistakes,
    regrets,
    threats_reward,
    win_reward,
)
from rlve.envs.tictactoe.self_play import OPPONENTS


def _check_probability(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")


def load_environment(
    num_examples: int = 1000,
    seed: int = 0,
    min_random_move_prob: float = 0.2,
    max_random_move_prob: float = 0.7,
    num_groups: int = 1,
    max_turns: int = 7,
    max_tokens: int = 128,
    invalid_penalty: str = "flat",
    rules: str = "full",
    board: str = "grid",
    opponent: str = "scripted",
    scripted_fraction: float = 0.0,
    mistake_penalty: float = 0.0,
    regret_penalty: float = 0.0,
    threats_weight: float = 0.0,
    hint_levels: int = 0,
) -> TicTacToeEnv:
    """Tic-tac-toe against a seeded minimax opponent of stratified strength.

    Args:
        num_examples: games in the dataset (each with its own seed and opponent strength).
        seed: seed of the dataset; the same seed gives the same games.
        min_random_move_prob: smallest share of random opponent moves (0: perfect play).
        max_random_move_prob: largest share of random opponent moves (1: purely random).
        num_groups: strata of the random-move range; use batch_size // rollouts_per_example.
        max_turns: most model turns per game (invalid answers count as turns).
        max_tokens: default most tokens per model turn.
        invalid_penalty: 'flat' (-0.1 once if any move was invalid, the recipe's rubric) or
            'per_move' (-0.1 for each invalid move).
        rules: the system prompt: 'full' (the rules with an example answer) or 'short' (the same
            rules in less than half the tokens, for small models trained on a CPU).
        board: how messages show the board: 'grid' (rows " X | O | 2" between "---------"
            lines, then "Available positions: [...]") or 'compact' (three rows "X O 2", no list
            of free cells, short status lines: half the tokens of a game's replies) or 'threats'
            (the grid, then a line naming the cells where X or O would complete three); the
            system prompt draws the one chosen. The games and the rewards are the same.
        opponent: who plays O: 'scripted' (the seeded minimax opponent above) or 'self' (the
            policy, in a seat of its own with O's view of the board; both seats are trained).
        scripted_fraction: with opponent='self', the share of games still played against the
            scripted opponent (a group's games always share their opponent and who starts).
        mistake_penalty: what each mistake costs (a move that gives up a won or drawn result:
            a missed win, a missed block, a fork let through), credited to that move; 0 counts
            them (`game/mistakes`) without a penalty. An answer without a legal move costs
            as many mistakes as losing from its position would.
        regret_penalty: what each result level a move gives up under best play costs (its
            regret: 1 for a drawn game lost or a won one drawn, 2 for a won game lost),
            credited to that move; an answer without a legal move costs the regret of losing
            from its position. 0 sums them (`game/regret`) without a penalty.
        threats_weight: the reward for stating the position's threats right in the think
            block ("X can win at 2. O can win at 5.", the threats board's words): this weight
            times the share of answers, in positions where a mark can complete three, whose
            statement names exactly each mark's winning cells, each answer's part credited at
            its turn. Positions without a threat pay nothing ("No line has two of a mark." is
            checked, not paid: said every turn it was right in 63% of positions). Measured as
            `game/threats_stated_right`, `game/threats_found` and `game/threats_chances`
            whatever the weight.
        hint_levels: n > 0 makes the threats line a difficulty axis for the curriculum
            (`env.curriculum.enabled`): at level d each message shows it with probability
            1 - d/n, from level n on never (the plain grid board); the opponent's strength is
            then drawn per game from [min_random_move_prob, max_random_move_prob]. The
            dataset's own games (an evaluation) show no hint. Needs board='grid' and the
            scripted opponent.
    """
    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {list(OPPONENTS)}, got {opponent!r}")
    _check_probability("scripted_fraction", scripted_fraction)
    penalties = (("mistake_penalty", mistake_penalty), ("regret_penalty", regret_penalty),
                 ("threats_weight", threats_weight))  # fmt: skip
    for name, penalty in penalties:
        if not (math.isfinite(penalty) and penalty >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {penalty!r}")
    if invalid_penalty not in INVALID_PENALTIES:
        raise ValueError(
            f"invalid_penalty must be one of {sorted(INVALID_PENALTIES)}, got {invalid_penalty!r}"
        )
    if rules not in SYSTEM_PROMPTS:
        raise ValueError(f"rules must be one of {sorted(SYSTEM_PROMPTS)}, got {rules!r}")
    if board not in BOARDS:
        raise ValueError(f"board must be one of {sorted(BOARDS)}, got {board!r}")
    wording = BOARDS[board]
    _check_probability("min_random_move_prob", min_random_move_prob)
    _check_probability("max_random_move_prob", max_random_move_prob)
    if min_random_move_prob > max_random_move_prob:
        raise ValueError(
            f"min_random_move_prob ({min_random_move_prob}) must be <= "
            f"max_random_move_prob ({max_random_move_prob})"
        )
    require_int("num_groups", num_groups, 1)
    require_int("num_examples", num_examples, 1)
    require_int("max_turns", max_turns, 1)
    require_int("hint_levels", hint_levels, 0)
    if hint_levels and (board != "grid" or opponent != "scripted"):
        raise ValueError(
            f"hint_levels={hint_levels} fades the threats line out of the grid board against "
            f"the scripted opponent; got board={board!r}, opponent={opponent!r}"
        )
    rows = example_rows(num_examples, seed, min_random_move_prob, max_random_move_prob, num_groups,
                        opponent, scripted_fraction, wording)  # fmt: skip
    parser = XMLParser(["think", "move"], answer_field="move")
    rubric = Rubric(parser=parser)
    rubric.add(win_reward, 1.0).add(format_reward, FORMAT_WEIGHT)
    rubric.add(INVALID_PENALTIES[invalid_penalty], 1.0)
    if mistake_penalty:
        rubric.add(mistakes, mistake_penalty)
    if regret_penalty:
        rubric.add(regrets, regret_penalty)
    if threats_weight:
        rubric.add(threats_reward, threats_weight)
    env = TicTacToeEnv(
        rows,
        system_prompt=wording.system_prompts[rules],
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        name="tictactoe",
        sampling={"max_tokens": max_tokens},
    )
    env.invalid_penalty = invalid_penalty
    env.opponent, env.scripted_fraction = opponent, scripted_fraction
    env.mistake_penalty, env.regret_penalty = mistake_penalty, regret_penalty
    env.wording, env.rules = wording, rules
    env.threats_weight, env.hint_levels = threats_weight, hint_levels
    env.random_move_range = (min_random_move_prob, max_random_move_prob)
    return env
