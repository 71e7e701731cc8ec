"""Replaying tic-tac-toe games from rollout rows, board by board (scripts/show_games.py)."""

import json

import rlve
from rlve.cli.games import game_moves, main, render, x_chances, x_mistakes
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import MISTAKE_KINDS, parse_board
from rlve.rollout import ScriptedEngine
from rlve.rollout.records import trajectory_row


def first_free_cell(messages):
    board = parse_board(messages[-1]["content"])
    return f"<think>first free</think><move>{board.index(' ')}</move>"


def played(policy, opponent_prob: float, games: int = 6, board: str = "grid") -> list[dict]:
    env = rlve.load_environment("tictactoe", num_examples=games, seed=5,
                                min_random_move_prob=opponent_prob,
                                max_random_move_prob=opponent_prob, board=board)  # fmt: skip
    result = rlve.evaluate(env, ScriptedEngine(policy), games, seed=0)
    return [trajectory_row(t) for g in result.groups for t in g.trajectories]


def test_a_replayed_game_ends_on_the_environments_final_board():
    for row in played(minimax_policy, 0.0):  # minimax against minimax: every game a draw
        moves = game_moves(row)
        assert len(moves) == 9 and {p for p, _, _ in moves} == {"X", "O"}
        assert sorted(cell for _, cell, _ in moves) == list(range(9))
        lines = render(row).splitlines()
        assert lines[0].startswith(f"example {row['example_id']}: X draw")
        final = parse_board(row["completion"][-1]["content"])
        assert [line[-5:] for line in lines[-3:]] == [" ".join(final[r : r + 3]) for r in (0, 3, 6)]


def test_a_compact_board_game_replays_like_its_grid_twin():
    grid_rows, compact_rows = (played(first_free_cell, 0.5, board=b) for b in ("grid", "compact"))
    assert "Available positions" not in compact_rows[0]["completion"][1]["content"]
    for grid, compact in zip(grid_rows, compact_rows, strict=True):
        assert game_moves(compact) == game_moves(grid) and len(game_moves(grid)) >= 5
        assert render(compact) == render(grid)
        assert x_mistakes(compact) == x_mistakes(grid)


def test_an_invalid_answer_is_shown_where_it_happened():
    answers = iter(["<move>9</move>", *[f"<think>ok</think><move>{c}</move>" for c in range(9)]])

    def clumsy(messages):
        return next(answers)

    row = played(clumsy, 1.0, games=1)[0]
    moves = game_moves(row)
    assert moves[0][1] is None or moves[1][1] is None  # the first X answer was refused
    assert "invalid answer" in render(row)


def test_escape_sequences_in_a_reason_are_printed_escaped(tmp_path, capsys):
    row = played(minimax_policy, 0.0, games=1)[0]
    first = next(m for m in row["completion"] if m["role"] == "assistant")
    first["content"] = first["content"].replace("<think>", "<think>\x1b]0;owned\x07", 1)
    path = tmp_path / "rollouts.jsonl"
    path.write_text(json.dumps(row) + "\n")
    main([str(path)])
    out = capsys.readouterr().out
    assert r"\x1b]0;owned\x07" in out and "\x1b" not in out


def test_mistakes_are_marked_where_made_and_tallied_by_kind(tmp_path, capsys):
    # the first free cell against the optimal opponent: every game lost holds a mistake of X
    rows = played(first_free_cell, 0.0)
    lost = [r for r in rows if r["metrics"]["game/loss"]]
    assert lost
    for row in rows:
        kinds = x_mistakes(row)
        assert len(kinds) == row["metrics"]["game/mistakes"]  # the environment's own count
        assert len(kinds) >= (row in lost)
        assert render(row).count("  <- ") == len(kinds)
        chances = x_chances(row)  # the environment's own count, and each mistake among them
        for kind in MISTAKE_KINDS:
            assert sum(s == kind for s, _ in chances) == row["metrics"][f"game/{kind}_chances"]
        assert [made for _, made in chances if made] == kinds
        assert all(made in (None, stake) for stake, made in chances)
    assert x_mistakes(played(minimax_policy, 0.0)[0]) == []
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main([str(path), "--mistakes"])
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith(f"{len(rows)} games: X's mistakes per game, % of games with one")
    made = sum(len(x_mistakes(r)) for r in rows)
    chances = sum(len(x_chances(r)) for r in rows)
    n = len(rows)
    assert table[-1].split() == ["any", f"{made / n:.2f}", f"{100 * len(lost) / n:.1f}",
                                 f"{chances / n:.2f}", f"{100 * made / chances:.1f}"]  # fmt: skip
