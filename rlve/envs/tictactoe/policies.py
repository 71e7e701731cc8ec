"""Scripted tic-tac-toe players that see only the conversation, as a model does.

Each policy reads the board from the last message with `parse_board` and answers in the format the
environment rewards (`<think>...</think>` then `<move>N</move>`). They serve as test opponents,
evaluation baselines and, with noise, as the SFT teacher of the embedded demo.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rlve.envs.tictactoe.game import (
    O_MARK,
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
from rlve.types import Message

Policy = Callable[[list[Message], random.Random | None], str]
"""policy(messages, rng) -> the assistant's answer text. rng None means deterministic."""


def _board_of(messages: list[Message]) -> Board:
    return parse_board(messages[-1]["content"])


def format_answer(cell: int, reason: str) -> str:
    """The answer text: a one-line reason in a think block, then the move tag."""
    return f"<think>{reason}</think>\n<move>{cell}</move>"


def _reason(board: Board, cell: int) -> str:
    """A one-line justification of X playing `cell`, from the minimax score of that move."""
    if winner(place(board, cell, X_MARK)) == X_MARK:
        return f"Cell {cell} completes three in a row."
    if winner(place(board, cell, O_MARK)) == O_MARK:
        return f"Cell {cell} blocks O's line."
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
    return format_answer(cell, _reason(board, cell))


def random_policy(messages: list[Message], rng: random.Random | None = None) -> str:
    """A uniformly random free cell; without `rng`, seeded from the board so it is repeatable."""
    board = _board_of(messages)
    rng = rng if rng is not None else random.Random(f"random_policy_{board_key(board)}")
    cell = rng.choice(free_cells(board))
    return format_answer(cell, f"Cell {cell} is free.")


def noisy_minimax_policy(noise: float) -> Policy:
    """A policy playing a random free cell with probability `noise`, else a random best move."""
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")

    def policy(messages: list[Message], rng: random.Random | None = None) -> str:
        board = _board_of(messages)
        if rng is None:
            rng = random.Random(f"noisy_minimax_{noise}_{board_key(board)}")
        cell = noisy_best_move(board, X_MARK, noise, rng)
        if cell in best_moves(board, X_MARK):
            return format_answer(cell, _reason(board, cell))
        # A deliberate mistake still gets a plausible, format-valid answer.
        return format_answer(cell, f"Cell {cell} looks good to me.")

    policy.__name__ = f"noisy_minimax_policy_{noise}"
    return policy
