"""The demo's SFT and RL steps (SmolLM2, the teacher's games on the threats board, 8 games per
SFT step, 8 x 8 per RL step, CISPO, 2048-token micro-batches, bfloat16) under three ways of
getting large CPU tensors, each in its own process so that none inherits another's heap:
- "glibc default": THP_MEM_ALLOC_ENABLE=0, glibc maps every allocation above 32 MB afresh and
  unmaps it on free, so each step faults its large tensors in again, 4 KB at a time;
- "freed memory kept": glibc's mallopt with mmap off and a 2 GiB trim threshold, so freed
  blocks stay on the heap (`trainer.cpu_keep_freed_memory`, rlve.training.allocator);
- "huge pages": torch's THP_MEM_ALLOC_ENABLE=1, transparent huge pages for its tensors.
Prints seconds per step, user and system CPU seconds per step, minor page faults per step and
the peak RSS after each kind of step, and each setting's speed-up over glibc's default.

    python benchmarks/bench_allocator.py [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SETTINGS = {"glibc default": "0", "freed memory kept": "0", "huge pages": "1"}
"""setting -> THP_MEM_ALLOC_ENABLE"""


def usage() -> tuple[float, float, int]:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime, u.ru_minflt


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed(step, batches) -> dict[str, float]:
    """`step(batch)` on every batch after the first (a warm-up): per-step means."""
    step(batches[0])
    start, (user, system, faults) = time.perf_counter(), usage()
    for batch in batches[1:]:
        step(batch)
    seconds = time.perf_counter() - start
    user_end, system_end, faults_end = usage()
    n = len(batches) - 1
    return {"s": seconds / n, "user_s": (user_end - user) / n,
            "system_s": (system_end - system) / n, "faults": (faults_end - faults) / n}  # fmt: skip


def measure(setting: str, steps: int) -> dict[str, dict[str, float]]:
    """One process, one trainer: `steps` timed SFT steps, then `steps` timed RL steps."""
    from dataclasses import replace

    from bench_step_cost import recipe_groups

    from rlve.config import TrainerConfig
    from rlve.experiments.recipe_sizes import DEMO
    from rlve.models import load_tokenizer
    from rlve.training.allocator import keep_freed_memory
    from rlve.training.sft import SftSequence, tictactoe_teacher_data
    from rlve.training.trainer import Trainer

    if setting == "freed memory kept":
        keep_freed_memory()

    size = replace(DEMO, board="threats", dtype="bfloat16")
    games, _ = tictactoe_teacher_data(
        load_tokenizer(size.model), 16 * (steps + 1), noise=size.teacher_noise,
        best_moves_only=True, min_random_move_prob=size.min_random_move_prob,
        max_random_move_prob=size.max_random_move_prob, rules=size.rules, board=size.board,
    )  # fmt: skip
    examples = [(s.token_ids, s.loss_mask) for s in map(SftSequence.of, games)]
    b = size.sft_batch
    config = TrainerConfig(
        model=size.model, dtype=size.dtype, lr=size.rl_lr, loss="cispo", is_cap=5.0,
        old_logprobs="recompute", max_tokens_per_microbatch=size.max_tokens_per_microbatch,
    )  # fmt: skip
    trainer = Trainer(config)
    groups = recipe_groups(trainer.tokenizer, size.board, size.teacher_noise,
                           size.groups_per_step, size.group_size)  # fmt: skip
    sft = timed(trainer.sft_step, [examples[i * b : (i + 1) * b] for i in range(steps + 1)])
    sft["peak_rss_gb"] = peak_rss_gb()
    rl = timed(trainer.train_step, [groups] * (steps + 1))
    rl["peak_rss_gb"] = peak_rss_gb()
    return {"SFT": sft, "RL": rl}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each kind")
    parser.add_argument("--setting", choices=list(SETTINGS), help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.setting:
        print(json.dumps(measure(args.setting, args.steps)))
        return
    rows = {}
    for setting, switch in SETTINGS.items():
        command = [sys.executable, __file__, "--setting", setting, "--steps", str(args.steps)]
        env = {**os.environ, "THP_MEM_ALLOC_ENABLE": switch}
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        rows[setting] = json.loads(out.strip().splitlines()[-1])
    print(f"\nSmolLM2-135M, the demo's sizes, {args.steps} steps of each kind after a warm-up")
    print(f"{'step':<4} {'setting':<18} {'s/step':>7} {'user s':>7} {'system s':>9} "
          f"{'faults':>9} {'peak RSS GB':>12} {'speed-up':>9}")  # fmt: skip
    for kind in ("SFT", "RL"):
        default = rows["glibc default"][kind]["s"]
        for setting, row in rows.items():
            r = row[kind]
            print(f"{kind:<4} {setting:<18} {r['s']:>7.2f} {r['user_s']:>7.2f} "
                  f"{r['system_s']:>9.2f} {r['faults']:>9.0f} {r['peak_rss_gb']:>12.2f} "
                  f"{default / r['s']:>8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
