"""`scripts/show_games.py`: tic-tac-toe games from a rollouts file, board by board.

    python scripts/show_games.py runs/eval/rollouts.jsonl --result loss --games 3

Each game is replayed from its messages: the model's moves (with the reason it gave in its
<think> block), the opponent's replies, an invalid answer marked where it happened, then every
position after each move side by side, so a fork trap or a missed win shows at a glance.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from rlve.cli.terminal import terminal_safe
from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    O_MARK,
    X_MARK,
    Board,
    parse_board,
    parse_move,
    place,
    think_text,
)
from rlve.envs.tictactoe.prompts import FINAL_MESSAGES

_OPPONENT = re.compile(r"The opponent \(O\) played cell (\d)")
RESULTS = ("win", "draw", "loss")
FINAL_WORDS = tuple(FINAL_MESSAGES.values())


def game_moves(row: dict) -> list[tuple[str, int | None, str]]:
    """(player, cell or None for an invalid answer, the model's reason) in the order played."""
    opening = _OPPONENT.search(row["prompt"][-1]["content"])
    moves: list[tuple[str, int | None, str]] = []
    if opening:
        moves.append((O_MARK, int(opening.group(1)), ""))
    for message in row["completion"]:
        text = str(message.get("content") or "")
        if message["role"] == "assistant":
            moves.append((X_MARK, parse_move(text), think_text(text) or ""))
        elif text.startswith("Invalid move"):
            player, _, reason = moves[-1]
            moves[-1] = (player, None, reason)
        elif reply := _OPPONENT.search(text):
            moves.append((O_MARK, int(reply.group(1)), ""))
        elif text.startswith(FINAL_WORDS):  # the last reply names no cell: find it on the board
            moves += _last_reply(moves, parse_board(text))
    return moves


def _last_reply(moves, final: Board) -> list[tuple[str, int | None, str]]:
    played = {cell for _, cell, _ in moves if cell is not None}
    return [(O_MARK, i, "") for i, mark in enumerate(final) if mark == O_MARK and i not in played]


def render(row: dict) -> str:
    """The game as text: one line per move, then the positions side by side."""
    result = next((r for r in RESULTS if row["metrics"].get(f"game/{r}")), "unfinished")
    board: Board = EMPTY_BOARD
    boards: list[Board] = []
    lines = [f"example {row['example_id']}: X {result} "
             f"(opponent random-move probability {row['info']['random_move_prob']})"]  # fmt: skip
    for player, cell, reason in game_moves(row):
        if cell is None:
            lines.append(f"  X  invalid answer  ({reason})")
            continue
        if board[cell] != " ":  # the environment refused it as occupied
            lines.append(f"  X  {cell}: occupied, refused  ({reason})")
            continue
        board = place(board, cell, player)
        boards.append(board)
        lines.append(f"  {player}  {cell}" + (f"  ({reason})" if reason else ""))
    for r in range(3):
        cells = [" ".join(b[3 * r + c] if b[3 * r + c] != " " else "." for c in range(3))
                 for b in boards]  # fmt: skip
        lines.append("  " + "   ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="show_games.py", description=__doc__.split("\n")[0])
    parser.add_argument("rollouts", type=Path, help="rollouts.jsonl of scripts/evaluate.py")
    parser.add_argument("--result", choices=RESULTS, help="only games X won, drew or lost")
    parser.add_argument("--games", type=int, default=3, help="how many games to show")
    args = parser.parse_args(argv)
    shown = 0
    with args.rollouts.open() as lines:
        for line in lines:
            row = json.loads(line)
            if args.result and not row["metrics"].get(f"game/{args.result}"):
                continue
            print(terminal_safe(render(row)) + "\n")
            shown += 1
            if shown == args.games:
                break
