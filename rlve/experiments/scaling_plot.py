"""Held-out accuracy against the number of training environments, as RLVE draws it.

Two panels from the `RunResult`s of `rlve.experiments.env_scaling run`: accuracy after training
against the collection's size on a log axis (held-out and in-distribution, mean and min-max over
seeds, the starting model's held-out accuracy as a dashed line), and held-out accuracy over the
steps of each run (before, every `score_every` steps, after). And, from the runs' per-problem
outcomes, held-out accuracy on each held-out environment: where a gain comes from.
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


def environment_accuracy(outcomes: Sequence[float], environments: int) -> list[float]:
    """The mean of each environment's block of per-problem `outcomes` (env_scaling scores
    environment by environment, each with the same number of problems)."""
    per_env, left = divmod(len(outcomes), environments)
    if left or not per_env:
        raise ValueError(f"{len(outcomes)} outcomes do not split into {environments} environments")
    return [sum(outcomes[i * per_env : (i + 1) * per_env]) / per_env for i in range(environments)]


def by_environment(results: Sequence[RunResult], names: Sequence[str]) -> dict[str, list[float]]:
    """Held-out accuracy on each of `names`, mean over seeds: "start" (every run's before) and
    each arm after; runs without per-problem outcomes are left out."""
    rows: dict[str, list[list[float]]] = {}
    for r in results:
        if kept := r.before_and_after(HELD_OUT):
            rows.setdefault("start", []).append(environment_accuracy(kept["before"], len(names)))
            rows.setdefault(r.arm, []).append(environment_accuracy(kept["after"], len(names)))
    return {key: [sum(col) / len(col) for col in zip(*runs, strict=True)]
            for key, runs in rows.items()}  # fmt: skip


def plot_by_environment(
    results: Sequence[RunResult], names: Sequence[str], out_path: str | Path
) -> Path | None:
    """Bars of `by_environment` into `out_path` (PNG): one group per held-out environment; None
    when no run kept per-problem outcomes."""
    table = by_environment(results, names)
    if not table:
        return None
    figure, (ax,) = figure_grid(1, columns=1)
    figure.set_size_inches(10, 4.5)
    keys = ["start", *sorted((k for k in table if k != "start"), key=collection_size)]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        ax.bar([x + i * width for x in range(len(names))], table[key], width, label=key)
    labels = [name.split("/")[-1] for name in names]
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], labels, rotation=35,
                  ha="right", fontsize=7)  # fmt: skip
    finish_axes(ax, f"{HELD_OUT} by held-out environment (mean over seeds)")
    ax.set_xlabel("")
    out_path = Path(out_path)
    figure.savefig(out_path)
    return out_path
