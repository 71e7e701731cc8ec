"""What a run pays before its first step, part by part: the trainer (model, LoRA, optimizer), the
environments, vLLM's start, the first weight push. Each part alone, one after another, as
`rlve.loop.train` does them.

    python benchmarks/bench_startup.py [--model tiny] [--experiment tictactoe_course] [OVERRIDE ...]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--experiment", default="tictactoe_course")
    parser.add_argument(
        "overrides", nargs="*", help="config overrides, e.g. inference.enforce_eager=true"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    from rlve.loop import build_engine, build_environments
    from rlve.train import load_run_config
    from rlve.training.trainer import Trainer

    parts = {"imports": time.perf_counter() - started}
    config = load_run_config(
        [f"+experiment={args.experiment}", f"trainer.model={args.model}", *args.overrides]
    )
    mark = time.perf_counter()
    trainer = Trainer(replace(config.trainer))
    parts["trainer"] = time.perf_counter() - mark
    mark = time.perf_counter()
    build_environments(config)
    parts["environments"] = time.perf_counter() - mark
    mark = time.perf_counter()
    engine = build_engine(config, trainer.tokenizer)
    parts["vLLM start"] = time.perf_counter() - mark
    mark = time.perf_counter()
    engine.push_weights(trainer.named_weights_for_inference(), 1)
    parts["first push"] = time.perf_counter() - mark
    engine.shutdown()
    print(
        f"\nstart-up of +experiment={args.experiment} with {args.model} {args.overrides}, seconds"
    )
    for name, seconds in parts.items():
        print(f"  {name:<14} {seconds:7.1f}")
    print(f"  {'total':<14} {sum(parts.values()):7.1f}")


if __name__ == "__main__":
    main()
