"""`scripts/compare_runs.py`: arms of several seeds side by side, as a mean line and a min-max band.

    python scripts/compare_runs.py --arm adaptive runs/rlve/adaptive/seed* \
        --arm static runs/rlve/static/seed* --metrics reward/mean,batch/effective_prompt_ratio \
        --out runs/rlve/compare.png

One panel per metric; per arm, the mean over its runs at each step and the band between the
lowest and the highest run, so a reader sees at a glance whether one arm leaves the other's
seed-to-seed range.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from rlve.cli.plot import (
    MetricRows,
    figure_grid,
    finish_axes,
    metrics_file,
    moving_average,
    read_metrics,
)

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


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="compare_runs.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arm", nargs="+", action="append", required=True, help="a label, then its run directories"
    )
    parser.add_argument("--metrics", required=True, help="comma-separated metric names")
    parser.add_argument("--smooth", type=int, default=1, help="moving-average window in steps")
    parser.add_argument("--out", required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    arms = {arm[0]: [Path(p) for p in arm[1:]] for arm in args.arm}
    for label, runs in arms.items():
        missing = [str(r) for r in runs if not metrics_file(r).is_file()]
        if not runs or missing:
            parser.error(f"arm {label!r}: no metrics.jsonl in {missing or 'no run given'}")
    path = plot_arms(arms, [m.strip() for m in args.metrics.split(",") if m.strip()], args.out,
                     args.smooth)  # fmt: skip
    print(f"wrote {path}")
    return path
