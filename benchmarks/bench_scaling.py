"""Scale-out on the tiny model: train-step time on 1 process vs 2 FSDP2 ranks (torchrun, gloo),
and training-step time with 1 vs 2 vLLM replicas.

    python benchmarks/bench_scaling.py [--groups 16] [--group-size 8] [--steps 5] [--loop-steps 6]

Part 1 runs the same fixed rollout groups through `Trainer.train_step` (the first step is a
warm-up and not counted). Part 2 runs `python -m rlve.train +experiment=tictactoe_course` with the
tiny model through real vLLM and reports the median of perf/step_s and perf/generate_s over its
steps after the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def fixed_groups(groups: int, size: int, seed: int = 0):
    import torch

    from rlve.types import RolloutGroup, Trajectory

    generator = torch.Generator().manual_seed(seed)
    made = []
    for g in range(groups):
        prompt = torch.randint(5, 400, (60,), generator=generator).tolist()
        trajectories = []
        for i in range(size):
            completion = torch.randint(5, 400, (40 + 8 * (i % 4),), generator=generator).tolist()
            trajectories.append(Trajectory(
                prompt=[], completion=[], token_ids=prompt + completion,
                loss_mask=[0] * len(prompt) + [1] * len(completion), reward=float(i % 2),
            ))  # fmt: skip
        made.append(RolloutGroup(example_id=g, env_name="bench", trajectories=trajectories))
    return made


def time_train_steps(args) -> None:
    """Run as a worker (plain or under torchrun): rank 0 prints a JSON line of step times."""
    from rlve.config import TrainerConfig
    from rlve.distributed import init_world
    from rlve.distributed.world import close_world
    from rlve.training.trainer import Trainer

    world, device = init_world("cpu")
    trainer = Trainer(TrainerConfig(lr=1e-4, device=device, max_steps=args.steps + 1), world)
    groups = fixed_groups(args.groups, args.group_size)
    seconds = []
    for _ in range(args.steps + 1):
        world.barrier()
        started = time.perf_counter()
        trainer.train_step(groups)
        seconds.append(time.perf_counter() - started)
    if world.is_main:
        print("RESULT " + json.dumps({"ranks": world.size, "step_s": seconds[1:]}), flush=True)
    close_world()


def worker_result(command: list[str]) -> dict:
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    line = next(row for row in out.splitlines() if row.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def trainer_ranks(args) -> list[tuple[str, float]]:
    worker = [str(HERE), "--worker", "--groups", str(args.groups),
              "--group-size", str(args.group_size), "--steps", str(args.steps)]  # fmt: skip
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    rows = []
    for label, command in [
        ("1 process (2 threads)", [sys.executable, *worker]),
        ("2 ranks, FSDP2 gloo (1 thread each)", [*torchrun, "--nproc-per-node=2", *worker]),
    ]:
        result = worker_result(command)
        rows.append((label, statistics.median(result["step_s"])))
        print(f"  {label}: {rows[-1][1]:.2f} s per train step", flush=True)
    return rows


def loop_step(replicas: int, steps: int, out: Path) -> tuple[float, float]:
    run_dir = out / f"replicas{replicas}"
    command = [sys.executable, "-m", "rlve.train", "+experiment=tictactoe_course",
               f"trainer.max_steps={steps}", "trainer.lora.enabled=false",
               "rollout.groups_per_step=16", "rollout.group_size=8", "rollout.async_level=0",
               "rollout.max_tokens=48", "logging.wandb_mode=disabled", "logging.console_every=0",
               "inference.max_model_len=1024", f"inference.replicas={replicas}",
               f"output_dir={run_dir}", "save_every=1000"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    rows = [json.loads(r) for r in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    return (statistics.median(r["perf/step_s"] for r in rows),
            statistics.median(r["perf/generate_s"] for r in rows))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--loop-steps", type=int, default=6)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        time_train_steps(args)
        return
    print(f"cores: {os.cpu_count()}; tiny model; {args.groups} groups x {args.group_size}")
    print("== trainer: one train step on fixed groups (about 100 tokens per sequence)")
    ranks = trainer_ranks(args)
    print(f"  ratio 2 ranks / 1 process: {ranks[1][1] / ranks[0][1]:.2f}")
    print(f"== training loop through vLLM: {args.loop_steps} steps, 16 x 8 games, async 0")
    with tempfile.TemporaryDirectory() as tmp:
        loop = {r: loop_step(r, args.loop_steps, Path(tmp)) for r in (1, 2)}
    for replicas, (step_s, generate_s) in loop.items():
        print(f"  {replicas} replica(s): step {step_s:.2f} s, generation {generate_s:.2f} s")
    print(f"  ratio 2 / 1 replicas: step {loop[2][0] / loop[1][0]:.2f}, "
          f"generation {loop[2][1] / loop[1][1]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
