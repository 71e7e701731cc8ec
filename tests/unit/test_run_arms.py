"""Runs side by side (rlve.experiments.run_arms): the paired difference by hand, and the table
and plot from two runs' files."""

import json

import pytest

from rlve.experiments.run_arms import main, paired_difference


def test_the_paired_difference_matches_games_by_example_and_is_computed_by_hand():
    a = [{"example_id": i, "game/draw": v} for i, v in enumerate([1, 0, 0, 1])]
    b = [{"example_id": i, "game/draw": v} for i, v in enumerate([1, 1, 0, 1, 1])]  # id 4: alone
    mean, low, high = paired_difference(a, b, "game/draw")
    # d = (0, 1, 0, 0): mean 0.25, sd 0.5, half width 1.96 x 0.5 / 2 = 0.49
    assert mean == 0.25 and low == pytest.approx(0.25 - 0.49) and high == pytest.approx(0.74)


def write_run(path, draws, minutes):
    path.mkdir()
    scores = {f"tictactoe/game/{m}": v for m, v in
              [("draw", draws), ("win", 0.0), ("invalid", 0.1), ("missed_block", 0.2),
               ("missed_block_chances", 0.8)]}  # fmt: skip
    scores.update({f"{k}/ci95_low": 0.0 for k in list(scores)})
    scores.update({f"{k[:-len('/ci95_low')]}/ci95_high": 1.0
                   for k in list(scores) if k.endswith("/ci95_low")})  # fmt: skip
    games = [{"example_id": i, "game/draw": float(i < 4 * draws)} for i in range(4)]
    stage = {"step": 0, "scores": scores, "games": {"tictactoe": games}}
    (path / "evaluation.json").write_text(json.dumps({"start": stage, "end": stage}))
    rows = [
        {"step": s, "time": 60.0 * minutes * s / 2, "tictactoe/game/draw": draws} for s in (1, 2)
    ]
    (path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))


def test_the_table_names_each_arm_with_its_numbers(tmp_path, capsys):
    write_run(tmp_path / "a", 0.5, 10.0)
    write_run(tmp_path / "b", 0.75, 12.0)
    main(
        ["--runs", f"base={tmp_path / 'a'}", f"new={tmp_path / 'b'}", "--out", str(tmp_path / "o")]
    )
    text = (tmp_path / "o" / "arms.md").read_text()
    assert "| base | 50.0 (0-100) | 50.0 (0-100) |" in text and "| 10.0 |" in text
    assert "25% (0.20 of 0.80)" in text and "| 12.0 |" in text
    # games 0-1 drawn in a, 0-2 in b: +25 points
    assert "new - base, draws at the end, paired by game: +25.0 points" in text
    assert (tmp_path / "o" / "training.png").stat().st_size > 0
    assert (tmp_path / "o" / "new" / "evaluation.json").exists()
