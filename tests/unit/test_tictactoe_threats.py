"""Stated threats: the threats an answer names in its think block, checked against the game, and
the reward for stating them right, which no cheating policy earns as much of as an honest one."""

import random

import pytest

import rlve
from rlve.envs.tictactoe.game import (
    O_MARK,
    X_MARK,
    best_moves,
    board_from_string,
    free_cells,
    move_regret,
    parse_board,
)
from rlve.envs.tictactoe.policies import (
    REASONS,
    format_answer,
    noisy_minimax_policy,
    threats_reason,
    verdict_reason,
)
from rlve.envs.tictactoe.prompts import open_lines
from rlve.envs.tictactoe.threats import (
    has_threats,
    stated_threats,
    states_threats_right,
    threat_cells,
)
from rlve.rollout import ScriptedEngine

# X to move: X has 0 and 1 (2 wins), O has 3 and 4 (5 wins), 6 is free of threats
BOARD = board_from_string("XX OO    ")


def think(text: str) -> str:
    return f"<think>{text}</think>\n<move>2</move>"


def test_the_threats_of_a_position_are_each_mark_s_winning_cells():
    assert threat_cells(BOARD) == {X_MARK: {2}, O_MARK: {5}}
    assert open_lines(BOARD) == "X can win at 2. O can win at 5."
    two_ways = board_from_string("O   O X  ")  # O: 8 (diagonal); X has only one mark
    assert threat_cells(two_ways) == {X_MARK: set(), O_MARK: {8}}
    fork = board_from_string("O O  X  O")  # O can win at 1 (top row) and 4 (diagonal)
    assert open_lines(fork) == "O can win at 1 or 4."
    assert open_lines(board_from_string("    X    ")) == "No line has two of a mark."


@pytest.mark.parametrize(
    ("answer", "stated"),
    [
        (think("X can win at 2. O can win at 5. Cell 2 wins."), {X_MARK: {2}, O_MARK: {5}}),
        (think("O can win at 5 or 8."), {X_MARK: set(), O_MARK: {5, 8}}),
        (
            think("No line has two of a mark. Cell 4 keeps the game safe."),
            {X_MARK: set(), O_MARK: set()},
        ),  # fmt: skip
        (think("Cell 2 completes three in a row."), None),  # no statement
        ("X can win at 2. O can win at 5. <move>2</move>", None),  # outside a think block
        (think("No line has two of a mark. O can win at 5."), None),  # contradicts itself
        (think("O can win at 5. O can win at 8."), None),  # two sentences for one mark
        (think("O can win at 9."), None),  # not a cell: no statement
    ],
)
def test_a_statement_is_read_from_the_think_block_or_not_at_all(answer, stated):
    assert stated_threats(answer) == stated


def test_only_the_exact_sets_are_right():
    assert states_threats_right(think(open_lines(BOARD)), BOARD)
    for wrong in ["X can win at 2.", "O can win at 5.", "X can win at 2 or 6. O can win at 5.",
                  "No line has two of a mark.", "O can win at 2. X can win at 5."]:  # fmt: skip
        assert not states_threats_right(think(wrong), BOARD), wrong


def test_a_megabyte_of_hostile_text_is_read_in_one_pass():
    # 200,000 unclosed statements: a backtracking reader would take quadratic time
    hostile = "<think>" + "O can win at 5 or " * 200_000
    assert stated_threats(hostile) is None
    assert stated_threats(think("O can win at 5 or " * 50_000 + "8.")) == {X_MARK: set(),
                                                                        O_MARK: {5, 8}}  # fmt: skip


def test_the_threats_teacher_states_them_first_and_moves_as_the_verdict_teacher():
    assert (
        threats_reason(BOARD, 2)
        == "X can win at 2. O can win at 5. Cell 2 completes three in a row."
    )
    assert set(REASONS) >= {"verdict", "lines", "threats"}
    messages = [{"role": "user", "content": "You play X.\n\n" + rlve_board(BOARD)}]
    for seed in range(20):  # the same noisy moves, and even the noisy ones state right
        a = noisy_minimax_policy(0.5, "threats")(messages, random.Random(seed))
        b = noisy_minimax_policy(0.5)(messages, random.Random(seed))
        assert a.endswith(b[b.index("</think>") :])
        assert states_threats_right(a, BOARD)


def rlve_board(board) -> str:
    from rlve.envs.tictactoe.prompts import GRID

    return GRID.position(board)


# ---------------------------------------------------------------- the reward and its cheats

GAMES = 40
WEIGHT = 0.2


def stated_game_env():
    return rlve.load_environment(
        "tictactoe", num_examples=GAMES, min_random_move_prob=0.0, max_random_move_prob=1.0,
        num_groups=4, invalid_penalty="per_move", regret_penalty=1.0, threats_weight=WEIGHT,
    )  # fmt: skip


def board_of(messages):
    return parse_board(messages[-1]["content"])


def best(board):
    return best_moves(board, X_MARK)[0]


def honest(messages):
    board = board_of(messages)
    return format_answer(best(board), threats_reason(board, best(board)))


def states_every_cell(messages):
    cells = " or ".join(map(str, range(9)))
    board = board_of(messages)
    return format_answer(best(board), f"X can win at {cells}. O can win at {cells}.")


def states_nothing(messages):
    board = board_of(messages)
    return format_answer(best(board), verdict_reason(board, best(board)))


def repeats_the_last_statement(messages):
    board = board_of(messages)
    earlier = [m["content"] for m in messages if m["role"] == "assistant"]
    statement = "No line has two of a mark."
    if earlier:
        statement = earlier[-1][len("<think>") : earlier[-1].index(" Cell")]
    return format_answer(best(board), f"{statement} Cell {best(board)}.")


def always_no_threat(messages):
    board = board_of(messages)
    return format_answer(best(board), f"No line has two of a mark. Cell {best(board)}.")


def states_right_and_moves_worst(messages):
    board = board_of(messages)
    worst = max(free_cells(board), key=lambda c: (move_regret(board, c, X_MARK), -c))
    return format_answer(worst, f"{open_lines(board)} Cell {worst}.")


def states_wrong_and_moves_right(messages):
    board = board_of(messages)
    swapped = (
        open_lines(board).replace("X can", "_").replace("O can", "X can").replace("_", "O can")
    )
    statement = swapped if swapped != open_lines(board) else "O can win at 4."
    return format_answer(best(board), f"{statement} Cell {best(board)}.")


@pytest.fixture(scope="module")
def honest_games():
    return play(honest)


def replies(game):
    return [m["content"] for m in game.completion if m["role"] == "user"]


def play(policy):
    env = stated_game_env()
    groups = rlve.evaluate(env, ScriptedEngine(policy), GAMES, 1, seed=0).groups
    return [g.trajectories[0] for g in groups]


def threatened_turns(game) -> list[bool]:
    """Whether each answer of `game` faced a position where a mark could complete three."""
    boards = [m["content"] for m in game.prompt[1:] + game.completion if m["role"] == "user"]
    return [has_threats(parse_board(board)) for board in boards[: game.num_turns]]


def test_an_honest_statement_earns_its_share_at_its_own_turn_where_there_is_a_threat(
    honest_games,
):
    paid = 0
    for game in honest_games:
        m = game.metrics
        assert (
            m["game/threats_stated_right"] == 1.0
            and m["game/threats_found"] == sum(threatened_turns(game)) == m["game/threats_chances"]
        )
        # a best move each turn: no regret, no invalid move; format 0.2 / answers each, and
        # 0.2 / answers more for the answers to a position with a threat
        share = 0.2 / game.num_turns
        expected = [share + share * threatened for threatened in threatened_turns(game)]
        assert game.turn_rewards == pytest.approx(expected)
        paid += sum(threatened_turns(game))
        assert game.reward == pytest.approx(
            m["game/win"] + 0.5 * m["game/draw"] + 0.2 + share * sum(threatened_turns(game))
        )
    assert 0 < paid < sum(g.num_turns for g in honest_games)  # both kinds of position


@pytest.mark.parametrize(
    "cheat",
    [states_every_cell, states_nothing, repeats_the_last_statement, states_wrong_and_moves_right,
     always_no_threat],
)  # fmt: skip
def test_playing_the_same_moves_with_a_worse_statement_earns_less_in_every_game(
    honest_games, cheat
):
    cheats = play(cheat)
    for fair, game in zip(honest_games, cheats, strict=True):
        assert replies(game) == replies(fair)  # the same moves, so the same game
        assert game.reward <= fair.reward + 1e-9
        # what it lost: 0.2 / answers for each position with a threat it did not state right
        missed = fair.metrics["game/threats_found"] - game.metrics["game/threats_found"]
        assert game.reward == pytest.approx(fair.reward - WEIGHT * missed / game.num_turns)
    assert sum(g.reward for g in cheats) < sum(g.reward for g in honest_games)


def test_saying_no_line_every_turn_is_right_often_and_earns_nothing():
    """The statement a student collapsed to under the first form of this reward, which paid
    every position: "No line has two of a mark." is right wherever there is no threat."""
    games = play(always_no_threat)
    stated = sum(g.metrics["game/threats_stated_right"] * g.num_turns for g in games)
    assert stated / sum(g.num_turns for g in games) > 0.5
    assert sum(g.metrics["game/threats_found"] for g in games) == 0
    assert all(sum(g.turn_rewards) == pytest.approx(0.2) for g in games)  # the format only


def test_a_right_statement_does_not_buy_a_bad_move(honest_games):
    """The move's own reward dominates: stating right and playing the worst cell earns less than
    stating nothing and playing the best one, in every game where the worst cell gave anything
    up (each result level costs 1.0, every statement together at most 0.2)."""
    right_but_worst = play(states_right_and_moves_worst)
    silent_but_best = play(states_nothing)
    gave_up = 0
    for bad, good in zip(right_but_worst, silent_but_best, strict=True):
        assert bad.metrics["game/threats_stated_right"] == 1.0
        assert good.metrics["game/threats_stated_right"] == 0.0
        if bad.metrics["game/regret"] > 0:
            gave_up += 1
            assert bad.reward < good.reward
    assert gave_up > GAMES / 2
    # the monitor's escape signal: answers stating right whose move gave something up
    assert sum(g.metrics["game/stated_right_moved_wrong"] for g in right_but_worst) > 0
    assert all(g.metrics["game/stated_right_moved_wrong"] == 0 for g in silent_but_best)
    assert sum(g.reward for g in right_but_worst) < sum(g.reward for g in silent_but_best)
