"""How many games in flight, and on which cores vLLM's worker runs, make the recipe's evaluation
fastest: the recipe's 200 games against the optimal opponent (its board, rules, decoding and
evaluation seed) through one vLLM engine per `--cpu-cores` setting (`inference.cpu_cores`),
with each `--concurrency` in turn, after a warm-up of 16 games. Each game samples with its own
seed, but a batch's make-up can change vLLM's arithmetic, so the draw rates printed beside the
times may differ by the games' noise, not more.

    python benchmarks/bench_eval_concurrency.py --model runs/demo/sft_model [--concurrency 64 200]
    python benchmarks/bench_eval_concurrency.py --model runs/demo/sft_model --concurrency 200 \
        --cpu-cores 0 auto   # on two cores: vLLM's own binding, then rlve's

A model that plays (an SFT student) is the workload to measure; SmolLM2 before SFT makes no
legal move, so its games are all invalid answers up to the turn limit.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from rlve.config import InferenceConfig
from rlve.evaluation import evaluate
from rlve.experiments.recipe import evaluation_env
from rlve.experiments.recipe_sizes import DEMO
from rlve.inference.engine import SamplingConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import load_tokenizer, resolve_model_path

WARM_UP_GAMES = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2_135m", help="a model directory or name")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 200])
    parser.add_argument("--board", default="threats", help="the demo's board")
    parser.add_argument("--cpu-cores", nargs="+", default=["auto"], help="inference.cpu_cores")
    args = parser.parse_args()
    size = replace(DEMO, board=args.board)
    env = evaluation_env("optimal", size)
    sampling = SamplingConfig(temperature=size.temperature, max_tokens=size.max_tokens)
    rows = []
    for cores in args.cpu_cores:
        settings = InferenceConfig(dtype=size.dtype, max_model_len=1024, cpu_cores=cores)
        engine = VLLMEngine(resolve_model_path(args.model), load_tokenizer(args.model), settings)
        try:
            evaluate(env, engine, WARM_UP_GAMES, seed=1, sampling=sampling)
            for concurrency in args.concurrency:
                start = time.perf_counter()
                result = evaluate(env, engine, size.eval_games, seed=0, sampling=sampling,
                                  max_concurrent=concurrency)  # fmt: skip
                seconds = time.perf_counter() - start
                rows.append((cores, concurrency, seconds, result.summary["game/draw"]))
        finally:
            engine.shutdown()
    first = rows[0][2]
    print(f"\n{size.eval_games} games vs the optimal opponent, board {args.board}, {args.model}")
    print(f"{'cpu_cores':>9} {'in flight':>9} {'seconds':>8} {'vs first':>8} {'draws %':>8}")
    for cores, concurrency, seconds, draws in rows:
        print(
            f"{cores:>9} {concurrency:>9} {seconds:>8.1f} {first / seconds:>7.2f}x "
            f"{100 * draws:>8.1f}"
        )


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
