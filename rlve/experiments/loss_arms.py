"""The registered losses side by side on one real-model task, same seeds and rollouts per step.

    python -m rlve.experiments.loss_arms --seeds 0 1 2               # every arm: LOSSES and PAIRED
    python -m rlve.experiments.loss_arms --losses cispo gspo --seeds 0  # some of them
    python -m rlve.experiments.loss_arms --losses cispo dppo_tv --seeds 0 \
        --set trainer.mini_batches=4 --tag mb4    # other settings: arms cispo_mb4, dppo_tv_mb4

Every arm is the SmolLM2 curriculum setup's adaptive run (rlve.experiments.curriculum_arms: the same
warm-up, 40 steps of 8 problems x 8 rollouts on rlve/sorting_fine with the RLVE window, accuracy
per level on the same held-out problems before and after) with `algorithm=<loss>`, so only the
loss, its clip range and its advantage normalisation differ. DAPO's dynamic sampling and its
TIS cap are turned off, so that every arm trains the same number of rollouts per step with the
ratio taken against the sampler (`gspo_recompute`, of PAIRED, takes it against recomputed old
log-probs instead). The table adds what each loss acted on: the share of clipped tokens and the
range of the token and sequence ratios (the sampler runs vLLM in bf16, the trainer its own
kernels: with one update per step the ratio measures nothing else).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from statistics import fmean

from rlve.experiments.curriculum_arms import SETUPS, accuracies, experiment
from rlve.experiments.experiment import Arm, RunResult, run_experiment

LOSSES = ("cispo", "gspo", "gmpo", "dr_grpo", "grpo", "dapo", "dppo_tv", "dppo_kl")
SAME_ROLLOUTS = {"dapo": ("rollout.dynamic_sampling=false", "trainer.tis_cap=null")}
"""per loss, the overrides that keep its rollouts per step and its ratio the other arms'"""
PAIRED = {
    "gspo_recompute": ("gspo", ("trainer.old_logprobs=recompute", "trainer.tis_cap=2.0",
                                "trainer.tis_level=geometric")),
}  # fmt: skip
"""arms that pair a loss with another behaviour policy: name -> (loss, overrides). GSPO's
3e-4 / 4e-4 clip range is made for a ratio that starts at 1, so here the ratio is against
recomputed old log-probs and the sampler's gap is corrected apart, per sequence (the geometric
mean of its token ratios, truncated at 2)"""
ARMS = (*LOSSES, *PAIRED)
RUN_METRICS = {
    "clipped tokens %": ("train/clip_frac", 100),
    "token ratio min": ("train/ratio_min", 1),
    "token ratio max": ("train/ratio_max", 1),
    "sequence ratio min": ("train/sequence_ratio_min", 1),
    "sequence ratio max": ("train/sequence_ratio_max", 1),
    "sampler-corrected tokens %": ("sampling/tis_truncated_frac", 100),
    "reward, last 5 steps": ("reward/mean", 1),
}
"""table column -> (metrics.jsonl name, scale), each averaged over the run's steps (the reward
over its last 5)"""


def loss_arm(name: str, extra: tuple[str, ...] = (), tag: str = "") -> Arm:
    """The arm `name` of ARMS: a loss of LOSSES, or a pairing of PAIRED; `extra` overrides added
    to it, and its label `name_tag` when it has a `tag`."""
    loss, overrides = PAIRED.get(name, (name, SAME_ROLLOUTS.get(name, ())))
    return Arm(f"{name}_{tag}" if tag else name,
               ("+experiment=sorting_fine_adaptive", f"algorithm={loss}", *overrides,
                "logging.wandb_mode=disabled", *extra))  # fmt: skip


def run_means(rows: list[dict]) -> dict[str, float]:
    """RUN_METRICS of one run from its metrics rows (nan where the run did not log one)."""
    means = {}
    for column, (name, scale) in RUN_METRICS.items():
        steps = rows[-5:] if column.startswith("reward") else rows
        values = [r[name] for r in steps if r.get(name) is not None]
        means[column] = scale * fmean(values) if values else math.nan
    return means


def losses_table(results: list[RunResult]) -> str:
    """Markdown: the warm-up's start, then per loss the accuracy at the levels either end of the
    runs reached and RUN_METRICS, each mean [min-max] over seeds."""
    from rlve.experiments.seed_spread import mean_and_range

    levels = [d for d in sorted(accuracies(results[0].before))
              if any(accuracies(r.after)[d] > 0.05 for r in results)] or [0]  # fmt: skip
    header = ["loss", "seeds", *(f"acc d={d}" for d in levels), *RUN_METRICS, "minutes"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    first = [r for r in results if r.arm == results[0].arm]
    start = [f"{fmean(accuracies(r.before)[d] for r in first):.2f}" for d in levels]
    lines.append("| " + " | ".join(["SFT start", "-", *start] + ["-"] * (len(RUN_METRICS) + 1))
                 + " |")  # fmt: skip
    for loss in dict.fromkeys(r.arm for r in results):
        runs = [r for r in results if r.arm == loss]
        cells = [loss, str(len(runs))]
        cells += [mean_and_range([accuracies(r.after)[d] for r in runs]) for d in levels]
        for column in RUN_METRICS:
            values = [r.summary.get(column, math.nan) for r in runs]
            values = [v for v in values if not math.isnan(v)]
            cells.append(mean_and_range(values) if values else "-")
        cells.append(mean_and_range([r.minutes for r in runs], digits=0))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from rlve.config import TrainerConfig
    from rlve.models.precision import resolve_dtype
    from rlve.sync.placement import resolve_device

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    parser.add_argument("--losses", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/loss_arms"))
    parser.add_argument("--set", nargs="+", default=[], metavar="OVERRIDE",
                        help="overrides added to every arm (needs --tag)")  # fmt: skip
    parser.add_argument("--tag", default="", help="suffix of the arms' names with --set")
    parser.add_argument("--table-only", action="store_true",
                        help="train nothing: tabulate the runs already finished")  # fmt: skip
    args = parser.parse_args(argv)
    if args.set and not args.tag.isidentifier():
        parser.error(f"--set needs a --tag of letters, digits and _ (got {args.tag!r}): the "
                     "arms' runs must not land in the other arms' folders")  # fmt: skip
    setup = SETUPS["smollm2"]
    setup = replace(setup, dtype=resolve_dtype(setup.dtype, resolve_device(TrainerConfig().device)))
    arms = [loss_arm(x, tuple(args.set), args.tag) for x in args.losses]
    runs = replace(experiment(setup), name="losses", arms=arms, from_metrics=run_means)
    results = run_experiment(runs, args.out, args.seeds, table=losses_table,
                             train=not args.table_only)  # fmt: skip
    print(f"\n{setup.env}, {setup.model}, accuracy on {setup.eval_problems} problems per level:\n")
    print(losses_table(results))


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
