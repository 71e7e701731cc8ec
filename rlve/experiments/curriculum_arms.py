"""RLVE's central claim: adaptive difficulty against a static range, same compute.

    python -m rlve.experiments.curriculum_arms --seeds 0 1 2 --out runs/curriculum  # tiny model
    python -m rlve.experiments.curriculum_arms --setup smollm2 --seeds 0 1 2         # SmolLM2-135M

A `Setup` is an environment and a model (SETUPS: the embedded tiny model on
rlve/multiplication, SmolLM2-135M-Instruct on rlve/sorting_fine, one more number per level).
1. A short SFT warm-up on the environment's own solutions at its lowest difficulties (the output
   contract; shared by every run, written once).
2. Two arms from that model, each with every seed and the same steps and rollouts per step:
   `+experiment=<setup.experiments>_adaptive` (the RLVE window) and `..._static` (difficulty
   uniform over a fixed range). Each arm is one `python -m rlve.train` command; the commands
   are printed.
3. Before the first step and after the last, on the run's own engine: accuracy at each evaluated
   difficulty (fresh problems never trained on, the same for every run, at the training
   temperature).
4. A table (mean [min-max] over seeds) and plots: effective prompt ratio and reward over steps,
   the adaptive window (rlve.experiments.experiment runs the arms). Finished runs are skipped when
   started again.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from statistics import fmean

from rlve.experiments.experiment import Arm, Experiment, RunResult, run_experiment

ARMS = ("adaptive", "static")
EVAL_SEED = 777_000
"""seed of the evaluation problems (the training runs draw theirs from other seeds)"""


@dataclass(frozen=True)
class Setup:
    """An environment and a model to compare the arms on, with its warm-up and evaluation."""

    env: str
    """the verifiable environment (one with difficulty levels)"""
    model: str
    """the starting model before its SFT warm-up: a built-in name, a directory or a hub id"""
    experiments: str
    """the arms' Hydra experiments are `<experiments>_adaptive` and `<experiments>_static`"""
    sft_difficulties: tuple[int, ...]
    """levels whose reference answers the warm-up trains on"""
    sft_per_difficulty: int
    """problems per warm-up level"""
    sft_steps: int
    """warm-up optimizer steps (cosine schedule, 10% warm-up)"""
    sft_batch: int
    """sequences per warm-up step"""
    sft_lr: float
    """warm-up peak learning rate"""
    dtype: str
    """the warm-up's compute dtype ("auto": bfloat16 where the device has it natively)"""
    eval_difficulties: tuple[int, ...]
    """levels whose accuracy is measured before and after"""
    eval_problems: int
    """problems per evaluated level"""


SETUPS = {
    "tiny": Setup("rlve/multiplication", "tiny", "multiplication", sft_difficulties=(0,),
                  sft_per_difficulty=800, sft_steps=400, sft_batch=32, sft_lr=3e-3,
                  dtype="float32", eval_difficulties=(0, 1, 2, 3), eval_problems=32),
    "smollm2": Setup("rlve/sorting_fine", "smollm2-135m", "sorting_fine",
                     sft_difficulties=(0, 1, 2), sft_per_difficulty=64, sft_steps=24,
                     sft_batch=8, sft_lr=1e-5, dtype="auto", eval_difficulties=(0, 1, 2, 3, 4),
                     eval_problems=96),
}  # fmt: skip
"""tiny: one- to four-digit products (the embedded model never solves two digits: docs/results.md
section 3); smollm2: sorting 3 to 7 numbers, where SmolLM2 sorts 11% of 3-number lists after the
warm-up and about half after 40 adaptive steps (docs/results.md section 3)"""


def sft_model(out: Path, setup: Setup) -> Path:
    """The shared warm-up: SFT on reference answers at the lowest difficulties (once)."""
    from rlve.config import TrainerConfig
    from rlve.envs import load_environment
    from rlve.models import load_tokenizer
    from rlve.training.sft import reference_answer_data, sft_warmup

    path = out / "sft_model"
    if (path / "config.json").exists():
        print(f"SFT model: {path} (already there)")
        return path
    env = load_environment(setup.env, num_examples=1)
    data = reference_answer_data(env, load_tokenizer(setup.model), setup.sft_difficulties,
                                 setup.sft_per_difficulty)  # fmt: skip
    config = TrainerConfig(model=setup.model, dtype=setup.dtype, lr=setup.sft_lr,
                           max_steps=setup.sft_steps, lr_schedule="cosine",
                           warmup_steps=max(1, setup.sft_steps // 10))  # fmt: skip
    path, losses = sft_warmup(data, config, path, batch_size=setup.sft_batch)
    print(f"SFT on {len(data)} solved problems (difficulties {setup.sft_difficulties}): "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")  # fmt: skip
    return path


def accuracy_by_difficulty(engine, setup: Setup, temperature: float, max_tokens: int):
    """Accuracy on `setup.eval_problems` fresh problems at each evaluated difficulty."""
    from rlve.envs import load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=temperature, max_tokens=max_tokens)
    accuracy = {}
    for d in setup.eval_difficulties:
        env = load_environment(setup.env, num_examples=setup.eval_problems, seed=EVAL_SEED,
                               difficulties=[d])  # fmt: skip
        result = evaluate(env, engine, setup.eval_problems, seed=0, sampling=sampling)
        accuracy[d] = result.summary["reward/accuracy"]
    return accuracy


def experiment(setup: Setup) -> Experiment:
    """Both arms from the shared warm-up; accuracy per difficulty before and after each run."""

    def score(engine, config, seed: int) -> dict[str, float]:
        accuracy = accuracy_by_difficulty(
            engine, setup, config.trainer.temperature, config.rollout.max_tokens
        )
        return {f"acc d={d}": a for d, a in accuracy.items()}

    def from_metrics(rows: list[dict]) -> dict[str, float]:
        return {"effective prompt ratio": fmean(r["batch/effective_prompt_ratio"] for r in rows),
                "mixed outcome ratio": fmean(r.get("batch/mixed_outcome_ratio", math.nan)
                                             for r in rows),
                "final high": rows[-1].get(f"curriculum/{setup.env}/high", math.nan)}  # fmt: skip

    return Experiment(
        name=setup.experiments,
        arms=[
            Arm(arm, (f"+experiment={setup.experiments}_{arm}", "logging.wandb_mode=disabled"))
            for arm in ARMS
        ],
        start=lambda out, seed: sft_model(out, setup),
        score=score,
        curves=[
            "batch/effective_prompt_ratio",
            "batch/mixed_outcome_ratio",
            "reward/mean",
            "reward/accuracy",
        ],
        from_metrics=from_metrics,
        settings={**asdict(setup), "eval_seed": EVAL_SEED},
    )


def highest_solved(accuracy: dict, threshold: float = 0.5) -> int:
    """The highest difficulty whose accuracy is at least `threshold` (-1: none)."""
    levels = [int(d) for d, a in accuracy.items() if a >= threshold]
    return max(levels, default=-1)


def level_name(level: int) -> str:
    return "none" if level < 0 else str(level)


def window_top(summary: dict[str, float]) -> str:
    """the adaptive window's `high` after the last step ("-": a run without a window)"""
    high = summary.get("final high", math.nan)
    return "-" if math.isnan(high) else str(int(high))


def mixed_outcome_cell(runs: list[RunResult]) -> str:
    """mean [min-max] of the runs that measured it (runs from before the metric lack it)"""
    from rlve.experiments.seed_spread import mean_and_range

    mixed = [r.summary.get("mixed outcome ratio", math.nan) for r in runs]
    mixed = [m for m in mixed if not math.isnan(m)]
    if not mixed:
        return "-"
    cell = mean_and_range(mixed)
    return cell if len(mixed) == len(runs) else f"{cell} ({len(mixed)} of {len(runs)} seeds)"


def accuracies(scores: dict[str, float]) -> dict[int, float]:
    """difficulty -> accuracy, from the "acc d=N" scores"""
    return {int(k.removeprefix("acc d=")): a for k, a in scores.items() if k.startswith("acc d=")}


def arms_table(results: list[RunResult]) -> str:
    """Markdown: the SFT start (measured by every run before its first step; they agree up to
    sampling), then per arm, mean [min-max] over seeds."""
    from rlve.experiments.seed_spread import mean_and_range

    levels = sorted(accuracies(results[0].before))
    header = ["arm", "seeds", "effective prompt ratio", "mixed outcome ratio",
              "window top at the end (per seed)",
              "highest level with acc >= 0.5 (per seed)"]  # fmt: skip
    header += [f"acc d={d}" for d in levels]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    first = [r for r in results if r.arm == results[0].arm]
    start = {d: fmean(accuracies(r.before)[d] for r in first) for d in levels}
    cells = ["SFT start", "-", "-", "-", "-", level_name(highest_solved(start))]
    lines.append("| " + " | ".join(cells + [f"{start[d]:.2f}" for d in levels]) + " |")
    for arm in ARMS:
        runs = [r for r in results if r.arm == arm]
        if not runs:
            continue
        ratio = mean_and_range([r.summary["effective prompt ratio"] for r in runs])
        top = ", ".join(window_top(r.summary) for r in runs)
        highest = ", ".join(level_name(highest_solved(accuracies(r.after))) for r in runs)
        cells = [arm, str(len(runs)), ratio, mixed_outcome_cell(runs), top, highest]
        cells += [mean_and_range([accuracies(r.after)[d] for r in runs]) for d in levels]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--setup", choices=sorted(SETUPS), default="tiny",
                        help="the environment and model (SETUPS)")  # fmt: skip
    parser.add_argument("--out", help="default: runs/curriculum (tiny), runs/curriculum_<setup>")
    parser.add_argument("--table-only", action="store_true",
                        help="train nothing: tabulate the runs already finished")  # fmt: skip
    args = parser.parse_args(argv)
    from rlve.config import TrainerConfig
    from rlve.experiments.seed_spread import plot_arms
    from rlve.models.precision import resolve_dtype
    from rlve.sync.placement import resolve_device

    setup = SETUPS[args.setup]
    # "auto" made concrete, so the stored settings say which dtype the warm-up ran in
    setup = replace(setup, dtype=resolve_dtype(setup.dtype, resolve_device(TrainerConfig().device)))
    default_out = "runs/curriculum" + ("" if args.setup == "tiny" else f"_{args.setup}")
    out = Path(args.out or default_out)
    results = run_experiment(experiment(setup), out, args.seeds, table=arms_table,
                             train=not args.table_only)  # fmt: skip
    adaptive = [out / "adaptive" / f"seed{r.seed}" for r in results if r.arm == "adaptive"]
    if adaptive:
        window = plot_arms({"adaptive": adaptive}, [f"curriculum/{setup.env}/high"],
                           out / "adaptive_window.png")  # fmt: skip
        print(f"wrote {window}")
    print(f"\n{setup.env}, {setup.model}, seeds {sorted({r.seed for r in results})}, accuracy on "
          f"{setup.eval_problems} problems per level:\n")  # fmt: skip
    print(arms_table(results))


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
