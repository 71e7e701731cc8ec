"""Pure tic-tac-toe rules: boards, moves, minimax, the seeded opponent and the text parsers.

No state and no hidden randomness: every random choice goes through an `rng` argument, so the
environment can make the same position in one rollout group always get the same opponent reply.
"""

from __future__ import annotations

import random
import re
from functools import cache

from rlve.envs.parsers import tagged_bodies

X_MARK = "X"
O_MARK = "O"
EMPTY = " "

Board = tuple[str, ...]
"""Nine cells, row-major (0 1 2 / 3 4 5 / 6 7 8), each "X", "O" or " "; hashable for memoising."""

EMPTY_BOARD: Board = (EMPTY,) * 9

WIN_LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)

ROW_SEPARATOR = "---------"


class InvalidMove(ValueError):
    """A move the rules forbid; `reason` is the sentence shown to the model."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def other(mark: str) -> str:
    """The opponent of `mark`."""
    return O_MARK if mark == X_MARK else X_MARK


def board_from_string(cells: str) -> Board:
    """Build a board from its 9-character key, e.g. "XX OO    " (the inverse of `board_key`)."""
    if len(cells) != 9 or any(c not in (X_MARK, O_MARK, EMPTY) for c in cells):
        raise ValueError(f"a board key is 9 characters of 'X', 'O' or ' ', got {cells!r}")
    return tuple(cells)


def board_key(board: Board) -> str:
    """The 9-character cell string, e.g. "X   O    "; used in opponent seeds."""
    return "".join(board)


def winner(board: Board) -> str | None:
    """The mark owning a full line, or None."""
    for a, b, c in WIN_LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


def free_cells(board: Board) -> list[int]:
    """Indices of the empty cells, ascending."""
    return [i for i, cell in enumerate(board) if cell == EMPTY]


def is_over(board: Board) -> bool:
    """Someone won or the board is full."""
    return winner(board) is not None or EMPTY not in board


def place(board: Board, cell: int, mark: str) -> Board:
    """The board after `mark` takes `cell`; InvalidMove if the cell is off the board or taken."""
    if mark not in (X_MARK, O_MARK):
        raise ValueError(f"mark must be 'X' or 'O', got {mark!r}")
    if not 0 <= cell <= 8:
        raise InvalidMove(f"cell {cell} is out of range; choose a cell from 0 to 8")
    if board[cell] != EMPTY:
        raise InvalidMove(f"cell {cell} is already taken by {board[cell]}")
    return board[:cell] + (mark,) + board[cell + 1 :]


# ---------------------------------------------------------------- rendering and reading boards


def _shown_cells(board: Board) -> list[str]:
    return [cell if cell != EMPTY else str(i) for i, cell in enumerate(board)]


def render_board(board: Board) -> str:
    """Three rows " a | b | c" separated by "---------"; a free cell shows its own digit."""
    shown = _shown_cells(board)
    rows = [f" {shown[r]} | {shown[r + 1]} | {shown[r + 2]}" for r in (0, 3, 6)]
    return f"\n{ROW_SEPARATOR}\n".join(rows)


def render_compact_board(board: Board) -> str:
    """Three rows "a b c", e.g. "X O 2" / "3 X 5" / "6 7 O"; a free cell shows its own digit.

    The spaces keep each mark a token of its own: SmolLM2 reads "XXO" as "XX" + "O".
    """
    shown = _shown_cells(board)
    return "\n".join(" ".join(shown[r : r + 3]) for r in (0, 3, 6))


# Fixed-width patterns (no nested quantifiers), so scanning a long text stays linear.
_CELL = r"([XO0-8])"
_ROW = rf" {_CELL} \| {_CELL} \| {_CELL}"
_RENDERED_BOARD = re.compile(rf"{_ROW}\n{ROW_SEPARATOR}\n{_ROW}\n{ROW_SEPARATOR}\n{_ROW}")
# A compact board is three whole lines: "X O 2" inside a longer line is not a row.
_COMPACT_ROW = rf"{_CELL} {_CELL} {_CELL}"
_COMPACT_BOARD = re.compile(rf"^{_COMPACT_ROW}\n{_COMPACT_ROW}\n{_COMPACT_ROW}$", re.MULTILINE)


def parse_board(text: str) -> Board:
    """The last board in `text` written by `render_board` or `render_compact_board`; ValueError
    if there is none.

    A digit only counts in its own cell ("4" in the centre), so a line of cell numbers that is
    not a board is never mistaken for one.
    """
    found: Board | None = None
    last_end = -1
    for pattern in (_RENDERED_BOARD, _COMPACT_BOARD):
        for match in pattern.finditer(text):
            shown = match.groups()
            if match.end() > last_end and all(
                c in (X_MARK, O_MARK) or c == str(i) for i, c in enumerate(shown)
            ):
                found = tuple(c if c in (X_MARK, O_MARK) else EMPTY for c in shown)
                last_end = match.end()
    if found is None:
        raise ValueError("no rendered tic-tac-toe board found in the text")
    return found


# ---------------------------------------------------------------- minimax


@cache
def _move_scores(board: Board, player: str) -> tuple[tuple[int, int], ...]:
    """(cell, score) for each free cell; the game-tree recursion behind `minimax_scores`."""
    scores = []
    for cell in free_cells(board):
        after = place(board, cell, player)
        if winner(after) == player:
            # Counting the cells left makes a quicker win worth more (and a slower loss less bad).
            score = 1 + after.count(EMPTY)
        elif EMPTY not in after:
            score = 0
        else:
            score = -max(s for _, s in _move_scores(after, other(player)))
        scores.append((cell, score))
    return tuple(scores)


def minimax_scores(board: Board, player: str) -> dict[int, int]:
    """Score of each legal move of `player`, both sides playing perfectly afterwards.

    A win scores 1 + the number of free cells left after the winning move, a loss the negative
    of the opponent's win score, a draw 0. Memoised on (board, player): about 5,500 positions.
    """
    if player not in (X_MARK, O_MARK):
        raise ValueError(f"player must be 'X' or 'O', got {player!r}")
    if is_over(board):
        raise ValueError(f"the game is over on board {board_key(board)!r}; no moves to score")
    return dict(_move_scores(board, player))


def best_moves(board: Board, player: str) -> list[int]:
    """All moves sharing the best minimax score, ascending.

    Returning every tied move (not the first) lets callers break ties at random: a minimax that
    always took the first best cell was memorised by the trained model in the published recipe.
    """
    scores = minimax_scores(board, player)
    best = max(scores.values())
    return [cell for cell, score in scores.items() if score == best]


MISTAKE_KINDS = ("missed_win", "missed_block", "fork_allowed", "fork_missed")
"""what a mistake gave up: a win on the board, a block of the opponent's line, or (with neither
on the board) a draw, to a fork the opponent can now force, or a won position"""


def mistake_kind(board: Board, cell: int, player: str) -> str | None:
    """Which of MISTAKE_KINDS `player` playing the free `cell` is, or None if it keeps the best
    result (with best play on both sides) that the position offers. A mistake gives up a won
    position or turns a drawn one into a lost one; winning more slowly is not a mistake."""
    scores = minimax_scores(board, player)
    if _result(scores[cell]) >= _result(max(scores.values())):
        return None
    return _kind_at_stake(board, scores, player)


def mistake_at_stake(board: Board, player: str) -> str | None:
    """The kind of mistake (MISTAKE_KINDS) `player` can make in this position, None when every
    free cell keeps the best result (a lost position, a move that cannot go wrong). The kind is
    the position's, not the move's: `mistake_kind` names every mistake here the same."""
    scores = minimax_scores(board, player)
    if _result(min(scores.values())) == _result(max(scores.values())):
        return None
    return _kind_at_stake(board, scores, player)


def best_result(board: Board, player: str) -> int:
    """The result `player` to move keeps with best play on both sides: 1 won, 0 drawn, -1 lost."""
    return _result(max(minimax_scores(board, player).values()))


def move_regret(board: Board, cell: int, player: str) -> int:
    """How many result levels (won, drawn, lost) `player` gives up by playing the free `cell`,
    both sides playing best afterwards: 0 for a move that keeps the best result, 1 for a drawn
    position lost or a won one drawn, 2 for a won position lost. Minus the move's advantage
    under best play, V*(board) - Q*(board, cell), counted in results."""
    return best_result(board, player) - _result(minimax_scores(board, player)[cell])


def dodge_regret(board: Board, player: str) -> int:
    """What an answer that plays no move (invalid, truncated, missing) gives up: as much as
    losing from here, best_result + 1, which no legal move exceeds (`move_regret` <= it), so
    stalling never pays more than the worst legal move of the position."""
    return best_result(board, player) + 1


def _result(score: int) -> int:
    """A minimax score as the result it means: 1 won, 0 drawn, -1 lost."""
    return (score > 0) - (score < 0)


def _kind_at_stake(board: Board, scores: dict[int, int], player: str) -> str:
    """What a mistake gives up where some move of `player` gives up the best result: a win on
    the board, else a block, else a won position (fork_missed) or a draw (fork_allowed)."""
    opponent = other(player)
    if any(winner(place(board, c, player)) == player for c in scores):
        return "missed_win"
    if any(winner(place(board, c, opponent)) == opponent for c in scores):
        return "missed_block"
    return "fork_missed" if _result(max(scores.values())) > 0 else "fork_allowed"


# ---------------------------------------------------------------- the seeded opponent


def noisy_best_move(board: Board, mark: str, random_move_prob: float, rng: random.Random) -> int:
    """A uniformly random free cell with probability `random_move_prob`, else a random best move.

    Always draws `rng.random()` first and then exactly one `rng.choice`, whatever the branch,
    so the same rng state gives the same move.
    """
    if not 0.0 <= random_move_prob <= 1.0:
        raise ValueError(f"random_move_prob must be in [0, 1], got {random_move_prob}")
    play_randomly = rng.random() < random_move_prob
    candidates = free_cells(board) if play_randomly else best_moves(board, mark)
    return rng.choice(candidates)


def opponent_move(board: Board, random_move_prob: float, rng: random.Random) -> int:
    """The opponent's (O's) reply: see `noisy_best_move`."""
    return noisy_best_move(board, O_MARK, random_move_prob, rng)


def opponent_rng(example_seed: int | str, board: Board) -> random.Random:
    """The opponent's rng for one position, seeded from the string f"{example_seed}_{key}".

    `key` is `board_key(board)`, e.g. seed 7 on a board with X in the corner and O in the centre
    gives "7_X   O    ". Python seeds a Random from a string through SHA-512, so the stream does
    not depend on PYTHONHASHSEED: the same position in one rollout group gets the same reply in
    every process.
    """
    return random.Random(f"{example_seed}_{board_key(board)}")


# ---------------------------------------------------------------- reading the model's answer

# `[^<]*` cannot run past the next tag, so each "<move>" is scanned at most up to the following
# "<": linear time even on a megabyte of unclosed tags.
_MOVE_TAG = re.compile(r"<move>([^<]*)</move>")
_INTEGER = re.compile(r"[+-]?[0-9]+")

FORMAT_PATTERN = re.compile(r"<think>.*?</think>.*?<move>.*?</move>", re.DOTALL)
"""The answer shape the format reward checks: a think block, then a move tag."""


def parse_move(text: str) -> int | None:
    """The integer in the last `<move>N</move>` (spaces around N allowed); None otherwise."""
    contents = _MOVE_TAG.findall(text)
    if not contents:
        return None
    number = contents[-1].strip()
    if not _INTEGER.fullmatch(number):
        return None
    try:
        return int(number)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return None


NO_MOVE_REASON = "no move found; write your move as <move>N</move> with N a free cell"
"""The reason given when an answer has no parsable move tag."""


def answered_cell(text: str, board: Board) -> int:
    """The cell an answer's move tag names, when X may take it on `board`; InvalidMove (with the
    reason shown to the model) when the answer names none or a cell X may not take."""
    cell = parse_move(text)
    if cell is None:
        raise InvalidMove(NO_MOVE_REASON)
    place(board, cell, X_MARK)
    return cell


def think_text(text: str) -> str | None:
    """The first `<think>...</think>` block's text, stripped; None without one (linear time)."""
    body = next(tagged_bodies(text, "<think>", "</think>"), None)
    return None if body is None else body.strip()


def format_ok(text: str) -> bool:
    """Whether `FORMAT_PATTERN` matches somewhere in `text`, decided in linear time.

    `re.search` with the lazy pattern retries from every "<think>" and rescans the rest of the
    text each time (quadratic on hostile input). Taking the earliest occurrence of each tag in
    turn finds a match exactly when one exists, because an earlier tag never rules out a later
    one. Tested for agreement with `FORMAT_PATTERN.search`.
    """
    position = 0
    for tag in ("<think>", "</think>", "<move>", "</move>"):
        found = text.find(tag, position)
        if found == -1:
            return False
        position = found + len(tag)
    return True
