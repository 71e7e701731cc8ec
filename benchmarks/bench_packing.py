"""Padded vs packed micro-batches: the time of one RL train step (forward, backward, AdamW) and
the share of forward positions spent on padding, on a batch shaped like multi-turn games.
Packed rows run two ways on an sdpa model: with a block-diagonal mask (rows no longer than the
longest sequence) and with one sdpa call per sequence (SEQUENCE_SDPA, the trainer's default:
one unpadded row per micro-batch).

Each sequence is a 60-token prompt, then turns of a 20-token completion (trained) and a
30-token environment reply, cut at a length drawn uniformly from [--min-len, --max-len];
`--outlier N` makes the last sequence N tokens long. Both trainers start from the same weights
and take the same steps; the first step of each is a warm-up and not timed.

    python benchmarks/bench_packing.py                                   # tiny, 16 x 100-500
    python benchmarks/bench_packing.py --outlier 2000
    python benchmarks/bench_packing.py --model smollm2-135m --sequences 8 --min-len 50 \\
        --max-len 250 --steps 1
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from rlve.algorithms.packed_rows import padded_fraction
from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.train_sequences import sequences_from_groups
from rlve.config import TrainerConfig
from rlve.training.packed_attention import separates_sequences
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory

PROMPT, COMPLETION, REPLY = 60, 20, 30
GROUP_SIZE = 4


def game_mask(length: int) -> list[int]:
    """1 on the completions of a prompt / completion / reply / completion ... sequence."""
    mask = [0] * PROMPT
    while len(mask) < length:
        mask += [1] * COMPLETION + [0] * REPLY
    return mask[:length]


def synthetic_groups(lengths: list[int], vocab: int, seed: int) -> list[RolloutGroup]:
    """Groups of GROUP_SIZE games with the given lengths; one win per group (a learning signal)."""
    rng = random.Random(seed)
    groups = []
    for start in range(0, len(lengths), GROUP_SIZE):
        trajectories = [
            Trajectory(prompt=[], completion=[], token_ids=[rng.randrange(vocab) for _ in range(n)],
                       loss_mask=game_mask(n), reward=float(k == 0))
            for k, n in enumerate(lengths[start : start + GROUP_SIZE])
        ]  # fmt: skip
        groups.append(RolloutGroup(example_id=start, env_name="bench", trajectories=trajectories))
    return groups


VARIANTS = {"padded": ("padded", None), "mask": ("packed", "sdpa"), "per-seq": ("packed", None)}
"""name -> (trainer.packing, attention implementation forced after loading; None: the trainer's)"""


def measure(args: argparse.Namespace, variant: str, lengths: list[int]) -> dict[str, float]:
    packing, attention = VARIANTS[variant]
    # a forced dense-mask attention cannot read a prefix tree: that variant trains without one
    config = TrainerConfig(model=args.model, packing=packing, lr=1e-6, cpu_threads=args.threads,
                           max_tokens_per_microbatch=args.max_tokens, dtype=args.dtype,
                           share_prefixes=attention is None)  # fmt: skip
    trainer = Trainer(config)
    if attention is not None:
        trainer.causal_lm.set_attn_implementation(attention)
    groups = synthetic_groups(lengths, trainer.causal_lm.config.vocab_size, args.seed)
    sequences = sequences_from_groups(groups, std_normalize=False).sequences
    single_row = separates_sequences(trainer.causal_lm.config)  # as the trainer packs
    batch = build_train_batch(sequences, max_tokens=args.max_tokens, pad_token_id=0,
                              packing=packing, single_row=single_row)  # fmt: skip
    trainer.train_step(groups)  # warm-up
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        metrics = trainer.train_step(groups)
        times.append(time.perf_counter() - started)
    return {
        "micro_batches": len(batch.micro_batches),
        "positions": sum(m.input_ids.numel() for m in batch.micro_batches),
        "padded_frac": padded_fraction(batch.micro_batches),
        "logged_padded_frac": metrics["perf/padded_frac"],
        "seconds": statistics.median(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny, smollm2-135m, a directory")
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--min-len", type=int, default=100)
    parser.add_argument("--max-len", type=int, default=500)
    parser.add_argument("--outlier", type=int, default=0, help="last sequence's length; 0: none")
    parser.add_argument("--max-tokens", type=int, default=8192, help="max_tokens_per_microbatch")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="trainer.cpu_threads")
    parser.add_argument("--dtype", default="float32", help="trainer.dtype (bfloat16: autocast)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    lengths = [rng.randint(args.min_len, args.max_len) for _ in range(args.sequences)]
    if args.outlier:
        lengths[-1] = args.outlier
    print(f"model {args.model}: {len(lengths)} sequences, {sum(lengths):,} tokens (lengths "
          f"{min(lengths)}-{max(lengths)}), {args.dtype}, budget {args.max_tokens}, "
          f"{args.threads} thread(s), "
          f"median of {args.steps} timed step(s)")  # fmt: skip
    print(f"{'layout':8} {'micro-batches':>13} {'positions':>10} {'padded_frac':>11} "
          f"{'s/step':>8} {'tokens/s':>9}")  # fmt: skip
    results = {}
    for variant in VARIANTS:
        result = results[variant] = measure(args, variant, lengths)
        assert abs(result["padded_frac"] - result["logged_padded_frac"]) < 1e-12
        print(f"{variant:8} {result['micro_batches']:13d} {result['positions']:10,d} "
              f"{result['padded_frac']:11.3f} {result['seconds']:8.2f} "
              f"{sum(lengths) / result['seconds']:9,.0f}")  # fmt: skip
    padded = results["padded"]
    for variant in ("mask", "per-seq"):
        packed = results[variant]
        print(f"{variant} / padded: time {packed['seconds'] / padded['seconds']:.2f}x, forward "
              f"positions {packed['positions'] / padded['positions']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
