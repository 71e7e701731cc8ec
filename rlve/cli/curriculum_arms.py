"""RLVE's central claim at laptop scale: adaptive difficulty against a static range, same compute.

    python -m rlve.cli.curriculum_arms --seeds 0 1 2 --out runs/curriculum

1. A short SFT warm-up of the embedded tiny model on rlve/multiplication's own solutions at the
   lowest difficulty (the output contract; shared by every run, written once).
2. Two arms from that model, each with every seed and the same steps and rollouts per step:
   `+experiment=multiplication_adaptive` (the RLVE window) and `+experiment=multiplication_static`
   (difficulty uniform over 0-3). Each arm is one `python -m rlve.train` command; the commands
   are printed.
3. After the last step, on the run's own engine: accuracy at every difficulty 0-3 (fresh problems
   never trained on, the same for every run, at the training temperature).
4. A table (mean [min-max] over seeds) and plots: effective prompt ratio and reward over steps,
   the adaptive window (rlve.cli.experiment runs the arms). Finished runs are skipped when
   started again.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from statistics import fmean

from rlve.cli.experiment import Arm, Experiment, RunResult, run_experiment

ENV = "rlve/multiplication"
ARMS = ("adaptive", "static")
EVAL_DIFFICULTIES = tuple(range(4))
EVAL_PROBLEMS = 32
"""problems per difficulty in the final evaluation"""
EVAL_SEED = 777_000
"""seed of the evaluation problems (the training runs draw theirs from other seeds)"""
SFT_DIFFICULTIES = (0,)
SFT_PER_DIFFICULTY = 800
SFT_STEPS = 400


def sft_model(out: Path) -> Path:
    """The shared warm-up: SFT on reference answers at the lowest difficulties (once)."""
    from rlve.config import TrainerConfig
    from rlve.envs import load_environment
    from rlve.models import load_tokenizer
    from rlve.training.sft import reference_answer_data, sft_warmup

    path = out / "sft_model"
    if (path / "config.json").exists():
        print(f"SFT model: {path} (already there)")
        return path
    env = load_environment(ENV, num_examples=1)
    data = reference_answer_data(env, load_tokenizer("tiny"), SFT_DIFFICULTIES, SFT_PER_DIFFICULTY)
    config = TrainerConfig(model="tiny", dtype="float32", lr=3e-3, max_steps=SFT_STEPS,
                           lr_schedule="cosine", warmup_steps=SFT_STEPS // 10)  # fmt: skip
    path, losses = sft_warmup(data, config, path, batch_size=32)
    print(f"SFT on {len(data)} solved problems (difficulties {SFT_DIFFICULTIES}): "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")  # fmt: skip
    return path


def accuracy_by_difficulty(engine, temperature: float, max_tokens: int) -> dict[int, float]:
    from rlve.envs import load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=temperature, max_tokens=max_tokens)
    accuracy = {}
    for d in EVAL_DIFFICULTIES:
        env = load_environment(ENV, num_examples=EVAL_PROBLEMS, seed=EVAL_SEED, difficulties=[d])
        result = evaluate(env, engine, EVAL_PROBLEMS, seed=0, sampling=sampling)
        accuracy[d] = result.summary["reward/accuracy"]
    return accuracy


def experiment() -> Experiment:
    """Both arms from the shared warm-up; accuracy per difficulty before and after each run."""

    def score(engine, config, seed: int) -> dict[str, float]:
        accuracy = accuracy_by_difficulty(
            engine, config.trainer.temperature, config.rollout.max_tokens
        )
        return {f"acc d={d}": a for d, a in accuracy.items()}

    def from_metrics(rows: list[dict]) -> dict[str, float]:
        return {"effective prompt ratio": fmean(r["batch/effective_prompt_ratio"] for r in rows),
                "final high": rows[-1].get(f"curriculum/{ENV}/high", math.nan)}  # fmt: skip

    return Experiment(
        name="multiplication",
        arms=[
            Arm(arm, (f"+experiment=multiplication_{arm}", "logging.wandb_mode=disabled"))
            for arm in ARMS
        ],
        start=lambda out, seed: sft_model(out),
        score=score,
        curves=["batch/effective_prompt_ratio", "reward/mean", "reward/accuracy"],
        from_metrics=from_metrics,
        settings={
            "sft": [SFT_DIFFICULTIES, SFT_PER_DIFFICULTY, SFT_STEPS],
            "eval": [EVAL_PROBLEMS, EVAL_SEED],
        },
    )


def highest_solved(accuracy: dict, threshold: float = 0.5) -> int:
    """The highest difficulty whose accuracy is at least `threshold` (-1: none)."""
    levels = [int(d) for d, a in accuracy.items() if a >= threshold]
    return max(levels, default=-1)


def level_name(level: int) -> str:
    return "none" if level < 0 else str(level)


def accuracies(scores: dict[str, float]) -> dict[int, float]:
    return {d: scores[f"acc d={d}"] for d in EVAL_DIFFICULTIES}


def arms_table(results: list[RunResult]) -> str:
    """Markdown: the SFT start (measured by every run before its first step; they agree up to
    sampling), then per arm, mean [min-max] over seeds."""
    from rlve.cli.compare import mean_and_range

    header = ["arm", "seeds", "effective prompt ratio", "highest level with acc >= 0.5 (per seed)",
              *(f"acc d={d}" for d in EVAL_DIFFICULTIES)]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    first = [r for r in results if r.arm == results[0].arm]
    start = {d: fmean(accuracies(r.before)[d] for r in first) for d in EVAL_DIFFICULTIES}
    cells = ["SFT start", "-", "-", level_name(highest_solved(start))]
    lines.append("| " + " | ".join(cells + [f"{start[d]:.2f}" for d in EVAL_DIFFICULTIES]) + " |")
    for arm in ARMS:
        runs = [r for r in results if r.arm == arm]
        if not runs:
            continue
        ratio = mean_and_range([r.summary["effective prompt ratio"] for r in runs])
        levels = ", ".join(level_name(highest_solved(accuracies(r.after))) for r in runs)
        cells = [arm, str(len(runs)), ratio, levels]
        cells += [mean_and_range([accuracies(r.after)[d] for r in runs]) for d in EVAL_DIFFICULTIES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/curriculum")
    args = parser.parse_args(argv)
    from rlve.cli.compare import plot_arms

    out = Path(args.out)
    results = run_experiment(experiment(), out, args.seeds, table=arms_table)
    adaptive = [out / "adaptive" / f"seed{s}" for s in args.seeds]
    window = plot_arms({"adaptive": adaptive}, [f"curriculum/{ENV}/high"],
                       out / "adaptive_window.png")  # fmt: skip
    print(f"wrote {window}")
    print(f"\n{ENV}, {len(args.seeds)} seeds, accuracy on {EVAL_PROBLEMS} problems per level:\n")
    print(arms_table(results))


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
