"""Held-out accuracy against the number of training environments, as RLVE draws it.

Two panels from the `RunResult`s of `rlve.experiments.env_scaling run`: accuracy after training
against the collection's size on a log axis (held-out and in-distribution, mean and min-max over
seeds, the starting model's held-out accuracy as a dashed line), and held-out accuracy over the
steps of each run (before, every `score_every` steps, after).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlve.experiments.experiment import RunResult
from rlve.experiments.figures import figure_grid, finish_axes

HELD_OUT = "held-out accuracy"
IN_DISTRIBUTION = "in-distribution accuracy"


@dataclass(frozen=True)
class SeedSpread:
    """A score over seeds."""

    mean: float
    low: float
    high: float
    seeds: int


def spread(values: Sequence[float]) -> SeedSpread:
    return SeedSpread(sum(values) / len(values), min(values), max(values), len(values))


def collection_size(arm: str) -> int:
    """ "C16" -> 16: the arms of env_scaling are named by their number of environments."""
    if not (arm.startswith("C") and arm[1:].isdigit()):
        raise ValueError(f"arm {arm!r} is not a collection name like 'C16'")
    return int(arm[1:])


def by_size(results: Sequence[RunResult], key: str) -> dict[int, SeedSpread]:
    """Score `key` after training, over seeds, per collection size (ascending)."""
    values: dict[int, list[float]] = {}
    for result in results:
        values.setdefault(collection_size(result.arm), []).append(result.after[key])
    return {size: spread(values[size]) for size in sorted(values)}


def held_out_curve(results: Sequence[RunResult], arm: str, last_step: int) -> dict[int, SeedSpread]:
    """Held-out accuracy of one arm by step (0: before, `last_step`: after), over seeds, on the
    steps every seed scored."""
    tables = [
        {0: r.before[HELD_OUT], **{int(s): v[HELD_OUT] for s, v in r.during.items()},
         last_step: r.after[HELD_OUT]}
        for r in results if r.arm == arm
    ]  # fmt: skip
    if not tables:
        raise ValueError(f"no run of arm {arm!r}")
    steps = sorted(set.intersection(*(set(t) for t in tables)))
    return {step: spread([t[step] for t in tables]) for step in steps}


def plot_env_scaling(results: Sequence[RunResult], last_step: int, out_path: str | Path) -> Path:
    """Draws both panels into `out_path` (PNG) and returns it; `last_step` is the runs' number
    of steps, where their `after` scores go on the curve."""
    if not results:
        raise ValueError("no finished run to plot")
    figure, (sizes_ax, steps_ax) = figure_grid(2, columns=2)
    for key, marker in ((HELD_OUT, "o"), (IN_DISTRIBUTION, "s")):
        points = by_size(results, key)
        sizes = list(points)
        means = [p.mean for p in points.values()]
        errors = [[p.mean - p.low for p in points.values()],
                  [p.high - p.mean for p in points.values()]]  # fmt: skip
        sizes_ax.errorbar(sizes, means, yerr=errors, marker=marker, capsize=4, label=key)
    start = spread([r.before[HELD_OUT] for r in results])
    sizes_ax.axhline(start.mean, linestyle="--", color="grey", label="held-out, before training")
    sizes_ax.set_xscale("log", base=2)
    sizes_ax.set_xticks(sizes, [str(size) for size in sizes])
    finish_axes(sizes_ax, "accuracy after training (mean, min-max over seeds)")
    sizes_ax.set_xlabel("training environments")
    for arm in sorted({r.arm for r in results}, key=collection_size):
        curve = held_out_curve(results, arm, last_step)
        steps = list(curve)
        (line,) = steps_ax.plot(steps, [p.mean for p in curve.values()], marker="o",
                                label=f"{arm} ({curve[steps[0]].seeds} seeds)")  # fmt: skip
        steps_ax.fill_between(steps, [p.low for p in curve.values()],
                              [p.high for p in curve.values()], color=line.get_color(),
                              alpha=0.2)  # fmt: skip
    finish_axes(steps_ax, HELD_OUT)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path)
    return out_path
