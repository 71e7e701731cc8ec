"""What the seeds of an arm span: `mean [min-max]` as a table's cell, and the mean line with a
min-max band of each metric over the arm's runs in a figure (`plot_arms`: the experiments'
training.png, and `scripts/compare_runs.py`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rlve.experiments.figures import figure_grid, finish_axes
from rlve.experiments.run_metrics import MetricRows, metrics_file, moving_average, read_metrics

Arms = dict[str, list[Path]]
"""arm label -> its run directories (one per seed)"""


def mean_and_range(values: list[float], digits: int = 2) -> str:
    """`mean [min-max]` of values over seeds, e.g. "0.35 [0.33-0.36]"; a single value alone."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def seed_band(runs: list[MetricRows], name: str, smooth: int) -> tuple[np.ndarray, ...]:
    """(steps, mean, low, high) of one metric over runs, on the steps every run logged."""
    tables = [{row["step"]: row.get(name, math.nan) for row in rows} for rows in runs]
    steps = sorted(set.intersection(*(set(t) for t in tables)))
    values = np.array([[t[s] for s in steps] for t in tables], dtype=float)  # [runs, steps]
    values = np.stack([moving_average(v, smooth) for v in values])
    with np.errstate(invalid="ignore"):
        low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        mean = np.nanmean(values, axis=0)
    return np.array(steps), mean, low, high


def plot_arms(arms: Arms, metrics: list[str], out_path: str | Path, smooth: int = 1) -> Path:
    """One panel per metric, one colour per arm (mean line, min-max band over its runs)."""
    if not arms or any(not runs for runs in arms.values()):
        raise ValueError(f"every arm needs at least one run, got {arms}")
    rows = {
        label: [read_metrics(metrics_file(run)) for run in runs] for label, runs in arms.items()
    }
    figure, axes = figure_grid(len(metrics), columns=min(2, len(metrics)))
    for ax, name in zip(axes, metrics, strict=True):
        for label, runs in rows.items():
            steps, mean, low, high = seed_band(runs, name, smooth)
            (line,) = ax.plot(steps, mean, linewidth=1.6, label=f"{label} ({len(runs)} seeds)")
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
        finish_axes(ax, name)
    if smooth > 1:
        figure.suptitle(f"mean and min-max over seeds, smoothed over {smooth} steps", fontsize=9)
    else:
        figure.suptitle("mean and min-max over seeds", fontsize=9)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path)
    return out_path
