"""The words of the tic-tac-toe environment: its system prompts and the messages it sends.

Every environment message that asks for a move ends with the rendered board, so a model (or a
scripted policy using `parse_board`) can read the position from the last message alone. A
`Wording` per board rendering (BOARDS): "grid", the board the recipe's results were measured
with, and "compact", the same information in about half the tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    Board,
    free_cells,
    render_board,
    render_compact_board,
)
from rlve.envs.tictactoe.threats import NO_THREATS, threat_cells

GameResult = Literal["win", "loss", "draw"]

SYSTEM_PROMPT = f"""You are playing tic-tac-toe as X against an opponent playing O.
Players take turns placing their mark in a free cell; the first to get three in a row \
(horizontally, vertically or diagonally) wins. If the board fills up with no line, it is a draw.

The cells are numbered 0 to 8. A free cell is shown by its number, a taken one by its mark:
{render_board(EMPTY_BOARD)}

On each turn you may reason briefly inside <think>...</think>.
Then you MUST give your move as <move>N</move>, where N is the number of a free cell.
Example:
<think>The centre is free and takes part in four lines.</think>
<move>4</move>"""

SHORT_SYSTEM_PROMPT = """You play tic-tac-toe as X against O. The cells are numbered 0 to 8:
0 1 2
3 4 5
6 7 8
Three marks in a row, column or diagonal win. Each turn, reason briefly inside \
<think>...</think>, then give your move as <move>N</move> with N a free cell."""
"""The same rules in 84 SmolLM2 tokens instead of 195: every game of a small model on a CPU
carries the system prompt through every forward pass of training."""

COMPACT_SYSTEM_PROMPT = SYSTEM_PROMPT.replace(
    render_board(EMPTY_BOARD), render_compact_board(EMPTY_BOARD)
)
"""SYSTEM_PROMPT with the compact board drawn in place of the grid."""

COMPACT_SHORT_SYSTEM_PROMPT = f"""You play tic-tac-toe as X against O. The cells are numbered \
0 to 8:
{render_compact_board(EMPTY_BOARD)}
A taken cell shows its mark. Three marks in a row, column or diagonal win. Each turn, reason \
briefly inside <think>...</think>, then give your move as <move>N</move> with N a free cell."""
"""SHORT_SYSTEM_PROMPT for the compact board: one more sentence says how it shows the marks."""

FINAL_MESSAGES: dict[str, str] = {"win": "You win!", "loss": "You lose.", "draw": "It's a draw."}


@dataclass(frozen=True)
class Wording:
    """The environment's messages under one board rendering. Only the text differs: the game,
    the move format and the rewards are the same under every wording."""

    system_prompts: dict[str, str]
    """the system prompt by rules ("full": the rules with an example answer, "short")"""
    render: Callable[[Board], str]
    """the board as text (`parse_board` reads every rendering)"""
    gap: str
    """what separates the status line, the board and the lines after it"""
    lists_free_cells: bool
    """whether the board is followed by "Available positions: [...]" """
    played: str
    """the status line after the opponent's move; {cell} is its cell"""
    you_play_x: str
    """the start of a game's first status line"""
    you_move_first: str
    """the status line of a game X opens"""
    opponent_moves_first: str
    """the status line of a self-play game's dataset row (O's seat has not played yet)"""
    try_again: str
    """the last line after an invalid answer"""
    lists_open_lines: bool = False
    """whether a line after the board names the cells where X or O would complete three
    (`open_lines`): the position's threats read for the player, not found by it"""

    def opponent_played_status(self, cell: int) -> str:
        """The status line after the opponent's move."""
        return self.played.format(cell=cell)

    def opening_status(self, opponent_cell: int | None) -> str:
        """The first status line: X opens (None), or the opponent opened at `opponent_cell`."""
        if opponent_cell is None:
            return self.you_move_first
        return f"{self.you_play_x} {self.opponent_played_status(opponent_cell)}"

    def position(self, board: Board) -> str:
        """The board, then (in the grid wordings) the list of free cells and (in "threats") the
        open lines."""
        text = self.render(board)
        if self.lists_free_cells:
            text = f"{text}{self.gap}Available positions: {free_cells(board)}"
        return f"{text}\n{open_lines(board)}" if self.lists_open_lines else text

    def with_open_lines(self, text: str, board: Board) -> str:
        """`text`, a message of this wording on `board`, with the open lines after the position
        as the threats board shows them; unchanged where it lists them already or shows no
        position (a privileged teacher's view: TicTacToeEnv.privileged_view)."""
        if self.lists_open_lines:
            return text
        position = self.position(board)
        return text.replace(position, f"{position}\n{open_lines(board)}", 1)

    def turn_message(self, board: Board, status: str | None) -> str:
        """The message asking for the next move: status line (if any), board, prompt."""
        body = f"{self.position(board)}\nYour turn."
        return body if status is None else f"{status}{self.gap}{body}"

    def invalid_move_message(self, reason: str, board: Board) -> str:
        """Why the last answer was rejected, then the unchanged board, asking again."""
        return f"Invalid move: {reason}.{self.gap}{self.position(board)}\n{self.try_again}"

    def final_message(self, result: GameResult, board: Board | None = None) -> str:
        """The closing message ("You win!", "You lose.", "It's a draw."), with the final board."""
        if result not in FINAL_MESSAGES:
            raise ValueError(f"result must be one of {sorted(FINAL_MESSAGES)}, got {result!r}")
        text = FINAL_MESSAGES[result]
        return text if board is None else f"{text}{self.gap}{self.render(board)}"


GRID = Wording(
    system_prompts={"full": SYSTEM_PROMPT, "short": SHORT_SYSTEM_PROMPT},
    render=render_board,
    gap="\n\n",
    lists_free_cells=True,
    played="The opponent (O) played cell {cell}.",
    you_play_x="You play X.",
    you_move_first="You play X and move first.",
    opponent_moves_first="You play X. The opponent (O) moves first.",
    try_again="Try again: give your move as <move>N</move>.",
)
"""The board as a grid with separator lines, then the free cells: the recipe's results so far."""

COMPACT = Wording(
    system_prompts={"full": COMPACT_SYSTEM_PROMPT, "short": COMPACT_SHORT_SYSTEM_PROMPT},
    render=render_compact_board,
    gap="\n",
    lists_free_cells=False,  # the free cells are the digits on the board
    played="O played {cell}.",
    you_play_x="You play X.",
    you_move_first="You play X and move first.",
    opponent_moves_first="You play X. O moves first.",
    try_again="Try again.",
)
"""Three rows of three characters, no free-cell list, short status lines."""

OPEN_LINES_RULE = " A line after the board names the cells where X or O would complete three."

THREATS = replace(
    GRID,
    system_prompts={rules: text + OPEN_LINES_RULE for rules, text in GRID.system_prompts.items()},
    lists_open_lines=True,
)
"""The grid wording with the open lines after the free cells: a board form that states the
threats a small model misses (docs/results.md)."""

BOARDS = {"grid": GRID, "compact": COMPACT, "threats": THREATS}
"""the wordings by board rendering (the environment's `board` argument)"""

SYSTEM_PROMPTS = GRID.system_prompts
"""the grid board's system prompts by rules"""


def open_lines(board: Board) -> str:
    """Where each side would complete three with its next mark, X first: "X can win at 5. O
    can win at 2 or 8.", or "No line has two of a mark." when neither can."""
    notes = [
        f"{mark} can win at {' or '.join(map(str, sorted(cells)))}."
        for mark, cells in threat_cells(board).items()
        if cells
    ]
    return " ".join(notes) or NO_THREATS


_OPPONENT_CELL = re.compile(r"(?:The opponent \(O\) played cell|\bO played) ([0-8])\.")


def opponent_cell(text: str) -> int | None:
    """The cell of the opponent's move that a status line in `text` names (any wording)."""
    match = _OPPONENT_CELL.search(text)
    return None if match is None else int(match.group(1))


# The grid wording's messages by their old names: play.py, the tests and stored games use them.
opponent_played_status = GRID.opponent_played_status
turn_message = GRID.turn_message
invalid_move_message = GRID.invalid_move_message
final_message = GRID.final_message
