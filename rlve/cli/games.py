"""`scripts/show_games.py`: tic-tac-toe games from a rollouts file, board by board.

    python scripts/show_games.py runs/eval/rollouts.jsonl --result loss --games 3
    python scripts/show_games.py runs/eval/rollouts.jsonl --mistakes   # X's mistakes by kind

Each game is replayed from its messages: the model's moves (with the reason it gave in its
<think> block, and what a mistake gave up: a missed win or block, a fork let through), the
opponent's replies, an invalid answer marked where it happened, then every position after each
move side by side, so a fork trap or a missed win shows at a glance.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    MISTAKE_KINDS,
    O_MARK,
    X_MARK,
    Board,
    is_over,
    mistake_at_stake,
    mistake_kind,
    parse_board,
    parse_move,
    place,
    think_text,
)
from rlve.envs.tictactoe.prompts import FINAL_MESSAGES, opponent_cell
from rlve.reliability.clean_text import terminal_safe

RESULTS = ("win", "draw", "loss")
FINAL_WORDS = tuple(FINAL_MESSAGES.values())


def game_moves(row: dict) -> list[tuple[str, int | None, str]]:
    """(player, cell or None for an invalid answer, the model's reason) in the order played."""
    opening = opponent_cell(row["prompt"][-1]["content"])
    moves: list[tuple[str, int | None, str]] = []
    if opening is not None:
        moves.append((O_MARK, opening, ""))
    for message in row["completion"]:
        text = str(message.get("content") or "")
        if message["role"] == "assistant":
            moves.append((X_MARK, parse_move(text), think_text(text) or ""))
        elif text.startswith("Invalid move"):
            player, _, reason = moves[-1]
            moves[-1] = (player, None, reason)
        elif (reply := opponent_cell(text)) is not None:
            moves.append((O_MARK, reply, ""))
        elif text.startswith(FINAL_WORDS):  # the last reply names no cell: find it on the board
            moves += _last_reply(moves, parse_board(text))
    return moves


def _last_reply(moves, final: Board) -> list[tuple[str, int | None, str]]:
    played = {cell for _, cell, _ in moves if cell is not None}
    return [(O_MARK, i, "") for i, mark in enumerate(final) if mark == O_MARK and i not in played]


def replayed_moves(row: dict) -> list[tuple[str, int | None, str, Board | None, str | None]]:
    """Each move of `game_moves` with the board after it (None: refused, an invalid answer or an
    occupied cell) and, for a move of X, the kind of mistake it was (None: not one)."""
    board: Board = EMPTY_BOARD
    replay = []
    for player, cell, reason in game_moves(row):
        if cell is None or board[cell] != " ":
            replay.append((player, cell, reason, None, None))
            continue
        judged = player == X_MARK and not is_over(board)
        kind = mistake_kind(board, cell, X_MARK) if judged else None
        board = place(board, cell, player)
        replay.append((player, cell, reason, board, kind))
    return replay


def render(row: dict) -> str:
    """The game as text: one line per move, then the positions side by side."""
    result = next((r for r in RESULTS if row["metrics"].get(f"game/{r}")), "unfinished")
    boards: list[Board] = []
    lines = [f"example {row['example_id']}: X {result} "
             f"(opponent random-move probability {row['info']['random_move_prob']})"]  # fmt: skip
    for player, cell, reason, board, kind in replayed_moves(row):
        if cell is None:
            lines.append(f"  X  invalid answer  ({reason})")
        elif board is None:  # the environment refused it as occupied
            lines.append(f"  X  {cell}: occupied, refused  ({reason})")
        else:
            boards.append(board)
            lines.append(f"  {player}  {cell}" + (f"  ({reason})" if reason else "")
                         + (f"  <- {kind.replace('_', ' ')}" if kind else ""))  # fmt: skip
    for r in range(3):
        cells = [" ".join(b[3 * r + c] if b[3 * r + c] != " " else "." for c in range(3))
                 for b in boards]  # fmt: skip
        lines.append("  " + "   ".join(cells))
    return "\n".join(lines)


def x_mistakes(row: dict) -> list[str]:
    """The kind (MISTAKE_KINDS) of each mistake of X in the game, in the order made."""
    return [kind for *_, kind in replayed_moves(row) if kind]


def x_chances(row: dict) -> list[tuple[str, str | None]]:
    """(the mistake at stake, the mistake made or None) for each move X played in a position
    where some move gives up its best result (`mistake_at_stake`)."""
    board: Board = EMPTY_BOARD
    chances = []
    for player, _, _, after, kind in replayed_moves(row):
        if after is None:  # refused: the position did not change
            continue
        if player == X_MARK and not is_over(board) and (stake := mistake_at_stake(board, X_MARK)):
            chances.append((stake, kind))
        board = after
    return chances


def mistakes_table(rows: list[dict]) -> str:
    """Per kind over `rows`: mistakes per game, the share of games with one, the chances per game
    (moves where that mistake was possible) and the share of chances taken as mistakes. A kind
    can grow per game only because its chances did: fewer forks let through means longer games
    and more threats to block."""
    replayed = [x_chances(row) for row in rows]  # every mistake is made at one of its chances
    per_game = [Counter(made for _, made in game if made) for game in replayed]
    chances = Counter(stake for game in replayed for stake, _ in game)
    n = max(len(rows), 1)
    header = f"{'per game':>8} {'games %':>8} {'chances':>8} {'missed %':>8}"
    lines = [f"{len(rows)} games: X's mistakes per game, % of games with one, chances per game "
             "(moves where it was possible), % of chances missed",
             f"  {'kind':<14} {header}"]  # fmt: skip
    for kind in (*MISTAKE_KINDS, None):
        counts = [sum(c.values()) if kind is None else c[kind] for c in per_game]
        possible = sum(chances.values()) if kind is None else chances[kind]
        missed = f"{100 * sum(counts) / possible:.1f}" if possible else "-"
        lines.append(f"  {kind or 'any':<14} {sum(counts) / n:>8.2f} "
                     f"{100 * sum(x > 0 for x in counts) / n:>8.1f} {possible / n:>8.2f} "
                     f"{missed:>8}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="show_games.py", description=__doc__.split("\n")[0])
    parser.add_argument("rollouts", type=Path, help="rollouts.jsonl of scripts/evaluate.py")
    parser.add_argument("--result", choices=RESULTS, help="only games X won, drew or lost")
    parser.add_argument("--games", type=int, default=3, help="how many games to show")
    parser.add_argument(
        "--mistakes",
        action="store_true",
        help="tally X's mistakes by kind over every game (or every --result game)",
    )
    args = parser.parse_args(argv)
    if args.mistakes:
        with args.rollouts.open() as lines:
            rows = [json.loads(line) for line in lines]
        if args.result:
            rows = [r for r in rows if r["metrics"].get(f"game/{args.result}")]
        print(mistakes_table(rows))
        return
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


if __name__ == "__main__":
    main()
