"""Replaying tic-tac-toe games from rollout rows, board by board (scripts/show_games.py)."""

import json

import rlve
from rlve.cli.games import game_moves, main, render
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import parse_board
from rlve.rollout import ScriptedEngine
from rlve.rollout.records import trajectory_row


def played(policy, opponent_prob: float, games: int = 6) -> list[dict]:
    env = rlve.load_environment("tictactoe", num_examples=games, seed=5,
                                min_random_move_prob=opponent_prob,
                                max_random_move_prob=opponent_prob)  # fmt: skip
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
