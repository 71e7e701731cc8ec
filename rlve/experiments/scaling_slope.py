"""Held-out accuracy against the number of training environments, seeds as blocks: each
collection size against the smallest, problem by problem, and the slope per doubling.

Every arm of a seed is scored on the same held-out problems, so a size is compared with the
smallest (C1) problem by problem within each seed, and the seeds' mean difference gets a t
interval over seeds (rlve.experiments.scaling_paired). The slope is RLVE's summary: within a
seed, the least-squares line of held-out accuracy on log2(size) over the sizes it ran; over the
seeds that ran every size, the mean slope with a t interval. An interval that excludes 0 says
more environments helped at this scale; one that holds 0 does not say they did not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from rlve.experiments.scaling_paired import Difference, across_seeds, seed_difference

Outcomes = Mapping[int, Mapping[int, Sequence[float]]]
"""seed -> collection size -> per-problem held-out outcomes after training (same problems)"""


def collection_sizes(outcomes: Outcomes) -> list[int]:
    """Every size some seed ran, ascending."""
    return sorted({size for by_size in outcomes.values() for size in by_size})


def line_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys on xs. Example: [0, 2, 6], [0.1, 0.2, 0.4] -> 0.05."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError(f"a slope needs 2 or more distinct x values, got {list(xs)}")
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def slope_per_doubling(outcomes: Outcomes) -> Difference:
    """The mean over seeds of each seed's slope of accuracy on log2(size), with a t interval,
    over the seeds that ran every size any seed ran."""
    sizes = collection_sizes(outcomes)
    complete = [seed for seed, by_size in outcomes.items() if set(by_size) == set(sizes)]
    slopes = [
        Difference(line_slope([math.log2(s) for s in sizes],
                              [statistics.fmean(outcomes[seed][s]) for s in sizes]), 0, 0, 1)
        for seed in sorted(complete)
    ]  # fmt: skip
    return across_seeds(slopes)


def against_smallest(outcomes: Outcomes) -> dict[int, Difference]:
    """Per size above the smallest: its accuracy minus the smallest's, paired by problem within
    each seed that ran both, the seeds' mean with a t interval."""
    sizes = collection_sizes(outcomes)
    smallest, compared = sizes[0], {}
    for size in sizes[1:]:
        per_seed = [
            seed_difference(by_size[smallest], by_size[size])
            for seed, by_size in sorted(outcomes.items())
            if smallest in by_size and size in by_size
        ]
        if per_seed:
            compared[size] = across_seeds(per_seed)
    return compared


def sizes_table(outcomes: Outcomes) -> str:
    """Markdown: per size, the seeds, held-out accuracy after (mean and range over seeds) and the
    difference from the smallest size with its interval; then the slope per doubling."""
    sizes = collection_sizes(outcomes)
    compared = against_smallest(outcomes)
    lines = [f"| environments | seeds | held-out accuracy after (min-max) | minus C{sizes[0]}, "
             "paired (95% CI, t over seeds) |", "|---:|---:|---|---|"]  # fmt: skip
    for size in sizes:
        accuracy = [statistics.fmean(o[size]) for o in outcomes.values() if size in o]
        cell = "" if size not in compared else _interval(compared[size])
        lines.append(f"| {size} | {len(accuracy)} | {statistics.fmean(accuracy):.3f} "
                     f"({min(accuracy):.3f}-{max(accuracy):.3f}) | {cell} |")  # fmt: skip
    if len(sizes) > 1:
        slope = slope_per_doubling(outcomes)
        lines.append(f"\nSlope per doubling of the environments, over the {slope.count} seeds "
                     f"that ran all {len(sizes)} sizes: {_interval(slope)}")  # fmt: skip
    return "\n".join(lines)


def _interval(d: Difference) -> str:
    if d.count < 2:
        return f"{d.mean:+.4f} (one seed: no interval)"
    verdict = "excludes 0" if d.low > 0 or d.high < 0 else "includes 0"
    return f"{d.mean:+.4f} ({d.low:+.4f} to {d.high:+.4f}; {verdict})"


def plot_against_smallest(outcomes: Outcomes, out_path: str | Path) -> Path:
    """PNG: each size's held-out accuracy minus the smallest's (paired by problem), the seeds'
    mean with its 95% t interval, on a log2 axis, and the mean slope's line through 0 at the
    smallest size."""
    from rlve.experiments.figures import figure_grid, finish_axes

    compared = against_smallest(outcomes)
    if not compared:
        raise ValueError("one collection size: nothing to compare with the smallest")
    smallest = collection_sizes(outcomes)[0]
    figure, (ax,) = figure_grid(1, columns=1)
    sizes = [smallest, *compared]
    means = [0.0, *(d.mean for d in compared.values())]
    low = [0.0, *(d.mean - d.low for d in compared.values())]
    high = [0.0, *(d.high - d.mean for d in compared.values())]
    seeds = ", ".join(f"C{size}: {d.count}" for size, d in compared.items())
    ax.errorbar(sizes, means, yerr=[low, high], marker="o", capsize=4,
                label=f"minus C{smallest}, mean and 95% interval (seeds {seeds})")  # fmt: skip
    slope = slope_per_doubling(outcomes)
    ax.plot(sizes, [slope.mean * math.log2(s / smallest) for s in sizes], linestyle=":",
            label=f"slope {slope.mean:+.4f} a doubling ({slope.count} seeds)")  # fmt: skip
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    finish_axes(ax, "held-out accuracy after training, against the smallest collection")
    ax.set_xlabel("training environments")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path)
    return out_path
