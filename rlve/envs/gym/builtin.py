"""Verifiable environments of our own, small enough to read as examples of the interface.

- `rlve/sorting`: sort 3 + 2d integers from [0, 10 * length] in ascending order.
- `rlve/sorting_fine`: the same with one more integer per level (3 + d), for a curriculum that
  climbs in small steps.
- `rlve/multiplication`: multiply two numbers of d + 1 digits each.
- `rlve/tictactoe_best_move`: name a minimax-best move for X; the board holds 2 * (3 - d) pieces
  (6 at d = 0, none from d = 3 on), so higher difficulty means a deeper game tree.
"""

from __future__ import annotations

import random
import re

from rlve.envs.gym.verifiable import Problem, Verdict, VerifiableEnv
from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    O_MARK,
    X_MARK,
    best_moves,
    board_from_string,
    board_key,
    free_cells,
    is_over,
    place,
    render_board,
)

INVALID_SOLUTION = -0.5
"""a readable answer of the wrong shape (wrong length, occupied cell): the RLVE convention"""

_INTEGERS = re.compile(r"[+-]?\d{1,30}")


def _read_integers(text: str) -> list[int] | None:
    """The integers of a space/comma separated list, or None if anything else is in it."""
    tokens = text.replace(",", " ").split()
    if not tokens or not all(_INTEGERS.fullmatch(t) for t in tokens):
        return None
    return [int(t) for t in tokens]


class SortingEnv(VerifiableEnv):
    """Sort a list of integers; reward = (share of positions right) ** 5."""

    name = "rlve/sorting"
    beta = 5

    @staticmethod
    def length(difficulty: int) -> int:
        return 3 + 2 * difficulty

    def generate(self, seed: int, difficulty: int) -> Problem:
        rng = random.Random(seed)
        length = self.length(difficulty)
        numbers = [rng.randint(0, 10 * length) for _ in range(length)]
        answer = " ".join(map(str, sorted(numbers)))
        prompt = (
            f"Sort these numbers in ascending order:\n{' '.join(map(str, numbers))}\n"
            "Write the sorted numbers on one line, separated by spaces."
        )
        return Problem(prompt, {"numbers": numbers}, {"length": length}, answer)

    def check(self, problem: Problem, answer: str) -> Verdict:
        given = _read_integers(answer)
        if given is None:
            return self.format_failure("the answer is not a list of integers")
        expected = sorted(problem.data["numbers"])
        if len(given) != len(expected):
            return self.verdict(
                INVALID_SOLUTION, detail=f"{len(given)} numbers, not {len(expected)}"
            )
        right = sum(a == b for a, b in zip(given, expected, strict=True))
        return self.verdict((right / len(expected)) ** self.beta)


class FineSortingEnv(SortingEnv):
    """Sorting with one more integer per difficulty level."""

    name = "rlve/sorting_fine"

    @staticmethod
    def length(difficulty: int) -> int:
        return 3 + difficulty


class MultiplicationEnv(VerifiableEnv):
    """Multiply two (d + 1)-digit numbers; 1 if exact, 0 for another integer."""

    name = "rlve/multiplication"

    @staticmethod
    def digits(difficulty: int) -> int:
        return difficulty + 1

    def generate(self, seed: int, difficulty: int) -> Problem:
        rng = random.Random(seed)
        digits = self.digits(difficulty)
        low, high = (10 ** (digits - 1) if digits > 1 else 0), 10**digits - 1
        a, b = rng.randint(low, high), rng.randint(low, high)
        prompt = f"Compute {a} * {b}. Give the exact integer."
        return Problem(prompt, {"a": a, "b": b}, {"digits": digits}, str(a * b))

    def check(self, problem: Problem, answer: str) -> Verdict:
        cleaned = answer.replace(",", "").strip()
        if not re.fullmatch(r"[+-]?\d{1,400}", cleaned):
            return self.format_failure("the answer is not an integer")
        correct = int(cleaned) == problem.data["a"] * problem.data["b"]
        return self.verdict(1.0 if correct else 0.0)


class TicTacToeBestMoveEnv(VerifiableEnv):
    """Name a minimax-best move for X: 1 for a best move, 0 for another free cell, -0.5 for an
    occupied cell or a number outside 0-8."""

    name = "rlve/tictactoe_best_move"

    @staticmethod
    def pieces(difficulty: int) -> int:
        return 2 * max(0, 3 - difficulty)

    def generate(self, seed: int, difficulty: int) -> Problem:
        rng = random.Random(seed)
        pieces = self.pieces(difficulty)
        board = _random_position(rng, pieces)
        best = best_moves(board, X_MARK)
        prompt = (
            "You play X in tic-tac-toe and it is your move. Free cells show their number:\n"
            f"{render_board(board)}\n"
            "Which cell (0-8) is a best move, assuming both players play perfectly afterwards?"
        )
        return Problem(prompt, {"board": board_key(board)}, {"pieces": pieces}, str(best[0]))

    def check(self, problem: Problem, answer: str) -> Verdict:
        if not re.fullmatch(r"[+-]?\d{1,3}", answer.strip()):
            return self.format_failure("the answer is not a cell number")
        cell = int(answer)
        board = board_from_string(problem.data["board"])
        if cell not in free_cells(board):
            return self.verdict(INVALID_SOLUTION, detail=f"cell {cell} is not a free cell")
        return self.verdict(1.0 if cell in best_moves(board, X_MARK) else 0.0)


def _random_position(rng: random.Random, pieces: int):
    """A position with `pieces` marks (X and O alternating, X first) where X is to move and the
    game is not over, reached by random play; restarts the game if it ends early."""
    while True:
        board = EMPTY_BOARD
        mark = X_MARK
        for _ in range(pieces):
            board = place(board, rng.choice(free_cells(board)), mark)
            mark = O_MARK if mark == X_MARK else X_MARK
            if is_over(board):
                break
        if not is_over(board):
            return board


BUILTIN_ENVS: dict[str, type[VerifiableEnv]] = {
    cls.name: cls for cls in (SortingEnv, FineSortingEnv, MultiplicationEnv, TicTacToeBestMoveEnv)
}
"""our own verifiable environments by registry name"""
