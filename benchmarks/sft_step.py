"""The recipe's SFT step (SmolLM2-135M, 8 teacher games a step): seconds, TFLOP/s and MFU.

Reads SFT games written by the recipe (`<out>/sft_data.jsonl`), trains one warm-up step and
`--steps` timed ones on the same shuffled batches in each dtype and fused-kernel setting
(`trainer.fused_kernels`), and prints one JSON line per case with perf/train_s,
perf/train_tflops and perf/mfu as the trainer logs them (the warm-up step, which compiles, apart).

    python benchmarks/sft_step.py --data runs/demo/sft_data.jsonl --dtypes float32 bfloat16
    python benchmarks/sft_step.py --data runs/demo/sft_data.jsonl --fused none compile none compile
    benchmarks/avx2_like.sh .venv/bin/python benchmarks/sft_step.py --data ... --dtypes float32
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

from rlve.config import TrainerConfig
from rlve.training.sft import load_examples
from rlve.training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="an SFT data file (JSON lines)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--batch", type=int, default=8, help="games a step (the recipe's 8)")
    parser.add_argument("--max-tokens-per-microbatch", type=int, default=2048)
    parser.add_argument(
        "--fused",
        nargs="+",
        default=["none"],
        help="trainer.fused_kernels settings, in turn (repeat to interleave)",
    )
    args = parser.parse_args()
    examples = load_examples(args.data)
    rng = random.Random(0)
    batches = [rng.sample(examples, args.batch) for _ in range(args.steps + 1)]
    for dtype, fused in [(d, f) for d in args.dtypes for f in args.fused]:
        config = TrainerConfig(
            model=args.model, dtype=dtype, lr=3e-5, fused_kernels=fused,
            max_tokens_per_microbatch=args.max_tokens_per_microbatch,
        )  # fmt: skip
        trainer = Trainer(config)
        warm_up, *steps = [trainer.sft_step([(e.token_ids, e.loss_mask) for e in b])
                           for b in batches]  # fmt: skip
        print(
            json.dumps(
                {
                    "dtype": trainer.config.dtype,
                    "fused": fused,
                    "warm_up_s": round(warm_up["perf/train_s"], 2),
                    "step_s": round(statistics.mean(m["perf/train_s"] for m in steps), 2),
                    "forward_tokens": statistics.mean(m["perf/forward_tokens"] for m in steps),
                    "train_tflops": round(
                        statistics.mean(m["perf/train_tflops"] for m in steps), 4
                    ),
                    "peak_tflops": round(trainer.peak.tflops or 0, 4),
                    "mfu": round(statistics.mean(m.get("perf/mfu", 0) for m in steps), 3),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
