"""The held-out gain split by whether an answer right on other problems is right on the problem.

The control's rule (rlve.curriculum.constant_answer) keeps C1 from being passed by one guess, but
the held-out environments are not filtered so: on 11 of the worked start's 12, the best single
answer of some screened level is right on 3 or more of 16 problems (`rlve-gym/TransmissionDelay`
level 0: "2" on all 16). An arm that learned to answer small numbers would gain there without
having learned any task. So each held-out problem is marked *guessable* when one answer is right
on it and on at least one other problem of its cell (environment x level: each of the cell's
reference answers given to every problem, verified as the screening does), and the paired
difference is read on each part apart: a gain that lives only on guessable problems may be a
guess; on the others, a problem's right answer is right on no other problem of its cell.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from rlve.experiments.scaling_paired import across_seeds, seed_difference


def guessable_problems(
    names: Sequence[str], levels: Sequence[int], problems: int, seed: int
) -> list[bool]:
    """For each problem that env_scaling.accuracy_over scores (names x levels x `problems` from
    `seed`, in that order): whether one answer is right on it and on another problem of its cell
    (each reference answer of the cell given to all of them, verified as the screening does)."""
    from rlve.envs import load_environment
    from rlve.experiments.scaling_pool import reference_outcomes

    marks: list[bool] = []
    for name in names:
        for level in levels:
            env = load_environment(name, num_examples=problems, seed=seed, difficulties=[level])
            outcomes = reference_outcomes(env, problems, seed).values()
            shared = [o for o in outcomes if sum(o) >= 2]  # answers right on 2+ problems
            marks += [any(o[i] == 1.0 for o in shared) for i in range(problems)]
    return marks


def split_table(
    outcomes: dict[int, dict[str, dict[str, list[float]]]],
    guessable: Sequence[bool],
    first: str,
    last: str,
) -> str:
    """Markdown: `last` - `first` after training on the guessable problems, on the others, and on
    all, each the seeds' mean with its t interval (scaling_paired.across_seeds); `outcomes` as
    scaling_paired.paired_table takes them, every list as long as `guessable`."""
    parts = {
        "an answer right on 2+ problems of its cell is right": [
            i for i, g in enumerate(guessable) if g
        ],
        "its answer is right on no other problem of its cell": [
            i for i, g in enumerate(guessable) if not g
        ],
        "all": list(range(len(guessable))),
    }
    for arms in outcomes.values():
        if any(len(arms[arm][when]) != len(guessable) for arm in (first, last)
               for when in ("before", "after")):  # fmt: skip
            raise ValueError(f"outcomes and guessable marks ({len(guessable)}) differ in length")
    lines = [
        f"| held-out problems | count | {first} before | {first} after | {last} after | "
        f"{last} - {first} after (95% CI, t over {len(outcomes)} seeds) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, index in parts.items():
        if len(index) < 2:
            lines.append(f"| {label} | {len(index)} | | | | too few problems |")
            continue
        diffs, means = [], {"before": [], first: [], last: []}
        for arms in outcomes.values():
            pick = {key: [arms[arm][when][i] for i in index]
                    for key, arm, when in (("before", first, "before"), (first, first, "after"),
                                           (last, last, "after"))}  # fmt: skip
            diffs.append(seed_difference(pick[first], pick[last]))
            for key, values in pick.items():
                means[key].append(statistics.fmean(values))
        total = across_seeds(diffs)
        cells = " | ".join(f"{statistics.fmean(means[key]):.3f}" for key in means)
        lines.append(f"| {label} | {len(index)} | {cells} | {total.mean:+.3f} ({total.low:+.3f} "
                     f"to {total.high:+.3f}) |")  # fmt: skip
    return "\n".join(lines)


def cached_marks(path: Path, names: Sequence[str], levels: Sequence[int], problems: int,
                 seed: int) -> list[bool]:  # fmt: skip
    """`guessable_problems`, read from `path` (JSON) when it holds the marks of these arguments,
    else computed (about a minute for 12 environments x 2 levels x 32 problems) and written."""
    key = {"names": list(names), "levels": list(levels), "problems": problems, "seed": seed}
    if path.exists() and (stored := json.loads(path.read_text()))["key"] == key:
        return stored["marks"]
    marks = guessable_problems(names, levels, problems, seed)
    path.write_text(json.dumps({"key": key, "marks": marks}) + "\n")
    return marks


def write_guessable(outcomes, first: str, last: str, names: Sequence[str], out: Path) -> str:
    """`out/guessable.md`, the `split_table` of `outcomes` (scaling_paired.held_out_outcomes) on
    the held-out `names` at env_scaling's levels, the marks kept in `out/guessable.json`."""
    from rlve.experiments.scaling_pool import EVAL_LEVELS, EVAL_SEED
    from rlve.rollout.records import write_text_atomically

    scored = len(next(iter(outcomes.values()))[first]["after"])
    problems, left = divmod(scored, len(names) * len(EVAL_LEVELS))
    if left:
        raise ValueError(f"{scored} outcomes do not split into {len(names)} environments x "
                         f"levels {list(EVAL_LEVELS)}")  # fmt: skip
    marks = cached_marks(out / "guessable.json", names, EVAL_LEVELS, problems, EVAL_SEED)
    table = split_table(outcomes, marks, first, last)
    write_text_atomically(out / "guessable.md", table + "\n")
    return table
