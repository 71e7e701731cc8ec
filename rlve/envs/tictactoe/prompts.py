"""The words of the tic-tac-toe environment: its system prompt and the messages it sends.

Every environment message that asks for a move ends with the rendered board, so a model (or a
scripted policy using `parse_board`) can read the position from the last message alone.
"""

from __future__ import annotations

from typing import Literal

from rlve.envs.tictactoe.game import EMPTY_BOARD, Board, free_cells, render_board

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

SYSTEM_PROMPTS = {"full": SYSTEM_PROMPT, "short": SHORT_SYSTEM_PROMPT}

FINAL_MESSAGES: dict[str, str] = {"win": "You win!", "loss": "You lose.", "draw": "It's a draw."}


def _position_lines(board: Board) -> str:
    """The board followed by the list of free cells."""
    return f"{render_board(board)}\n\nAvailable positions: {free_cells(board)}"


def opponent_played_status(cell: int) -> str:
    """The status line after the opponent's move."""
    return f"The opponent (O) played cell {cell}."


def turn_message(board: Board, status: str | None) -> str:
    """The message asking for the next move: status line (if any), board, free cells, prompt."""
    body = f"{_position_lines(board)}\nYour turn."
    return body if status is None else f"{status}\n\n{body}"


def invalid_move_message(reason: str, board: Board) -> str:
    """Why the last answer was rejected, then the unchanged board, asking again."""
    return (
        f"Invalid move: {reason}.\n\n{_position_lines(board)}\n"
        "Try again: give your move as <move>N</move>."
    )


def final_message(result: GameResult, board: Board | None = None) -> str:
    """The closing message ("You win!", "You lose.", "It's a draw."), with the final board."""
    if result not in FINAL_MESSAGES:
        raise ValueError(f"result must be one of {sorted(FINAL_MESSAGES)}, got {result!r}")
    text = FINAL_MESSAGES[result]
    return text if board is None else f"{text}\n\n{render_board(board)}"
