"""Scripted tic-tac-toe players that see only the conversation, as a model does.

Each policy reads the board from the last message with `parse_board` and answers in the format the
environment rewards (`<think>...</think>` then `<move>N</move>`). They serve as test opponents,
evaluation baselines and, with noise, as the SFT teacher of the embedded demo.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rlve.envs.tictactoe.game import (
    EMPTY,
    O_MARK,
    WIN_LINES,
    X_MARK,
    Board,
    best_moves,
    board_key,
    free_cells,
    minimax_scores,
    noisy_best_move,
    parse_board,
    place,
    winner,
)
from rlve.envs.tictactoe.prompts import open_lines
from rlve.types import Message

Policy = Callable[[list[Message], random.Random | None], str]
"""policy(messages, rng) -> the assistant's answer text. rng None means deterministic."""


def _board_of(messages: list[Message]) -> Board:
    return parse_board(messages[-1]["content"])


def format_answer(cell: int, reason: str) -> str:
    """The answer text: a one-line reason in a think block, then the move tag."""
    return f"<think>{reason}</think>\n<move>{cell}</move>"


def verdict_reason(board: Board, cell: int) -> str:
    """A one-line justification of X playing `cell` that names the cell first, then why: the
    move is chosen before a word of reasoning is written (every teacher up to 2026-12-04)."""
    if winner(place(board, cell, X_MARK)) == X_MARK:
        return f"Cell {cell} completes three in a row."
    if winner(place(board, cell, O_MARK)) == O_MARK:
        return f"Cell {cell} blocks O's line."
    return _safety(board, cell)


def lines_reason(board: Board, cell: int) -> str:
    """A justification of X playing `cell` that reads the board before it names the move: the
    two marks of a line X can complete ("X has 3 and 4: 5 wins."), else of a line O could
    complete ("O has 0 and 4: 8 blocks."), else says there is no such line, then why `cell`.
    Written in that order, the tokens that pick a block come after the ones that find it."""
    for mark, verb in ((X_MARK, "wins"), (O_MARK, "blocks")):
        pair = _pair_completed_by(board, cell, mark)
        if pair is not None:
            return f"{mark} has {pair[0]} and {pair[1]}: {cell} {verb}."
        pairs = _open_pairs(board, mark)
        if pairs:  # a line `cell` leaves open (a lost position, or not a best move)
            return f"{mark} has {pairs[0][0]} and {pairs[0][1]}. {_safety(board, cell)}"
    return f"No line has two. {_safety(board, cell)}"


def _open_pairs(board: Board, mark: str) -> list[tuple[int, int]]:
    """The two marked cells of each line holding two of `mark` and one free cell."""
    pairs = []
    for line in WIN_LINES:
        marked = [c for c in line if board[c] == mark]
        if len(marked) == 2 and any(board[c] == EMPTY for c in line):
            pairs.append((marked[0], marked[1]))
    return pairs


def _pair_completed_by(board: Board, cell: int, mark: str) -> tuple[int, int] | None:
    """The two `mark` cells of the first line that `cell` completes for `mark`, if any."""
    for line in WIN_LINES:
        if cell in line and all(board[c] == mark for c in line if c != cell):
            a, b = (c for c in line if c != cell)
            return a, b
    return None


def _safety(board: Board, cell: int) -> str:
    """Why X plays `cell` when it neither wins nor blocks, from the move's minimax score."""
    score = minimax_scores(board, X_MARK)[cell]
    if score > 0:
        return f"Cell {cell} sets up a win O cannot stop."
    if score == 0:
        return f"Cell {cell} keeps the game safe."
    return f"Cell {cell} is the best of bad options."


def minimax_policy(messages: list[Message], rng: random.Random | None = None) -> str:
    """Perfect play as X: a random best move when `rng` is given, else the lowest best cell."""
    board = _board_of(messages)
    moves = best_moves(board, X_MARK)
    cell = rng.choice(moves) if rng is not None else moves[0]
    return format_answer(cell, verdict_reason(board, cell))


def random_policy(messages: list[Message], rng: random.Random | None = None) -> str:
    """A uniformly random free cell; without `rng`, seeded from the board so it is repeatable."""
    board = _board_of(messages)
    rng = rng if rng is not None else random.Random(f"random_policy_{board_key(board)}")
    cell = rng.choice(free_cells(board))
    return format_answer(cell, f"Cell {cell} is free.")


def threats_reason(board: Board, cell: int) -> str:
    """The position's threats first, in the words of the threats board's line ("O can win at
    8." or "No line has two of a mark."), then the move's verdict ("Cell 8 blocks O's line."):
    the student learns to compute the line that board hands it, and the environment can check
    the statement (rlve.envs.tictactoe.threats)."""
    return f"{open_lines(board)} {verdict_reason(board, cell)}"


REASONS = {"verdict": verdict_reason, "lines": lines_reason, "threats": threats_reason}
"""how a teacher words its reasons, by name (`noisy_minimax_policy`'s `reasons`)"""


def noisy_minimax_policy(noise: float, reasons: str = "verdict") -> Policy:
    """A policy playing a random free cell with probability `noise`, else a random best move,
    explained in the style REASONS names. Its moves do not depend on `reasons`."""
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    if reasons not in REASONS:
        raise ValueError(f"reasons must be one of {sorted(REASONS)}, got {reasons!r}")
    reason = REASONS[reasons]

    def policy(messages: list[Message], rng: random.Random | None = None) -> str:
        board = _board_of(messages)
        if rng is None:
            rng = random.Random(f"noisy_minimax_{noise}_{board_key(board)}")
        cell = noisy_best_move(board, X_MARK, noise, rng)
        if cell in best_moves(board, X_MARK):
            return format_answer(cell, reason(board, cell))
        # A deliberate mistake still gets a plausible, format-valid answer, its statement of
        # the threats as right as a best move's: only the move is off.
        opening = f"{open_lines(board)} " if reasons == "threats" else ""
        return format_answer(cell, f"{opening}Cell {cell} looks good to me.")

    policy.__name__ = f"noisy_minimax_policy_{noise}" + (
        "" if reasons == "verdict" else f"_{reasons}"
    )
    return policy
