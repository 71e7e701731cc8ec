"""The tic-tac-toe environment: the model plays X against a seeded, partly random minimax opponent.

The LFM2 tic-tac-toe RL recipe: who starts is decided per example; the opponent plays a
random cell with probability `random_move_prob`, else a minimax move chosen at random among all
best moves, with an rng seeded from the example seed and the board so that equal positions get
equal replies within a rollout group; `random_move_prob` is stratified over the dataset so every
batch spans [min_random_move_prob, max_random_move_prob]. Invalid answers are told why and the game
goes on; the episode stops at `max_turns` model turns. Rubric: win 1 / draw 0.5 / else 0 (weight 1),
format share (weight 0.2), a flat -0.1 if any move was invalid (weight 1), or with
`invalid_penalty="per_move"` -0.1 for each invalid move, and with `mistake_penalty` p > 0, -p for
each mistake: a move that gives up a result best play keeps (a missed win, a missed block, a
fork let through; `game.mistake_kind`), counted as `game/mistakes` and by kind whatever p is,
with the moves where each kind was possible as `game/<kind>_chances` (`game.mistake_at_stake`).
With `regret_penalty` w > 0, -w for each result level a move gives up under best play (its
regret, `game.move_regret`: 0, 1 or 2), summed as `game/regret` whatever w is.
An answer that plays no move (invalid, truncated, missing) is priced, under both penalties, as
losing from its position (`game.dodge_regret`: 1 from a drawn one, 2 from a won one): never less
than a legal move there, so stalling does not pay; an unfinished game scores as a loss.
Each penalty is also credited to the move that cost it (`reward_turn`), for per-turn credit,
and so is each answer's part of the format share (FORMAT_WEIGHT / answers if it is well formed),
once the game is over or out of turns: without it per-turn credit put every answer's format on
the game's last move, and under the regret arm the answers' format fell
(docs/results/history.md, "A board that states the threats").
With `threats_weight` w > 0, each answer to a position with a threat whose think block states
them right (`threats.states_threats_right`, the threats board's words) earns w / answers at its
turn: "No line has two of a mark." said every turn earned 63% of an honest statement's reward
when every position counted, and a student collapsed to it (docs/results/history.md, "The
plain grid board"). Measured at any weight: `game/threats_stated_right` (the share of all
answers) and `game/threats_found` of `game/threats_chances` (positions with a threat). With
`hint_levels` n > 0, the curriculum's difficulty d is how often the threats line is shown after
the grid (1 - d/n of the turns; never from n on, the plain board) instead of the opponent's
strength.
With `opponent="self"` the policy plays O as well, in a seat of its own
(rlve.envs.tictactoe.self_play), except in a `scripted_fraction` share of the games; O's seat is
scored by the same rubric from its own view.
"""

from __future__ import annotations

import random

from rlve.envs.base import MultiTurnEnv, State
from rlve.envs.tictactoe.dataset import example_row, hint_probability, turn_wording
from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    MISTAKE_KINDS,
    O_MARK,
    X_MARK,
    Board,
    InvalidMove,
    answered_cell,
    dodge_regret,
    format_ok,
    free_cells,
    mistake_at_stake,
    mistake_kind,
    move_regret,
    opponent_move,
    opponent_rng,
    place,
    winner,
)
from rlve.envs.tictactoe.prompts import GRID, OPEN_LINES_RULE, THREATS, Wording
from rlve.envs.tictactoe.rewards import (
    FORMAT_WEIGHT,
    INVALID_MOVE_PENALTY,
    mistake_count,
)
from rlve.envs.tictactoe.self_play import finish_seat, seat_move
from rlve.envs.tictactoe.threats import has_threats, states_threats_right
from rlve.types import Example, Message, Trajectory


class TicTacToeEnv(MultiTurnEnv):
    """Tic-tac-toe as X; see the module docstring for the rules and the rubric."""

    escape_metrics = (
        "game/invalid",
        "game/unfinished",
        "game/malformed",
        "game/stated_right_moved_wrong",
    )
    legal_answer_metric = "game/legal_answers"

    invalid_penalty: str = "flat"
    """'flat' or 'per_move' (INVALID_PENALTIES): which invalid moves are credited their penalty
    as turn rewards (the first one, or each)"""

    difficulty_step: float = 0.1
    """how much each difficulty level lowers the opponent's random-move probability"""

    opponent: str = "scripted"
    """who plays O (self_play.OPPONENTS): the seeded minimax opponent, or the policy itself"""

    scripted_fraction: float = 0.0
    """with opponent "self": the share of games still played against the scripted opponent"""

    mistake_penalty: float = 0.0
    """what each mistake costs, credited to the move that made it (0: counted, not penalised)"""

    regret_penalty: float = 0.0
    """what each result level a move gives up costs, credited to that move (0: not penalised)"""

    threats_weight: float = 0.0
    """the rubric's weight of the share of answers that state their position's threats right
    where it has one, each credited its part at its own turn (0: measured only)"""

    wording: Wording = GRID
    """the messages' words and board rendering (prompts.BOARDS, the `board` argument)"""

    hint_levels: int = 0
    """> 0: the curriculum's difficulty is the threats hint (`hint_probability`), not the
    opponent's strength, which is drawn from the environment's random-move range instead"""

    random_move_range: tuple[float, float] = (0.2, 0.7)
    """the opponent's random-move probability range of the games the curriculum makes when its
    difficulty is the hint"""

    rules: str = "full"
    """which system prompt of the wording (its `system_prompts` key)"""

    def make_example(self, seed: int, difficulty: int) -> Example:
        """A fresh game at the curriculum's difficulty d. Without hint levels it sets the
        opponent, who plays random moves with probability max(0, 1 - d * difficulty_step)
        (d = 0: a random opponent; 10: perfect). With `hint_levels` n it sets the hint: each
        turn shows the threats line with probability `hint_probability(d, n)`, and the
        opponent's random-move probability is drawn from `random_move_range`."""
        if difficulty < 0:
            raise ValueError(f"difficulty must be >= 0, got {difficulty}")
        if self.hint_levels:
            low, high = self.random_move_range
            prob = random.Random(f"opponent_prob_{seed}").uniform(low, high)
            row = example_row(seed, prob, hint_prob=hint_probability(difficulty, self.hint_levels))
            wording = THREATS if row["info"].get("hint_prob", 0.0) > 0 else GRID
            system_prompt = wording.system_prompts[self.rules]
        else:
            prob = max(0.0, 1.0 - difficulty * self.difficulty_step)
            scripted = random.Random(f"opponent_{seed}").random() < self.scripted_fraction
            row = example_row(seed, prob, self.opponent == "self" and not scripted, self.wording)
            system_prompt = self.system_prompt
        prompt = [{"role": "system", "content": system_prompt},
                  {"role": "user", "content": row["question"]}]  # fmt: skip
        return Example(seed, prompt, "", {**row["info"], "difficulty": difficulty})

    def words(self, state: State, board: Board) -> Wording:
        """The wording of the next message on `board`: the environment's, or under a hint
        probability p the threats board's with probability p, drawn from the game's seed and
        the board (a group's games show the same hints at the same positions)."""
        return turn_wording(self.wording, state["info"], board)

    async def setup_state(self, state: State) -> None:
        info = state["info"]
        board = EMPTY_BOARD
        state.update(result=None, invalid_moves=0)
        if info.get("opponent") == "self" and info.get("opponent_starts"):
            cell = await seat_move(state, board, None, self)
            board = place(board, cell, O_MARK)
            status = self.wording.opening_status(cell)
            opening = {"role": "user", "content": self.wording.turn_message(board, status)}
            state["prompt"] = [state["prompt"][0], opening]
        elif info.get("opponent_starts"):
            # Replay the opening the dataset showed; the same seed gives the same cell.
            seed = info["example_seed"]
            cell = opponent_move(board, info["random_move_prob"], opponent_rng(seed, board))
            board = place(board, cell, O_MARK)
        state["board"] = board

    def privileged_view(self, messages: list[Message], state: State) -> list[Message] | None:
        """The threats board's view of the same messages, for a distillation teacher: the
        system prompt with the rule of the open-lines line, and the position followed by its
        open lines ("X can win at 5."), which the plain board leaves to the player to find."""
        board: Board | None = state.get("board")
        if board is None:
            return None
        words = self.words(state, board)
        viewed = []
        for message in messages:
            content = message.get("content")
            if not isinstance(content, str):
                pass
            elif message["role"] == "system" and OPEN_LINES_RULE not in content:
                content += OPEN_LINES_RULE
            elif message["role"] == "user":
                content = words.with_open_lines(content, board)
            viewed.append({**message, "content": content})
        return viewed

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        board: Board = state["board"]
        text = str(messages[-1].get("content") or "")
        self.note_answer(state, text, board)
        if state["turn"] >= self.max_turns:  # no answer follows this one
            self.credit_answers(state)
        try:
            cell = answered_cell(text, board)
        except InvalidMove as invalid:
            self.count_invalid(state, board)
            retry = self.words(state, board).invalid_move_message(invalid.reason, board)
            return [{"role": "user", "content": retry}]
        self.judge_move(state, board, cell)
        board = place(board, cell, X_MARK)
        if self._game_over(board, state):
            return [{"role": "user", "content": self.wording.final_message(state["result"], board)}]
        info = state["info"]
        if info.get("opponent") == "self":
            reply = await seat_move(state, board, cell, self)
        else:
            reply = opponent_move(
                board, info["random_move_prob"], opponent_rng(info["example_seed"], board)
            )
        board = place(board, reply, O_MARK)
        if self._game_over(board, state):
            return [{"role": "user", "content": self.wording.final_message(state["result"], board)}]
        state["board"] = board
        words = self.words(state, board)
        status = words.opponent_played_status(reply)
        return [{"role": "user", "content": words.turn_message(board, status)}]

    def count_invalid(self, state: State, board: Board) -> None:
        """An invalid answer of the player whose state this is (X's, or O's seat's) on `board`
        (its own view): the invalid-move penalty, and under a mistake or regret penalty the
        price of losing from `board`, credited to that answer."""
        state["invalid_moves"] += 1
        self.note_move_given_up(state)
        cost = 0.0
        if self.invalid_penalty == "per_move" or state["invalid_moves"] == 1:
            cost += INVALID_MOVE_PENALTY
        dodge = dodge_regret(board, X_MARK)
        state["dodged"] = state.get("dodged", 0) + dodge
        cost -= (self.mistake_penalty + self.regret_penalty) * dodge
        if cost:
            self.reward_turn(state, cost)  # the answer that cost it

    def note_answer(self, state: State, text: str, board: Board) -> None:
        """Record whether an answer of the player whose state this is was well formed, and
        whether it stated the threats of `board` (the position it answered, its own view)."""
        state.setdefault("answer_formats", []).append(format_ok(text))
        right = states_threats_right(text, board)
        state.setdefault("answer_threats", []).append(right)
        threatened = has_threats(board)
        state.setdefault("answer_threat_found", []).append(right and threatened)
        state["threats_chances"] = state.get("threats_chances", 0) + threatened

    def note_move_given_up(self, state: State) -> None:
        """Count the answer just noted as one whose move gave up a result (or played none) when
        its statement of the threats was right: reasons bought without the play they should
        lead to, an escape the hacking monitor watches (`game/stated_right_moved_wrong`)."""
        if state.get("answer_threats", [False])[-1]:
            state["stated_right_moved_wrong"] = state.get("stated_right_moved_wrong", 0) + 1

    def credit_answers(self, state: State) -> None:
        """Credit each answer of the player whose state this is its part of the format reward
        and, under `threats_weight`, of the stated-threats reward, once, at the end of its game
        or its last turn. Skipped when an answer is missing (an episode cut short by its context
        or time limit): the last turn then keeps those rewards, as it would without this."""
        if state.get("answers_credited"):
            return
        state["answers_credited"] = True
        turns = state["turn"]
        for key, weight in (("answer_formats", FORMAT_WEIGHT),
                            ("answer_threat_found", self.threats_weight)):  # fmt: skip
            marks = state.get(key, [])
            if weight and marks and len(marks) == turns:
                for turn, ok in enumerate(marks):
                    if ok:
                        self.reward_turn(state, weight / len(marks), turn)

    def judge_move(self, state: State, board: Board, cell: int) -> None:
        """Count a valid move of the player whose state this is (as X on `board`, its own view)
        as a mistake if it is one, and credit its penalty to that move; count it as a chance of
        the mistake at stake on `board`, if any."""
        stake = mistake_at_stake(board, X_MARK)
        if stake is not None:
            state[f"{stake}_chances"] = state.get(f"{stake}_chances", 0) + 1
        kind = mistake_kind(board, cell, X_MARK)
        cost = 0.0
        if kind is not None:
            state[kind] = state.get(kind, 0) + 1
            cost += self.mistake_penalty
        regret = move_regret(board, cell, X_MARK)
        state["regret"] = state.get("regret", 0) + regret
        if regret:
            self.note_move_given_up(state)
        cost += self.regret_penalty * regret
        if cost:
            self.reward_turn(state, -cost)

    def _game_over(self, board: Board, state: State) -> bool:
        state["board"] = board
        mark = winner(board)
        if mark is None and free_cells(board):
            return False
        state["result"] = {X_MARK: "win", O_MARK: "loss", None: "draw"}[mark]
        finish_seat(state, state["result"])
        self.credit_answers(state)
        if "o_seat" in state:
            self.credit_answers(state["o_seat"].state)
        self.end_episode(state, "game_over")
        return True

    def accuracy(self, trajectory: Trajectory) -> float:
        """A game counts as solved when the model did not lose it (a win or a draw). With
        `hint_levels`, where the curriculum's level is the hint and the opponent's strength is
        drawn at random, when every answer was a legal move that gave nothing up (regret 0):
        a result would measure the opponent drawn as much as the player."""
        m = trajectory.metrics
        if self.hint_levels:
            clean = m.get("game/regret", 0) == 0 and m.get("game/invalid_moves", 0) == 0
            return float(clean and m.get("game/unfinished", 0) == 0)
        return float(m.get("game/win", 0) + m.get("game/draw", 0))

    def episode_metrics(self, state: State) -> dict[str, float]:
        result = state.get("result")
        answers = max(state["turn"], 1)
        formatted = sum(state.get("answer_formats", [])) / answers
        return {
            "game/win": float(result == "win"),
            "game/draw": float(result == "draw"),
            "game/loss": float(result == "loss"),
            "game/unfinished": float(result is None),
            "game/invalid": float(state.get("invalid_moves", 0) > 0),
            "game/invalid_moves": float(state.get("invalid_moves", 0)),
            "game/legal_answers": (state["turn"] - state.get("invalid_moves", 0)) / answers,
            "game/mistakes": float(mistake_count(state)),
            "game/regret": float(state.get("regret", 0)),
            **{f"game/{kind}": float(state.get(kind, 0)) for kind in MISTAKE_KINDS},
            **{
                f"game/{kind}_chances": float(state.get(f"{kind}_chances", 0))
                for kind in MISTAKE_KINDS
            },
            "game/self_play": float(state["info"].get("opponent") == "self"),
            "game/format": formatted,
            "game/malformed": 1.0 - formatted,
            "game/threats_stated_right": sum(state.get("answer_threats", [])) / answers,
            "game/threats_found": float(sum(state.get("answer_threat_found", []))),
            "game/threats_chances": float(state.get("threats_chances", 0)),
            "game/stated_right_moved_wrong": state.get("stated_right_moved_wrong", 0) / answers,
            "game/hint_prob": float(state["info"].get("hint_prob", 0.0)),
        }
