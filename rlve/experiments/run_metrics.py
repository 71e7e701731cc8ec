"""A run's metrics.jsonl read back: one row per logged step, a metric's series over the steps,
its moving average. Read by the plot commands (rlve.cli.plot, rlve.cli.compare) and by the
experiments' training curves (seed_spread).

Reads crashed runs too: null/NaN values are gaps, a half-written last line is skipped, and steps
logged again after a resume replace the earlier rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

MetricRows = list[dict[str, float]]
"""one dict per logged step, sorted by step: metric name -> value (NaN for null)"""


def read_metrics(path: str | Path) -> MetricRows:
    """The rows of metrics.jsonl: numbers kept, null as NaN, unreadable lines skipped.

    A line that is not a JSON object (the last line of a crashed run, cut mid-write) is skipped.
    When a step appears twice (a resumed run logs again from its checkpoint) the later row wins.
    """
    by_step: dict[float, dict[str, float]] = {}
    for index, line in enumerate(Path(path).read_text().splitlines()):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(raw, dict):
            continue
        row = {k: _number(v) for k, v in raw.items() if v is None or _is_number(v)}
        step = row.get("step", float(index))
        row["step"] = float(index) if math.isnan(step) else step
        by_step[row["step"]] = row
    return [by_step[step] for step in sorted(by_step)]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def series(rows: MetricRows, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metric, NaN where a row lacks it."""
    steps = np.array([row["step"] for row in rows], dtype=float)
    values = np.array([row.get(name, math.nan) for row in rows], dtype=float)
    return steps, values


def has_metric(rows: MetricRows, name: str) -> bool:
    """Whether any row holds a finite value of `name`."""
    return any(math.isfinite(row.get(name, math.nan)) for row in rows)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last `window` values, ignoring NaNs; NaN where all are NaN.

    values: [N]. out[i] = mean of the finite values among values[max(0, i - window + 1) : i + 1].
    """
    if window < 1:
        raise ValueError(f"the smoothing window must be >= 1, got {window}")
    finite = np.isfinite(values)
    sums = np.concatenate([[0.0], np.cumsum(np.where(finite, values, 0.0))])
    counts = np.concatenate([[0], np.cumsum(finite)])
    end = np.arange(1, len(values) + 1)
    start = np.maximum(end - window, 0)
    count = counts[end] - counts[start]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (sums[end] - sums[start]) / count, np.nan)


def metrics_file(run: str | Path) -> Path:
    """A run directory's metrics.jsonl, or the file itself when given one."""
    path = Path(run)
    return path / "metrics.jsonl" if path.is_dir() else path
