"""`scripts/plot_run.py`: PNG plots of a run's metrics.jsonl (a dashboard, or chosen metrics).

The dashboard has one panel per concern (reward, game outcomes, loss, gradients, policy, sampling,
completion length, step time, curriculum); a panel whose metrics the run never logged is left
out. Reads crashed runs too: null/NaN values are gaps, a half-written last line is skipped, and
steps logged again after a resume replace the earlier rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlve.experiments.figures import figure_grid, finish_axes
from rlve.experiments.run_metrics import (
    MetricRows,
    has_metric,
    metrics_file,
    moving_average,
    read_metrics,
    series,
)

MAX_CURRICULUM_ENVS = 8
"""curriculum windows drawn at most (the first names, sorted); more would be unreadable"""


# ---------------------------------------------------------------- panels


@dataclass(frozen=True)
class Panel:
    """One subplot of the dashboard: drawn when any of `metrics` was logged."""

    name: str
    title: str
    metrics: tuple[str, ...]
    draw: Callable[[object, MetricRows, Panel, int], None]
    """draw(axes, rows, panel, smooth)"""


def _draw_lines(ax, rows: MetricRows, panel: Panel, smooth: int) -> None:
    for name in panel.metrics:
        if has_metric(rows, name):
            steps, values = series(rows, name)
            ax.plot(steps, moving_average(values, smooth), label=name, linewidth=1.4)


def _draw_reward(ax, rows: MetricRows, panel: Panel, smooth: int) -> None:
    steps, mean = series(rows, "reward/mean")
    mean = moving_average(mean, smooth)
    ax.plot(steps, mean, label="reward/mean", linewidth=1.6)
    if has_metric(rows, "reward/std"):
        std = moving_average(series(rows, "reward/std")[1], smooth)
        ax.fill_between(steps, mean - std, mean + std, alpha=0.25, label="± reward/std")


def _draw_step_time(ax, rows: MetricRows, panel: Panel, smooth: int) -> None:
    parts = [m for m in ("perf/rollout_s", "perf/train_s", "perf/sync_s") if has_metric(rows, m)]
    if parts:
        steps = series(rows, parts[0])[0]
        # a missing part is drawn as 0 s so the stack stays continuous
        stack = [np.nan_to_num(moving_average(series(rows, m)[1], smooth)) for m in parts]
        ax.stackplot(steps, *stack, labels=parts, alpha=0.7)
    if has_metric(rows, "perf/step_s"):
        steps, total = series(rows, "perf/step_s")
        ax.plot(steps, moving_average(total, smooth), "k--", linewidth=1, label="perf/step_s")


def curriculum_envs(rows: MetricRows) -> list[str]:
    """Environment names with a logged `curriculum/<env>/low` or `/high` window."""
    names = {key for row in rows for key in row if key.startswith("curriculum/")}
    envs = {
        key[len("curriculum/") : key.rindex("/")]
        for key in names
        if key.endswith(("/low", "/high")) and key.count("/") >= 2
    }
    return sorted(
        e for e in envs if any(has_metric(rows, f"curriculum/{e}/{s}") for s in ("low", "high"))
    )


def _draw_curriculum(ax, rows: MetricRows, panel: Panel, smooth: int) -> None:
    envs = curriculum_envs(rows)
    for env in envs[:MAX_CURRICULUM_ENVS]:
        steps, high = series(rows, f"curriculum/{env}/high")
        low = series(rows, f"curriculum/{env}/low")[1]
        # windows move in whole difficulty levels: draw them as steps, not slopes
        (line,) = ax.plot(steps, high, linewidth=1.2, label=env, drawstyle="steps-post")
        ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, step="post")
    if len(envs) > MAX_CURRICULUM_ENVS:
        ax.set_title(f"curriculum windows [low, high] ({MAX_CURRICULUM_ENVS} of {len(envs)} envs)")


PANELS: tuple[Panel, ...] = (
    Panel("reward", "reward (mean ± std)", ("reward/mean",), _draw_reward),
    Panel("game", "game outcomes (shares)",
          ("game/win", "game/draw", "game/loss", "game/invalid", "game/format"), _draw_lines),
    Panel("loss", "train/loss", ("train/loss",), _draw_lines),
    Panel("grad_norm", "train/grad_norm", ("train/grad_norm",), _draw_lines),
    Panel("policy", "entropy, clipping, KL", ("train/entropy", "train/clip_frac", "train/kl"),
          _draw_lines),
    Panel("sampling", "effective prompts and truncation",
          ("batch/effective_prompt_ratio", "batch/mixed_outcome_ratio",
           "completion/truncated_frac"), _draw_lines),
    Panel("completion_len", "completion length (tokens)",
          ("completion/len_mean", "completion/len_max"), _draw_lines),
    Panel("step_time", "step time split (s)",
          ("perf/rollout_s", "perf/train_s", "perf/sync_s", "perf/step_s"), _draw_step_time),
    Panel("curriculum", "curriculum windows [low, high]", (), _draw_curriculum),
)  # fmt: skip
"""the dashboard's panels, in reading order"""


def panels_present(rows: MetricRows) -> list[Panel]:
    """The panels with something to draw."""
    present = []
    for panel in PANELS:
        if panel.name == "curriculum":
            if curriculum_envs(rows):
                present.append(panel)
        elif any(has_metric(rows, m) for m in panel.metrics):
            present.append(panel)
    return present


# ---------------------------------------------------------------- figures


def plot_dashboard(rows: MetricRows, out_path: str | Path, smooth: int = 1) -> list[str]:
    """Draw every panel with data into one PNG; returns the names of the panels drawn."""
    panels = panels_present(rows)
    if not panels:
        raise ValueError("no dashboard metric was logged (nothing to plot)")
    figure, axes = figure_grid(len(panels), columns=2 if len(panels) > 1 else 1)
    for ax, panel in zip(axes, panels, strict=True):
        panel.draw(ax, rows, panel, smooth)
        finish_axes(ax, panel.title)
    title = f"smoothed over {smooth} steps" if smooth > 1 else ""
    if title:
        figure.suptitle(title, fontsize=9)
    figure.savefig(out_path)
    return [panel.name for panel in panels]


def plot_metrics(rows: MetricRows, names: list[str], out_path: str | Path,
                 smooth: int = 1) -> list[str]:  # fmt: skip
    """One panel with the chosen metrics; ValueError naming those never logged."""
    missing = [n for n in names if not has_metric(rows, n)]
    if missing:
        logged = sorted({k for row in rows for k in row} - {"step"})
        raise ValueError(f"metrics never logged: {missing}; logged: {logged}")
    figure, (ax,) = figure_grid(1, columns=1)
    _draw_lines(ax, rows, Panel("custom", "", tuple(names), _draw_lines), smooth)
    finish_axes(ax, ", ".join(names))
    figure.savefig(out_path)
    return names


def custom_plot_name(names: list[str]) -> str:
    """`reward/mean,game/win` -> "metrics_reward-mean_game-win.png"."""
    return "metrics_" + "_".join(n.replace("/", "-") for n in names) + ".png"


# ---------------------------------------------------------------- the command


def plot_run(run: str | Path, metrics: list[str] | None = None, smooth: int = 1,
             out_dir: str | Path | None = None) -> dict[Path, list[str]]:  # fmt: skip
    """Write dashboard.png (and a plot of `metrics` if given) next to metrics.jsonl or in out_dir.

    Returns each PNG written with the panels (or metrics) drawn in it.
    """
    source = metrics_file(run)
    if not source.is_file():
        raise FileNotFoundError(f"no metrics file at {source} (give a run directory or the file)")
    rows = read_metrics(source)
    if not rows:
        raise ValueError(f"{source} holds no readable metrics line")
    out = Path(out_dir) if out_dir is not None else source.parent
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    if metrics:
        path = out / custom_plot_name(metrics)
        written[path] = plot_metrics(rows, metrics, path, smooth)
    path = out / "dashboard.png"
    written[path] = plot_dashboard(rows, path, smooth)
    return written


def main(argv: list[str] | None = None) -> dict[Path, list[str]]:
    import argparse

    parser = argparse.ArgumentParser(prog="plot_run.py", description=__doc__.split("\n")[0])
    parser.add_argument("run", help="run directory (with metrics.jsonl) or a metrics.jsonl file")
    parser.add_argument("--metrics", default=None, help="comma-separated names for one more plot")
    parser.add_argument("--smooth", type=int, default=1, help="moving-average window in steps")
    parser.add_argument("--out", default=None, help="where the PNGs go (default: the run dir)")
    args = parser.parse_args(argv)
    if args.smooth < 1:
        parser.error(f"--smooth must be >= 1, got {args.smooth}")
    names = [n.strip() for n in args.metrics.split(",") if n.strip()] if args.metrics else None
    try:
        written = plot_run(args.run, names, args.smooth, args.out)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    for path, drawn in written.items():
        print(f"wrote {path}: {', '.join(drawn)}")
    return written
