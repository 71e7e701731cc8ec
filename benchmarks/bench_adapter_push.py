"""A LoRA run's push: the adapter alone (`sync.lora=adapter`) against every merged weight.

    .venv/bin/python benchmarks/bench_adapter_push.py                    # SmolLM2-135M, rank 16
    .venv/bin/python benchmarks/bench_adapter_push.py --model tiny --pushes 3

Three vLLM engines on the same model, one after the other: one as a merged-push run starts it (no
LoRA), one as an adapter run does (`lora_rank`; vLLM's CPU platform then runs the model
uncompiled), and the first again with `enforce_eager` (uncompiled, no LoRA: what of the adapter
engine's sampling cost is the lost compilation). On each: `pushes` pushes of a trainer's weights
with a nonzero adapter (merged: every tensor through shared memory; adapter: peft's files
written and loaded in place), then the rollout throughput of one batch of `requests` seeded
answers of `tokens` tokens, taken twice (the second counted). Prints seconds and MB a push,
sampled tokens/s, and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

import torch

from rlve.config import InferenceConfig, LoraConfig, TrainerConfig
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import resolve_model_path
from rlve.rollout.chat_tokens import ChatTokens
from rlve.sync.adapter_push import PolicyPush
from rlve.training.trainer import Trainer


def throughput(engine: VLLMEngine, requests: int, tokens: int) -> float:
    """Sampled tokens per second of one batch of `requests` answers, all in flight."""
    import asyncio

    chat = ChatTokens(engine.tokenizer)
    messages = [{"role": "user", "content": "Write a short story about a lighthouse."}]
    ids = chat.prompt_ids(messages)

    async def batch() -> int:
        calls = [engine.generate(GenerationRequest(messages, SamplingConfig(
            temperature=1.0, max_tokens=tokens, seed=i), prompt_ids=ids))
            for i in range(requests)]  # fmt: skip
        return sum(len(g.token_ids) for g in await asyncio.gather(*calls))

    asyncio.run(batch())  # warm
    start = time.perf_counter()
    sampled = asyncio.run(batch())
    return sampled / (time.perf_counter() - start)


def measure(trainer: Trainer, adapter: bool, args, eager: bool = False) -> dict[str, float]:
    settings = InferenceConfig(dtype=args.dtype, max_model_len=1024, enforce_eager=eager)
    rank = trainer.config.lora.rank if adapter else None
    engine = VLLMEngine(resolve_model_path(args.model), trainer.tokenizer, settings, lora_rank=rank)
    crew = SimpleNamespace(
        trainer=trainer, weights_for_inference=trainer.named_weights_for_inference
    )
    push = PolicyPush(crew, engine, adapter=adapter)
    try:
        results = [push(version) for version in range(1, args.pushes + 1)]
        tokens_s = throughput(engine, args.requests, args.tokens)
    finally:
        push.close()
        engine.shutdown()
    return {"push_s": statistics.median(r.seconds for r in results),
            "push_mb": results[-1].bytes / 1e6, "tokens_s": tokens_s}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    parser.add_argument("--model", default="smollm2_135m")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--dtype", default="float32", help="trainer and vLLM")
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    lora = LoraConfig(enabled=True, rank=args.rank, alpha=2.0 * args.rank)
    trainer = Trainer(TrainerConfig(model=args.model, dtype=args.dtype, lora=lora))
    with torch.no_grad():  # a trained adapter's B is not zero
        for name, parameter in trainer.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.01)
    rows = {"merged": measure(trainer, False, args), "adapter": measure(trainer, True, args),
            "merged, uncompiled": measure(trainer, False, args, eager=True)}  # fmt: skip
    print(f"\n{args.model}, LoRA rank {args.rank}, {args.dtype}, median of {args.pushes} pushes; "
          f"{args.requests} answers of {args.tokens} tokens\n")  # fmt: skip
    print("| push | seconds a push | MB a push | rollout tokens/s |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['push_s']:.3f} | {row['push_mb']:.1f} | {row['tokens_s']:.0f} |")
    m, a = rows["merged"], rows["adapter"]
    print(f"\nadapter / merged: push time {a['push_s'] / m['push_s']:.2f}x, bytes "
          f"{a['push_mb'] / m['push_mb']:.3f}x, rollout throughput "
          f"{a['tokens_s'] / m['tokens_s']:.2f}x")  # fmt: skip


if __name__ == "__main__":  # vLLM starts processes that re-import this file
    main()
