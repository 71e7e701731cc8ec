"""Two environment-scaling arms compared problem by problem, the seeds as blocks.

Both arms of a seed are scored on the same held-out problems, so their difference is read per
problem: d = outcome(arm B) - outcome(arm A). Each seed gives a mean difference with a 95%
interval from its own problems (what sampling alone would move); the seeds' mean gets a
t interval over the seeds' means (S - 1 degrees of freedom), which also holds the spread that
training adds between seeds (var_run in rlve.experiments.scaling_power).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rlve.experiments.scaling_power import Z_TWO_SIDED_5, problem_differences

T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228}  # fmt: skip
"""Student's t quantile of 0.975 by degrees of freedom (a two-sided 95% interval)"""


@dataclass(frozen=True)
class Difference:
    """A mean difference with its 95% interval."""

    mean: float
    low: float
    high: float
    count: int
    """problems (one seed) or seeds (the seeds' mean) it is over"""


def seed_difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """B - A on one seed's problems (the same problems in the same order), with the normal
    interval of a paired mean."""
    d = problem_differences(a, b)
    if len(d) < 2:
        raise ValueError(f"a paired interval needs 2 or more problems, got {len(d)}")
    mean = statistics.fmean(d)
    half = Z_TWO_SIDED_5 * math.sqrt(statistics.variance(d) / len(d))
    return Difference(mean, mean - half, mean + half, len(d))


def across_seeds(per_seed: Sequence[Difference]) -> Difference:
    """The seeds' mean difference with the t interval over their means (no interval for one
    seed: the low and high are the mean)."""
    if not per_seed:
        raise ValueError("no seed to average")
    means = [d.mean for d in per_seed]
    mean = statistics.fmean(means)
    if len(means) < 2:
        return Difference(mean, mean, mean, 1)
    df = len(means) - 1
    if df not in T_975:
        raise ValueError(f"T_975 has no quantile for {df} degrees of freedom")
    half = T_975[df] * statistics.stdev(means) / math.sqrt(len(means))
    return Difference(mean, mean - half, mean + half, len(means))


def held_out_outcomes(results, first: str, last: str, score: str) -> dict:
    """seed -> arm -> when -> per-problem outcomes of `score`, from `RunResult`s, for the seeds
    where both `first` and `last` kept them."""
    found: dict[int, dict] = {}
    for result in results:
        if result.arm in (first, last) and (kept := result.before_and_after(score)):
            found.setdefault(result.seed, {})[result.arm] = kept
    return {seed: arms for seed, arms in found.items() if len(arms) == 2}


def paired_table(outcomes: dict[int, dict[str, dict[str, list[float]]]], first: str,
                 last: str) -> str:  # fmt: skip
    """Markdown: a row per seed and one for their mean. `outcomes`: seed -> arm -> when
    ("before", "after") -> per-problem outcomes of one score, each arm on the same problems."""
    head = (f"| seed | {first} before | {first} after | {last} before | {last} after | "
            f"{last} - {first} after (95% CI) | gain {last} - gain {first} |")  # fmt: skip
    lines = [head, "|---|---:|---:|---:|---:|---|---:|"]
    diffs, gains = [], []
    order = [(arm, when) for arm in (first, last) for when in ("before", "after")]
    for seed in sorted(outcomes):
        arms = outcomes[seed]
        means = {key: statistics.fmean(arms[key[0]][key[1]]) for key in order}
        diff = seed_difference(arms[first]["after"], arms[last]["after"])
        gain = (means[last, "after"] - means[last, "before"]) - (
            means[first, "after"] - means[first, "before"]
        )
        diffs.append(diff)
        gains.append(gain)
        cells = " | ".join(f"{means[key]:.3f}" for key in order)
        lines.append(f"| {seed} | {cells} | {diff.mean:+.3f} ({diff.low:+.3f} to "
                     f"{diff.high:+.3f}) | {gain:+.3f} |")  # fmt: skip
    total, gain = across_seeds(diffs), statistics.fmean(gains)
    lines.append(f"| mean of {len(diffs)} | | | | | {total.mean:+.3f} ({total.low:+.3f} to "
                 f"{total.high:+.3f}, t over seeds) | {gain:+.3f} |")  # fmt: skip
    return "\n".join(lines)
