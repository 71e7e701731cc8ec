"""The SFT curve's points, table and plot (the training and the games are the recipe's, tested
there)."""

import argparse

import pytest

from rlve.experiments.sft_curve import curve_table, parse_point, plot_curve

ROW = {"teacher_games": 600, "sft_steps": 120, "kept_games": 375, "epochs": 2.56,
       "sft_loss_last": 0.0512, "sft_minutes": 28.04, "eval_minutes": 4.0, "draw": 0.3,
       "invalid": 0.125, "mistakes": 1.234, "format": 1.0}  # fmt: skip


def test_a_point_is_games_colon_steps():
    assert parse_point("600:30") == (600, 30)
    for bad in ("600", "600:", ":30", "0:30", "600:-1", "a:b"):
        with pytest.raises(argparse.ArgumentTypeError, match="GAMES:STEPS"):
            parse_point(bad)


def test_the_table_gives_each_rate_with_its_interval_and_marks_a_reused_student():
    reused = {**ROW, "teacher_games": 600, "sft_steps": 30, "sft_minutes": None, "mistakes": None}
    lines = curve_table([ROW, reused], games=200).splitlines()
    # sorted by games then steps; 60 of 200 draws -> Wilson (0.241, 0.367)
    # (a row from before the stated threats were measured has none)
    assert lines[2] == "| 600 (375) | 30 | 2.6 | 0.051 | - | 30.0 (24-37) | 12.5 | - | - |"
    assert lines[3] == "| 600 (375) | 120 | 2.6 | 0.051 | 28.0 | 30.0 (24-37) | 12.5 | 1.23 | - |"
    stated = curve_table([{**ROW, "threats_stated_right": 0.875}], games=200).splitlines()[2]
    assert stated.endswith("| 1.23 | 87.5 |")


def test_the_plot_is_written(tmp_path):
    rows = [ROW, {**ROW, "sft_steps": 30, "draw": 0.15}, {**ROW, "teacher_games": 2400}]
    plot_curve(rows, teacher_draw=0.405, games=200, out_path=tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_the_curve_of_the_stated_threats_takes_their_turn_limit():
    from rlve.experiments.recipe_sizes import DEMO, with_reasons

    assert with_reasons(DEMO, "threats").max_tokens == 64  # the answers measured up to 43 tokens
    assert with_reasons(DEMO, "verdict") == DEMO
