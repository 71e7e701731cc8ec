"""How small a held-out difference the environment-scaling experiment can detect, before it runs.

Every arm is scored on the same held-out problems (EVAL_SEED), so two arms are compared problem
by problem within a seed, the seeds as blocks: d = outcome(arm B) - outcome(arm A) on each of n
problems in each of S seeds, and the test is whether the mean of the n x S values of d differs
from 0 (two-sided, 5%). With 80% power it detects a true difference of

    (z_0.975 + z_0.8) * sqrt((var_d / n + var_run) / S)

where var_d is the variance of one problem's d within a seed, and var_run the variance that
training itself adds to a seed's mean difference (another seed trains another model). Where
neither arm changes a problem's chance p of being solved, one sample each gives
var_d = 2 p (1 - p): the screening's accuracies at the held-out levels give it before any run.
var_run is read from runs that are done (their per-problem outcomes). `sample_sizes` turns it
around: the seeds a given difference needs, also for the t test over the seeds' means (S - 1
degrees of freedom) that the results report, which needs more seeds than the normal one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z_TWO_SIDED_5 = 1.959964
"""the normal quantile of 0.975"""
Z_POWER_80 = 0.841621
"""the normal quantile of 0.8"""


def detectable_difference(var_d: float, problems: int, seeds: int, var_run: float = 0.0) -> float:
    """The true mean difference the paired test detects with 80% power at 5% (two-sided)."""
    if problems < 1 or seeds < 1:
        raise ValueError(f"problems and seeds must be >= 1, got {problems} and {seeds}")
    return (Z_TWO_SIDED_5 + Z_POWER_80) * math.sqrt((var_d / problems + var_run) / seeds)


def null_pair_variance(chances: Sequence[float]) -> float:
    """var_d when both arms solve problem i with the same chance p_i, one sample each: the mean
    of 2 p_i (1 - p_i) over the problems."""
    if not chances:
        raise ValueError("no problem chances given")
    return statistics.fmean(2 * p * (1 - p) for p in chances)


def problem_differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """d = b - a problem by problem: two runs' outcomes on the same problems in the same order."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired runs need the same problems: {len(a)} and {len(b)} outcomes")
    return [y - x for x, y in zip(a, b, strict=True)]


def paired_variances(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> tuple[float, float]:
    """(var_d, var_run) from finished runs: `pairs` holds one (arm A, arm B) pair of per-problem
    outcome lists per seed, the problems in the same order. var_d is the pooled variance of d
    within a seed; var_run what the seeds' mean differences vary beyond var_d / n (0 if they
    vary less, or with fewer than two seeds)."""
    if not pairs:
        raise ValueError("no pair of runs given")
    diffs = [problem_differences(a, b) for a, b in pairs]
    within = [statistics.variance(d) for d in diffs if len(d) > 1]
    var_d = statistics.fmean(within) if within else 0.0
    if len(diffs) < 2:
        return var_d, 0.0
    means = [statistics.fmean(d) for d in diffs]
    n = statistics.fmean(len(d) for d in diffs)
    return var_d, max(0.0, statistics.variance(means) - var_d / n)


def held_out_chances(accuracy: dict[str, dict[str, float]], held_out: Sequence[str],
                     levels: Sequence[int]) -> list[float]:  # fmt: skip
    """Each held-out (environment, level) cell's chance p, from the screening's accuracy at
    that level (`accuracy`: environment -> level -> share right; a level not screened: 0)."""
    return [accuracy[name].get(str(level), 0.0) for name in held_out for level in levels]


def power_rows(chances: Sequence[float], per_cell: Sequence[int], seeds: Sequence[int],
               var_run: float = 0.0) -> list[dict[str, float]]:  # fmt: skip
    """The detectable difference for each (problems per cell, seeds), every cell's problems
    sharing its chance: one row each, with the held-out problems a seed."""
    var_d = null_pair_variance(chances)
    rows = []
    for count in per_cell:
        problems = count * len(chances)
        for s in seeds:
            mde = detectable_difference(var_d, problems, s, var_run)
            rows.append({"per_cell": count, "problems": problems, "seeds": s, "var_d": var_d,
                         "var_run": var_run, "detectable": mde})  # fmt: skip
    return rows


POWER = 0.8
"""the power the sample sizes are chosen for"""


def student_t_quantile(p: float, df: int) -> float:
    """Student's t quantile of `p` with `df` degrees of freedom: the density integrated from 0
    by Simpson's rule (400 steps), the upper end found by bisection (to 1e-9)."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"p must lie in [0.5, 1) and df be >= 1, got p={p}, df={df}")
    scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:
        steps, h = 400, x / 400
        f = [scale * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2 * high
    while high - low > 1e-9:
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < p else (low, middle)
    return (low + high) / 2


def seeds_needed(effect: float, var_d: float, problems: int, var_run: float,
                 t_test: bool = True, most: int = 200) -> int:  # fmt: skip
    """The fewest seeds that detect a true mean difference `effect` with 80% power at 5%
    (two-sided), each seed's mean difference over `problems` problems having the variance
    var_d / problems + var_run. With `t_test`, for the t test over the seeds' means (S - 1
    degrees of freedom) that rlve.experiments.scaling_paired reports: the smallest S >= 2 with
    (t_0.975 + t_0.8) sqrt(variance / S) <= effect; else for the normal test of the module
    docstring. ValueError when `most` seeds do not suffice."""
    if effect <= 0 or problems < 1 or var_d < 0 or var_run < 0:
        raise ValueError(f"effect must be > 0, problems >= 1 and the variances >= 0, got "
                         f"{effect}, {problems}, {var_d}, {var_run}")  # fmt: skip
    variance = var_d / problems + var_run
    for seeds in range(2 if t_test else 1, most + 1):
        if t_test:
            z = student_t_quantile(0.975, seeds - 1) + student_t_quantile(POWER, seeds - 1)
        else:
            z = Z_TWO_SIDED_5 + Z_POWER_80
        if z * math.sqrt(variance / seeds) <= effect:
            return seeds
    raise ValueError(f"{most} seeds do not detect {effect} (variance {variance:.6f} a seed)")


@dataclass(frozen=True)
class SampleSize:
    """The seeds one choice of held-out problems a cell needs to detect a difference."""

    per_cell: int
    """held-out problems a (environment, level) cell"""
    problems: int
    """held-out problems a seed: per_cell x the cells"""
    seeds: int
    """seeds for the t test over the seeds' means (what the results report)"""
    seeds_normal: int
    """seeds for the normal test (the detectable differences of `power_rows`)"""


def sample_sizes(effect: float, var_d: float, var_run: float, cells: int,
                 per_cell: Sequence[int]) -> list[SampleSize]:  # fmt: skip
    """For each choice of problems a cell, the seeds that detect `effect` (`seeds_needed`)."""
    rows = []
    for count in per_cell:
        n = count * cells
        rows.append(SampleSize(count, n, seeds_needed(effect, var_d, n, var_run),
                               seeds_needed(effect, var_d, n, var_run, t_test=False)))  # fmt: skip
    return rows
