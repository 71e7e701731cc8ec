"""How the CPU cores are shared between the trainer and vLLM, and what it does to the step.

Runs the tic-tac-toe loop (tiny model, 8 problems x 8 games, 48 tokens per turn) for each thread
setting and async level and prints the mean of steps 2..N of the step time and its parts.
A setting is a list of overrides joined by commas; "default" is no override.

    python benchmarks/bench_threads.py [--steps 4] [--settings default trainer.cpu_threads=1 ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

KEYS = ("perf/step_s", "perf/rollout_s", "perf/generate_s", "perf/train_s", "perf/sync_s")


def mean_step(overrides: list[str], async_level: int, steps: int) -> dict[str, float]:
    from rlve.loop import train
    from rlve.train import load_run_config

    with tempfile.TemporaryDirectory() as tmp:
        config = load_run_config([
            "+experiment=tictactoe_course", "stop_if_unplayable=false",
            f"trainer.max_steps={steps}",
            "rollout.groups_per_step=8", "rollout.max_tokens=48",
            f"rollout.async_level={async_level}", "logging.wandb_mode=disabled",
            "logging.console_every=0", f"output_dir={tmp}/run", *overrides,
        ])  # fmt: skip
        run_dir = train(config)
        rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    rows = rows[1:] or rows  # the first step pays vLLM's warm-up
    return {k.split("/")[1]: sum(r[k] for r in rows) / len(rows) for k in KEYS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--async-levels", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--settings", nargs="+", default=["default", "trainer.cpu_threads=1"])
    args = parser.parse_args()
    results = []
    for level in args.async_levels:
        for setting in args.settings:
            overrides = [] if setting == "default" else setting.split(",")
            results.append((level, setting, mean_step(overrides, level, args.steps)))
    print(f"\nmean of steps 2..{args.steps}, seconds")
    print(f"{'async':>5}  {'setting':<45} " + " ".join(f"{k.split('/')[1]:>9}" for k in KEYS))
    for level, setting, split in results:
        print(f"{level:>5}  {setting:<45} " + " ".join(f"{v:9.2f}" for v in split.values()))


if __name__ == "__main__":
    main()
