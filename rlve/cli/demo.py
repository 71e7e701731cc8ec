"""`make demo`: the main job on the embedded default, runnable on a fresh CPU machine.

1. The scripted baselines' tic-tac-toe table: the evaluation a model gets (as in the recipe:
   win/draw/loss against a random and an optimal opponent, format, invalid moves).
2. SFT warm-up of the embedded tiny model on games of a scripted teacher (noisy minimax).
3. A short real RL run: CISPO steps of that model through vLLM on the CPU
   (`+experiment=tictactoe_cispo`, scaled down); prints where metrics, samples, checkpoints went.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import rlve
from rlve.envs.tictactoe import minimax_policy, noisy_minimax_policy, random_policy
from rlve.rollout import ScriptedEngine

OPPONENTS = {"random": 1.0, "optimal": 0.0}


def _hello_policy(messages) -> str:
    return "hello"


BASELINES = {
    "minimax": minimax_policy,
    "minimax, 30% noise": noisy_minimax_policy(0.3),
    "random": random_policy,
    "says hello": _hello_policy,
}


def baseline_table(games: int, seed: int = 0) -> list[dict[str, float | str]]:
    """One row per (policy, opponent): the evaluation summary of `games` games."""
    rows = []
    for opponent, prob in OPPONENTS.items():
        env = rlve.load_environment(
            "tictactoe",
            num_examples=games,
            seed=seed,
            min_random_move_prob=prob,
            max_random_move_prob=prob,
        )
        for name, policy in BASELINES.items():
            summary = rlve.evaluate(env, ScriptedEngine(policy), games, seed=seed).summary
            rows.append({"policy": name, "opponent": opponent, **summary})
    return rows


def format_table(rows: list[dict[str, float | str]]) -> str:
    header = f"{'policy':<20} {'opponent':<8} {'win/draw/loss %':>16} {'format %':>9} "
    header += f"{'invalid %':>10} {'reward':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        wdl = "/".join(f"{100 * r[k]:.0f}" for k in ("game/win", "game/draw", "game/loss"))
        lines.append(
            f"{r['policy']:<20} {r['opponent']:<8} {wdl:>16} {100 * r['game/format']:>9.1f} "
            f"{100 * r['game/invalid']:>10.1f} {r['reward/mean']:>7.3f}"
        )
    return "\n".join(lines)


def sft_warm_start(run_dir: Path, games: int, steps: int) -> Path:
    """Teacher games -> SFT of the tiny model -> an exported model directory."""
    from rlve.config import TrainerConfig
    from rlve.models import load_tokenizer
    from rlve.training.sft import SftSequence, save_examples, sft_warmup, tictactoe_teacher_data

    teacher, summary = tictactoe_teacher_data(load_tokenizer("tiny"), games, noise=0.1)
    save_examples(run_dir / "sft_data.jsonl", teacher)
    print(f"teacher (minimax, 10% noise): kept {len(teacher)} of {games} games "
          f"(reward {summary['reward/mean']:.3f})")  # fmt: skip
    config = TrainerConfig(model="tiny", lr=3e-3, max_steps=steps, lr_schedule="cosine",
                           warmup_steps=max(1, steps // 10))  # fmt: skip
    sequences = [SftSequence.of(t) for t in teacher]
    path, losses = sft_warmup(sequences, config, run_dir / "sft_model", batch_size=16)
    print(f"SFT: {steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")
    return path


def rl_run(run_dir: Path, model: Path, steps: int) -> Path:
    """A few CISPO steps through vLLM: the recipe's experiment, scaled down for two CPU cores."""
    from rlve.loop import train
    from rlve.train import load_run_config

    overrides = [
        "+experiment=tictactoe_cispo",
        f"trainer.model={model}",
        f"trainer.max_steps={steps}",
        "trainer.lr=2e-4",
        "rollout.groups_per_step=8",
        "rollout.group_size=8",
        "rollout.max_tokens=48",
        f"save_every={steps}",
        f"output_dir={run_dir}",
        "run_name=demo",
    ]
    print("python -m rlve.train " + " ".join(overrides))
    return train(load_run_config(overrides))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", type=int, default=200, help="games per policy and opponent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-steps", type=int, default=80, help="SFT warm-up steps")
    parser.add_argument("--rl-steps", type=int, default=5, help="CISPO steps (0: skip RL)")
    parser.add_argument("--out", default="runs/demo", help="the demo's own directory")
    args = parser.parse_args(argv)
    print(f"Tic-tac-toe baselines: scripted policies as X, {args.games} games each.\n")
    print(format_table(baseline_table(args.games, args.seed)))
    if args.rl_steps <= 0:
        return
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)  # the demo's own directory, rebuilt every time
    out.mkdir(parents=True)
    print("\n== SFT warm-up of the embedded tiny model")
    model = sft_warm_start(out, args.games, args.sft_steps)
    print("\n== RL: CISPO through vLLM on the CPU")
    run_dir = rl_run(out / "rl", model, args.rl_steps)
    print(f"\nmetrics:     {run_dir / 'metrics.jsonl'}")
    print(f"samples:     {run_dir / 'samples'}")
    print(f"checkpoints: {run_dir / 'checkpoints'}")
    print(f"final model: {run_dir / 'model'}")


if __name__ == "__main__":
    main()
