"""The environment-scaling experiment's `power` stage (rlve.experiments.env_scaling).

`print_power`: the difference the split's arms can detect, from the screening's accuracies and,
once runs are done, the spread training adds between seeds (power.json). `print_sample_sizes`
(`--effect`): the seeds each choice of problems a cell needs to detect a given difference, from
var_d and var_run measured on finished runs (power_<effect x 1000>.json). The calculation itself
is rlve.experiments.scaling_power.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlve.experiments.scaling_pool import EVAL_LEVELS, read_screening

PER_CELL_CHOICES = (8, 16, 32, 64)
"""held-out problems a (environment, level) cell that the power stage weighs"""


def finished_pairs(stored: dict, runs: Path, seeds: list[int]) -> dict[int, tuple]:
    """seed -> (first arm's, last arm's) held-out outcomes after training, for the seeds of
    `seeds` where both arms of `stored` (split.json) finished in `runs` and kept them."""
    from rlve.experiments.experiment import RunResult

    found = {}
    arms = [f"C{size}" for size in stored["collections"]]
    for seed in seeds:
        pair = [runs / arm / f"seed{seed}" / "result.json" for arm in (arms[0], arms[-1])]
        if all(path.exists() for path in pair):
            first, last = (RunResult.load(path).outcomes.get("after", {}) for path in pair)
            if "held-out accuracy" in first and "held-out accuracy" in last:
                found[seed] = (first["held-out accuracy"], last["held-out accuracy"])
    return found


def print_power(inputs: Path, results: Path, runs: Path, seeds: list[int]) -> None:
    """The power calculation (rlve.experiments.scaling_power) for the split in `inputs`: from the
    screening's accuracies, and from the finished runs in `runs` where any kept per-problem
    outcomes (their first arm against their last, seed by seed); written to
    `results/power.json`."""
    from rlve.experiments.scaling_power import held_out_chances, paired_variances, power_rows
    from rlve.rollout.records import write_text_atomically

    stored = json.loads((inputs / "split.json").read_text())
    accuracy = {r.name: r.accuracy for r in read_screening(inputs / "screening.json").values()}
    chances = held_out_chances(accuracy, stored["held_out"], EVAL_LEVELS)
    found = finished_pairs(stored, runs, seeds)
    var_run = paired_variances(list(found.values()))[1] if found else 0.0
    rows = power_rows(chances, PER_CELL_CHOICES, seeds=(3, 5), var_run=var_run)
    arms = [f"C{size}" for size in stored["collections"]]
    source = f"{arms[0]} against {arms[-1]}, seeds {sorted(found)}" if found else "no runs yet"
    lines = [f"{len(stored['held_out'])} held-out environments x levels {list(EVAL_LEVELS)}; "
             f"var_run from {source}: {var_run:.5f}", "",
             "| problems a cell | held-out problems a seed | seeds | detectable difference |",
             "|---:|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {r['per_cell']} | {r['problems']} | {r['seeds']} | {r['detectable']:.3f} |"
              for r in rows]  # fmt: skip
    write_text_atomically(results / "power.json", json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


def print_sample_sizes(inputs: Path, results: Path, runs: Path, seeds: list[int],
                       effect: float) -> None:  # fmt: skip
    """The seeds each choice of PER_CELL_CHOICES needs to detect `effect` in held-out accuracy
    (scaling_power.sample_sizes), from var_d and var_run measured on the finished runs in `runs`
    (their first arm against their last); written to `results/power_<effect>.json`."""
    from dataclasses import asdict

    from rlve.experiments.scaling_power import POWER, paired_variances, sample_sizes
    from rlve.rollout.records import write_text_atomically

    stored = json.loads((inputs / "split.json").read_text())
    found = finished_pairs(stored, runs, seeds)
    if len(found) < 2:
        raise ValueError(f"--effect measures var_d and var_run on 2 or more seeds with both arms "
                         f"finished; {runs} has {len(found)} of seeds {seeds}")  # fmt: skip
    var_d, var_run = paired_variances(list(found.values()))
    cells = len(stored["held_out"]) * len(EVAL_LEVELS)
    rows = sample_sizes(effect, var_d, var_run, cells, PER_CELL_CHOICES)
    arms = [f"C{size}" for size in stored["collections"]]
    stored_rows = {"effect": effect, "power": POWER, "test": "two-sided 5%, paired by problem",
                   "var_d": var_d, "var_run": var_run, "cells": cells,
                   "measured_on": f"{arms[0]} against {arms[-1]}, seeds {sorted(found)}",
                   "rows": [asdict(row) for row in rows]}  # fmt: skip
    name = f"power_{round(effect * 1000):04d}.json"
    write_text_atomically(results / name, json.dumps(stored_rows, indent=1) + "\n")
    print(f"{effect} in held-out accuracy at 80% power; var_d {var_d:.4f}, var_run {var_run:.6f} "
          f"({stored_rows['measured_on']}), {cells} cells; {results / name}\n\n"
          "| problems a cell | held-out problems a seed | seeds (t over seeds) | seeds (normal) |\n"
          "|---:|---:|---:|---:|")  # fmt: skip
    print("\n".join(f"| {r.per_cell} | {r.problems} | {r.seeds} | {r.seeds_normal} |"
                    for r in rows))  # fmt: skip
