"""Self-play: the policy plays O too, in a conversation of its own (a seat, rlve.rollout.seat).

O's seat sees the board with the marks swapped, so every position reads as one where it plays X:
the same system prompt, the same messages and the same skill as in the games against the
scripted opponent. Its side of the game (result from its view, invalid moves, answers in the
right format, per-turn penalties) lives in the seat's own state, which the rubric scores as it
scores X's. An O seat that gives no valid move in `SEAT_ATTEMPTS` answers (or has no room left
under the episode's token limit) has a random free cell played for it, seeded by the rollout, so
the game X is learning from goes on; its invalid answers still cost it.
"""

from __future__ import annotations

import random

from rlve.envs.base import State
from rlve.envs.tictactoe.game import (
    O_MARK,
    X_MARK,
    Board,
    InvalidMove,
    answered_cell,
    board_key,
    free_cells,
)

SEAT_ATTEMPTS = 3
"""answers the O seat gets for one move before a random free cell is played for it"""

OPPONENTS = ("scripted", "self")
"""who plays O: the seeded minimax opponent of the dataset, or the policy itself"""

_FLIPPED = {"win": "loss", "loss": "win", "draw": "draw", None: None}


def swap_marks(board: Board) -> Board:
    """The board as the other player sees it: X and O exchanged."""
    return tuple({X_MARK: O_MARK, O_MARK: X_MARK}.get(cell, cell) for cell in board)


def seat_result(result: str | None) -> str | None:
    """X's result ("win", "loss", "draw", None: unfinished) as O's seat sees it."""
    return _FLIPPED[result]


def plays_self(example_index: int, scripted_fraction: float) -> bool:
    """Whether game `example_index` of a self-play dataset has the policy as O: exactly a
    `scripted_fraction` share of every run of consecutive games is scripted, spread evenly."""
    scripted = int((example_index + 1) * scripted_fraction) > int(example_index * scripted_fraction)
    return not scripted


async def seat_move(state: State, board: Board, x_cell: int | None, referee) -> int:
    """O's move on `board` (X to have just played `x_cell`; None: O opens the game), asked of
    the O seat, which is opened on its first move. The environment (`referee`) records the
    seat's answers' format, invalid answers and mistakes in the seat's state (`note_answer`,
    `count_invalid`, `judge_move`); the seat reads the referee's `wording`."""
    view = swap_marks(board)
    words = referee.wording
    seat = state.get("o_seat")
    if seat is None:
        opening = words.turn_message(view, words.opening_status(x_cell))
        system = state["prompt"][0]
        seat = state["open_seat"]([system, {"role": "user", "content": opening}])
        seat.state.update(result=None, invalid_moves=0)
        state["o_seat"] = seat
    else:
        status = words.opponent_played_status(x_cell)
        seat.tell([{"role": "user", "content": words.turn_message(view, status)}])
    for _ in range(SEAT_ATTEMPTS):
        text = await seat.play()
        if text is None:
            break
        referee.note_answer(seat.state, text, view)
        try:
            cell = answered_cell(text, view)
        except InvalidMove as invalid:
            referee.count_invalid(seat.state, view)
            retry = words.invalid_move_message(invalid.reason, view)
            seat.tell([{"role": "user", "content": retry}])
            continue
        referee.judge_move(seat.state, view, cell)
        return cell
    rng = random.Random(f"seat_{state['seed']}_{board_key(board)}")
    return rng.choice(free_cells(board))


def finish_seat(state: State, result: str | None) -> None:
    """Write the game's end into the O seat's state, from O's view."""
    seat = state.get("o_seat")
    if seat is not None:
        seat.state["result"] = seat_result(result)
