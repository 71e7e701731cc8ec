"""Run plots from a synthetic metrics.jsonl: panels follow the metrics logged; crash-safe reads."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

from rlve.cli.plot import curriculum_envs, main, plot_dashboard, plot_metrics
from rlve.experiments.run_metrics import moving_average, read_metrics


def png_size(path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def training_rows(steps: int = 20) -> list[dict]:
    rows = []
    for step in range(1, steps + 1):
        rows.append({
            "step": step,
            "reward/mean": 0.2 + 0.02 * step,
            "reward/std": 0.1,
            "game/win": 0.05 * step / 2, "game/draw": 0.3, "game/loss": 0.7 - 0.05 * step / 2,
            "game/format": 1.0,
            "train/loss": 0.5 / step,
            "train/grad_norm": None if step == 3 else 1.0,  # a NaN logged as null
            "perf/rollout_s": 2.0, "perf/train_s": 1.0, "perf/step_s": 3.1,
            "curriculum/tictactoe/low": 0, "curriculum/tictactoe/high": step // 5,
            "curriculum/rlve-gym/Sort/low": 1, "curriculum/rlve-gym/Sort/high": 2,
        })  # fmt: skip
    return rows


def write_run(tmp_path, rows, tail: str = "") -> None:
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    (tmp_path / "metrics.jsonl").write_text(lines + tail)


def test_the_dashboard_draws_exactly_the_panels_whose_metrics_were_logged(tmp_path):
    write_run(tmp_path, training_rows(), tail='{"step": 21, "reward/me')  # a crash mid-write
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert len(rows) == 20
    drawn = plot_dashboard(rows, tmp_path / "dashboard.png", smooth=3)
    # no train/entropy|clip_frac|kl, no batch/effective_prompt_ratio, no completion/len_*
    assert drawn == ["reward", "game", "loss", "grad_norm", "step_time", "curriculum"]
    # 6 panels in 2 columns of 6.5 in x 3 rows of 3.4 in at 100 dpi
    assert png_size(tmp_path / "dashboard.png") == (1300, 1020)


def test_a_run_with_only_rewards_gets_one_panel(tmp_path):
    rows = [{"step": 1.0, "reward/mean": 0.1}, {"step": 2.0, "reward/mean": 0.3}]
    assert plot_dashboard(rows, tmp_path / "d.png") == ["reward"]
    assert png_size(tmp_path / "d.png") == (650, 340)


def test_a_metric_that_is_always_null_gets_no_panel(tmp_path):
    rows = [{"step": float(s), "reward/mean": 0.5, "train/loss": math.nan} for s in range(3)]
    assert plot_dashboard(rows, tmp_path / "d.png") == ["reward"]


def test_read_metrics_skips_bad_lines_keeps_nulls_as_nan_and_lets_a_resume_win(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "reward/mean": 0.1, "note": "text is dropped"}\n'
        "\n"
        '{"step": 2, "reward/mean": null, "train/loss": NaN}\n'
        "[1, 2]\n"
        '{"step": 3, "reward/mean": 0.3}\n'
        '{"step": 2, "reward/mean": 0.25}\n'  # logged again after a resume from step 1
        '{"step": 4, "rew'
    )
    rows = read_metrics(path)
    assert [row["step"] for row in rows] == [1.0, 2.0, 3.0]
    assert [row["reward/mean"] for row in rows] == [0.1, 0.25, 0.3]
    assert "note" not in rows[0]


def test_moving_average_is_a_trailing_mean_that_skips_nans():
    values = np.array([1.0, 2.0, np.nan, 4.0, np.nan, np.nan])
    smoothed = moving_average(values, 2)
    # windows: [1] [1,2] [2,nan] [nan,4] [4,nan] [nan,nan]
    np.testing.assert_array_equal(smoothed[:5], [1.0, 1.5, 2.0, 4.0, 4.0])
    assert np.isnan(smoothed[5])
    np.testing.assert_array_equal(moving_average(values, 1)[[0, 1, 3]], [1.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="window must be >= 1"):
        moving_average(values, 0)


def test_curriculum_env_names_may_contain_slashes():
    rows = [{"step": 1.0, "curriculum/rlve-gym/Sort/high": 2.0, "curriculum/tictactoe/low": 0.0,
             "curriculum/tictactoe/accuracy": 0.5, "curriculum/blank/high": math.nan}]  # fmt: skip
    assert curriculum_envs(rows) == ["rlve-gym/Sort", "tictactoe"]


def test_a_custom_plot_names_metrics_that_were_never_logged(tmp_path):
    rows = read_metrics_from(tmp_path, training_rows(5))
    assert plot_metrics(rows, ["reward/mean", "game/win"], tmp_path / "c.png") == [
        "reward/mean",
        "game/win",
    ]
    assert png_size(tmp_path / "c.png") == (650, 340)
    with pytest.raises(ValueError, match=r"metrics never logged: \['train/kl'\]"):
        plot_metrics(rows, ["reward/mean", "train/kl"], tmp_path / "never.png")
    assert not (tmp_path / "never.png").exists()


def read_metrics_from(tmp_path, rows):
    write_run(tmp_path, rows)
    return read_metrics(tmp_path / "metrics.jsonl")


def test_the_command_writes_the_dashboard_and_a_custom_plot_into_the_run(tmp_path, capsys):
    write_run(tmp_path, training_rows(8))
    written = main([str(tmp_path), "--metrics", "reward/mean, train/loss", "--smooth", "2"])
    custom = tmp_path / "metrics_reward-mean_train-loss.png"
    assert written == {
        custom: ["reward/mean", "train/loss"],
        tmp_path / "dashboard.png": ["reward", "game", "loss", "grad_norm", "step_time",
                                     "curriculum"],
    }  # fmt: skip
    assert png_size(custom) == (650, 340)
    assert f"wrote {tmp_path / 'dashboard.png'}: reward, game" in capsys.readouterr().out


def test_the_command_exits_2_without_a_metrics_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "missing_run")])
    assert exit_info.value.code == 2
    assert "no metrics file at" in capsys.readouterr().err


# ---------------------------------------------------------------- arms over seeds


def seed_run(path, rewards):
    path.mkdir(parents=True)
    lines = [json.dumps({"step": i + 1, "reward/mean": r}) for i, r in enumerate(rewards)]
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_seed_band_is_the_mean_and_range_over_runs_on_shared_steps(tmp_path):
    from rlve.experiments.seed_spread import seed_band

    runs = [seed_run(tmp_path / "a", [0.1, 0.2, 0.3]), seed_run(tmp_path / "b", [0.3, 0.4])]
    rows = [read_metrics(run / "metrics.jsonl") for run in runs]
    steps, mean, low, high = seed_band(rows, "reward/mean", smooth=1)
    assert steps.tolist() == [1, 2]  # run b stopped after step 2
    assert mean.tolist() == pytest.approx([0.2, 0.3])
    assert low.tolist() == pytest.approx([0.1, 0.2]) and high.tolist() == pytest.approx([0.3, 0.4])


def test_compare_runs_writes_one_panel_per_metric_and_names_a_missing_run(tmp_path, capsys):
    from rlve.cli.compare import main as compare_main

    a = [seed_run(tmp_path / f"a{i}", [0.1 * i, 0.2, 0.3]) for i in range(3)]
    b = [seed_run(tmp_path / f"b{i}", [0.0, 0.1, 0.1 * i]) for i in range(3)]
    out = tmp_path / "arms.png"
    argv = ["--arm", "adaptive", *map(str, a), "--arm", "static", *map(str, b)]
    compare_main([*argv, "--metrics", "reward/mean", "--out", str(out)])
    assert png_size(out)[0] == 650  # one column of 6.5 in at 100 dpi
    with pytest.raises(SystemExit):
        compare_main(["--arm", "x", str(tmp_path / "nowhere"), "--metrics", "m", "--out", str(out)])
    assert "arm 'x': no metrics.jsonl" in capsys.readouterr().err
