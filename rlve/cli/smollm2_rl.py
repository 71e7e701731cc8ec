"""A real pretrained model learns on a laptop: SmolLM2-135M-Instruct on rlve/sorting, over seeds.

    python -m rlve.cli.smollm2_rl --seeds 0 1 2 --out runs/smollm2

1. A short SFT on the answer contract, shared by every seed and written once. The instruct model
   alone never writes `<answer>...</answer>` (0 of 64 answers on rlve/multiplication, also with
   an example in the system prompt), so without it every reward would be the format penalty and
   RL would have nothing to compare. The data is the environment's own reference answers.
2. Per seed: `python -m rlve.train +experiment=sorting_smollm2` from that model (the command is
   printed). On the run's own engine, before the first step and after the last: a held-out
   evaluation at difficulty 0 (trained) and 1 (not trained), on problems from a seed no run
   trains on, the same for every run, at the training temperature.
3. A table (mean [min-max] over seeds) and the training curves. Finished seeds are skipped when
   the command is started again.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ENV = "rlve/sorting"
BASE_MODEL = "smollm2-135m"
EVAL_PROBLEMS = {0: 384, 1: 128}
"""held-out problems per difficulty: the trained one, and the next (does it carry over?)"""
EVAL_SEED = 555_000
"""seed of the held-out problems (training draws its problems from env.seed onwards)"""
SFT_PER_DIFFICULTY = 96
SFT_STEPS = 24
SFT_BATCH = 8
SFT_LR = 1e-5


def sft_model(out: Path) -> Path:
    """The shared starting point: SFT on reference answers at the evaluated difficulties (once)."""
    from rlve.config import TrainerConfig
    from rlve.envs import load_environment
    from rlve.models import load_tokenizer
    from rlve.training.sft import reference_answer_data, sft_warmup

    path = out / "sft_model"
    if (path / "config.json").exists():
        print(f"SFT model: {path} (already there)")
        return path
    env = load_environment(ENV, num_examples=1)
    tokenizer = load_tokenizer(BASE_MODEL)
    data = reference_answer_data(env, tokenizer, list(EVAL_PROBLEMS), SFT_PER_DIFFICULTY, seed=1)
    config = TrainerConfig(model=BASE_MODEL, lr=SFT_LR, max_steps=SFT_STEPS)
    path, losses = sft_warmup(data, config, path, batch_size=SFT_BATCH)
    print(f"SFT on {len(data)} solved problems: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return path


def held_out_scores(engine, temperature: float, max_tokens: int, seed: int) -> dict[str, float]:
    """Mean reward and accuracy per difficulty on the held-out problems."""
    from rlve.envs import load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=temperature, max_tokens=max_tokens)
    scores = {}
    for d, problems in EVAL_PROBLEMS.items():
        env = load_environment(ENV, num_examples=problems, seed=EVAL_SEED, difficulties=[d])
        summary = evaluate(env, engine, problems, seed=seed, sampling=sampling).summary
        scores[f"reward d={d}"] = summary["reward/mean"]
        scores[f"accuracy d={d}"] = summary["reward/accuracy"]
        scores[f"format d={d}"] = summary["reward/format_score"]
    return scores


def run_seed(model: Path, seed: int, run_dir: Path) -> dict:
    """One RL run; its held-out scores before the first step and after the last."""
    from rlve.loop import train
    from rlve.rollout.records import write_text_atomically
    from rlve.train import load_run_config

    done = run_dir / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    overrides = ["+experiment=sorting_smollm2", f"trainer.model={model}", f"trainer.seed={seed}",
                 f"env.seed={seed}", f"inference.seed={seed}", f"output_dir={run_dir}",
                 f"run_name=sorting_smollm2_seed{seed}", "logging.wandb_mode=disabled"]  # fmt: skip
    print("python -m rlve.train " + " ".join(overrides))
    config = load_run_config(overrides)
    result: dict = {"seed": seed}

    def score(engine) -> dict[str, float]:
        return held_out_scores(engine, config.trainer.temperature, config.rollout.max_tokens, seed)

    def before_first_step(trainer, engine) -> None:
        result["before"] = score(engine)

    def after_step(step, trainer, engine, metrics) -> None:
        if step == config.trainer.max_steps:
            result["after"] = score(engine)

    train(config, on_step=after_step, on_start=before_first_step)
    write_text_atomically(done, json.dumps(result, indent=1))
    return result


def before_after_table(results: list[dict]) -> str:
    """Markdown: one row per held-out score, before and after RL, mean [min-max] over seeds."""
    from rlve.cli.compare import mean_and_range

    lines = ["| held-out score | before RL (SFT) | after RL |", "|---|---|---|"]
    for key in results[0]["before"]:
        before = mean_and_range([r["before"][key] for r in results])
        after = mean_and_range([r["after"][key] for r in results])
        lines.append(f"| {key} | {before} | {after} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/smollm2")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from rlve.cli.compare import plot_arms
    from rlve.rollout.records import write_text_atomically

    model = sft_model(out)
    results = []
    for seed in args.seeds:
        print(f"\n== seed {seed}")
        results.append(run_seed(model, seed, out / f"seed{seed}"))
    runs = {"CISPO": [out / f"seed{s}" for s in args.seeds]}
    print("wrote", plot_arms(runs, ["reward/mean", "reward/accuracy", "reward/format_score"],
                             out / "training.png"))  # fmt: skip
    table = before_after_table(results)
    write_text_atomically(out / "table.md", table + "\n")
    sizes = ", ".join(f"{n} at d={d}" for d, n in EVAL_PROBLEMS.items())
    print(
        f"\n{BASE_MODEL} on {ENV}, {len(args.seeds)} seeds, held-out problems: {sizes}\n\n{table}"
    )


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
