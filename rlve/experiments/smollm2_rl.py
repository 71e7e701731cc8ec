"""A real pretrained model learns on a laptop: SmolLM2-135M-Instruct on rlve/sorting, over seeds.

    python -m rlve.experiments.smollm2_rl --seeds 0 1 2 --out runs/smollm2

1. A short SFT on the answer contract, shared by every seed and written once. The instruct model
   alone never writes `<answer>...</answer>` (0 of 64 answers on rlve/multiplication, also with
   an example in the system prompt), so without it every reward would be the format penalty and
   RL would have nothing to compare. The data is the environment's own reference answers.
2. Per seed: `python -m rlve.train +experiment=sorting_smollm2` from that model (the command is
   printed; the run is in <out>/cispo/seed<N>). On the run's own engine, before the first step
   and after the last: a held-out evaluation at difficulty 0 (trained) and 1 (not trained), on
   problems from a seed no run trains on, the same for every run, at the training temperature.
3. A table (mean [min-max] over seeds) and the training curves (rlve.experiments.experiment).
   Finished seeds are skipped when the command is started again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlve.experiments.experiment import Arm, Experiment, run_experiment, scores_table

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
    config = TrainerConfig(model=BASE_MODEL, dtype="float32", lr=SFT_LR, max_steps=SFT_STEPS)
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


EXPERIMENT_SETTINGS = {"sft": [SFT_PER_DIFFICULTY, SFT_STEPS, SFT_BATCH, SFT_LR],
                       "eval": EVAL_PROBLEMS, "eval_seed": EVAL_SEED}  # fmt: skip


def experiment(dtypes: list[str] | None = None) -> Experiment:
    """`+experiment=sorting_smollm2` from the shared SFT model: one arm "cispo" at the config's
    precision, or with `dtypes` one arm per dtype of trainer and vLLM ("cispo-bfloat16", ...)."""

    def score(engine, config, seed: int) -> dict[str, float]:
        return held_out_scores(engine, config.trainer.temperature, config.rollout.max_tokens, seed)

    base = ("+experiment=sorting_smollm2", "logging.wandb_mode=disabled")
    arms = (
        [Arm("cispo", base)]
        if not dtypes
        else [
            Arm(f"cispo-{d}", (*base, f"trainer.dtype={d}", f"inference.dtype={d}")) for d in dtypes
        ]
    )
    return Experiment(
        name="sorting_smollm2",
        arms=arms,
        start=lambda out, seed: sft_model(out),
        score=score,
        curves=["reward/mean", "reward/accuracy", "reward/format_score"],
        settings=EXPERIMENT_SETTINGS,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/smollm2")
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=["float32", "bfloat16"],
        help="one arm per precision of trainer and vLLM (default: the config's)",
    )
    args = parser.parse_args(argv)
    results = run_experiment(experiment(args.dtypes), Path(args.out), args.seeds)
    sizes = ", ".join(f"{n} at d={d}" for d, n in EVAL_PROBLEMS.items())
    print(f"\n{BASE_MODEL} on {ENV}, {len(args.seeds)} seeds, held-out problems: {sizes}\n")
    print(scores_table(results))


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
