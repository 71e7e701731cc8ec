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
   the adaptive window, accuracy per difficulty. Finished runs are skipped when started again.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from statistics import fmean

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
    config = TrainerConfig(model="tiny", lr=3e-3, max_steps=SFT_STEPS, lr_schedule="cosine",
                           warmup_steps=SFT_STEPS // 10)  # fmt: skip
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


def sft_accuracy(out: Path, model: Path) -> dict:
    """The starting point's accuracy per difficulty, on its own engine (cached)."""
    from rlve.config import InferenceConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer
    from rlve.rollout.records import write_text_atomically
    from rlve.train import load_run_config

    path = out / "sft_accuracy.json"
    if path.exists():
        return json.loads(path.read_text())
    config = load_run_config(["+experiment=multiplication_adaptive"])
    engine = VLLMEngine(str(model), load_tokenizer(str(model)), InferenceConfig(max_model_len=512))
    try:
        accuracy = accuracy_by_difficulty(
            engine, config.trainer.temperature, config.rollout.max_tokens
        )
    finally:
        engine.shutdown()
    write_text_atomically(path, json.dumps(accuracy))
    return json.loads(path.read_text())


def run_arm(model: Path, arm: str, seed: int, run_dir: Path) -> dict:
    """One training run of one arm; its accuracy per difficulty after the last step."""
    from rlve.loop import train
    from rlve.rollout.records import write_text_atomically
    from rlve.train import load_run_config

    done = run_dir / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    overrides = [
        f"+experiment=multiplication_{arm}",
        f"trainer.model={model}",
        f"trainer.seed={seed}",
        f"env.seed={seed}",
        f"inference.seed={seed}",
        f"output_dir={run_dir}",
        f"run_name=multiplication_{arm}_seed{seed}",
        "logging.wandb_mode=disabled",
    ]
    print("python -m rlve.train " + " ".join(overrides))
    config = load_run_config(overrides)
    result: dict = {"arm": arm, "seed": seed}

    def after_step(step, trainer, engine, metrics) -> None:
        if step == config.trainer.max_steps:
            result["accuracy"] = accuracy_by_difficulty(
                engine, config.trainer.temperature, config.rollout.max_tokens
            )

    train(config, on_step=after_step)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    result["effective_prompt_ratio"] = fmean(r["batch/effective_prompt_ratio"] for r in rows)
    result["final_high"] = rows[-1].get(f"curriculum/{ENV}/high")
    write_text_atomically(done, json.dumps(result, indent=1))
    return result


def highest_solved(accuracy: dict, threshold: float = 0.5) -> int:
    """The highest difficulty whose accuracy is at least `threshold` (-1: none)."""
    levels = [int(d) for d, a in accuracy.items() if a >= threshold]
    return max(levels, default=-1)


def level_name(level: int) -> str:
    return "none" if level < 0 else str(level)


def arms_table(results: list[dict], start: dict) -> str:
    """Markdown: per arm, mean [min-max] over seeds; first the SFT starting point."""
    from rlve.cli.compare import mean_and_range

    header = ["arm", "seeds", "effective prompt ratio", "highest level with acc >= 0.5 (per seed)",
              *(f"acc d={d}" for d in EVAL_DIFFICULTIES)]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    cells = ["SFT start", "-", "-", level_name(highest_solved(start))]
    lines.append(
        "| " + " | ".join(cells + [f"{start[str(d)]:.2f}" for d in EVAL_DIFFICULTIES]) + " |"
    )
    for arm in ARMS:
        runs = [r for r in results if r["arm"] == arm]
        if not runs:
            continue
        cells = [arm, str(len(runs)), mean_and_range([r["effective_prompt_ratio"] for r in runs]),
                 ", ".join(level_name(highest_solved(r["accuracy"])) for r in runs)]  # fmt: skip
        cells += [mean_and_range([r["accuracy"][str(d)] for r in runs]) for d in EVAL_DIFFICULTIES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(out: Path, seeds: list[int]) -> list[Path]:
    from rlve.cli.compare import plot_arms

    arms = {arm: [out / arm / f"seed{s}" for s in seeds] for arm in ARMS}
    paths = [plot_arms(arms, ["batch/effective_prompt_ratio", "reward/mean", "reward/accuracy"],
                       out / "arms.png", smooth=3)]  # fmt: skip
    paths.append(plot_arms({"adaptive": arms["adaptive"]}, [f"curriculum/{ENV}/high"],
                           out / "adaptive_window.png"))  # fmt: skip
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/curriculum")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from rlve.rollout.records import write_text_atomically

    model = sft_model(out)
    results = []
    for seed in args.seeds:
        for arm in ARMS:
            print(f"\n== {arm}, seed {seed}")
            results.append(run_arm(model, arm, seed, out / arm / f"seed{seed}"))
    for path in plot(out, args.seeds):
        print(f"wrote {path}")
    table = arms_table(results, sft_accuracy(out, model))
    write_text_atomically(out / "table.md", table + "\n")
    print(f"\n{ENV}, {len(args.seeds)} seeds, accuracy on {EVAL_PROBLEMS} problems per level:\n")
    print(table)


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
