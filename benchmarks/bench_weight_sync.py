"""Weight push time into vLLM by transport: the shared-memory file against the gloo broadcast,
for the tiny model and (with --models qwen3-0.6b) a random Qwen3-0.6B-shaped model. Each push
is checked: vLLM's log-probs of a fixed sequence must change and match the trainer's.

    python benchmarks/bench_weight_sync.py [--models tiny smollm2-135m qwen3-0.6b] [--pushes 5]
        [--transports shared_memory gloo] [--engine-dtype bfloat16] [--wire trainer]

`--engine-dtype` serves a float32 trainer's weights in another dtype (default: float32, and
bfloat16 for the bf16 Qwen3 shape); `--wire trainer` sends them as the trainer holds them
instead of in the engine's dtype (rlve's way before commit eb7867e), to compare the two.

NCCL needs two GPUs: `--transports nccl --device cuda:1` there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch

from rlve.config import InferenceConfig, TrainerConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.sync.push import ENGINE_DTYPES, gather, push_weights
from rlve.sync.shared_memory import wire_dtype
from rlve.training.trainer import Trainer

MODELS = ("tiny", "smollm2-135m", "qwen3-0.6b")


def trainer_for(model: str, device: str, workdir: str) -> Trainer:
    if model != "qwen3-0.6b":
        return Trainer(TrainerConfig(model=model, device=device))
    from bench_trainer import build_qwen3_shaped_model

    path = build_qwen3_shaped_model(f"{workdir}/qwen3-0.6b-shape")
    return Trainer(TrainerConfig(model=path, dtype="bfloat16", device=device))


def trainer_logprobs(trainer: Trainer, ids: list[int]) -> list[float]:
    with torch.no_grad():
        logits = trainer.model(torch.tensor([ids], device=trainer.device)).logits[0, :-1]
    logp = torch.log_softmax(logits.double(), dim=-1)
    return logp.gather(-1, torch.tensor(ids[1:], device=logp.device)[:, None])[:, 0].tolist()


def push(engine: VLLMEngine, trainer: Trainer, version: int, wire: str) -> float:
    """engine.push_weights, or with `wire` "trainer" the same push without the engine's dtype."""
    if wire == "engine":
        return engine.push_weights(trainer.named_weights_for_inference(), version)
    started = time.perf_counter()
    push_weights(trainer.named_weights_for_inference(), version, engine._everywhere, 600,
                 files=engine._files, broadcaster=engine._broadcaster)  # fmt: skip
    engine._call(gather(*(llm.reset_prefix_cache() for llm in engine._replicas)), 60, "reset")
    return time.perf_counter() - started


def wire_bytes(trainer: Trainer, dtype: torch.dtype | None) -> int:
    tensors = trainer.named_weights_for_inference()
    return sum(t.numel() * wire_dtype(t.dtype, dtype).itemsize for _, t in tensors)


def bench(
    trainer: Trainer, model_dir: str, transport: str, pushes: int, dtype: str, wire: str
) -> dict:
    settings = InferenceConfig(
        dtype=dtype, max_model_len=256, max_num_seqs=8, weight_transport=transport
    )
    probe = list(range(3, 40))
    nbytes = wire_bytes(trainer, ENGINE_DTYPES[dtype] if wire == "engine" else None)
    times, gaps, moved = [], [], []
    with VLLMEngine(model_dir, trainer.tokenizer, settings) as engine:
        before = engine.prompt_logprobs(probe)
        for version in range(1, pushes + 1):
            with torch.no_grad():  # a visible change per push, like an optimizer step
                for parameter in trainer.model.parameters():
                    parameter.mul_(1.01)
            times.append(push(engine, trainer, version, wire))
            served = engine.prompt_logprobs(probe)
            moved.append(max(abs(a - b) for a, b in zip(before, served, strict=True)))
            mine = trainer_logprobs(trainer, probe)
            gaps.append(max(abs(a - b) for a, b in zip(served, mine, strict=True)))
            before = served
    return {
        "transport": transport,
        "engine_dtype": dtype,
        "wire": wire,
        "weights_mib": nbytes / 2**20,
        "first_push_s": times[0],
        "median_push_s": statistics.median(times[1:] or times),
        "gib_per_s": nbytes / 2**30 / statistics.median(times[1:] or times),
        "min_logprob_change": min(moved),
        "max_gap_vs_trainer": max(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=["tiny"])
    parser.add_argument("--transports", nargs="+", default=["shared_memory", "gloo"])
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="the trainer's device")
    parser.add_argument("--engine-dtype", help="vLLM's dtype (default: the trainer's)")
    parser.add_argument("--wire", choices=["engine", "trainer"], default="engine")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for model in args.models:
            trainer = trainer_for(model, args.device, workdir)
            model_dir = trainer.export(f"{workdir}/{model}-served")
            dtype = args.engine_dtype or ("bfloat16" if model == "qwen3-0.6b" else "float32")
            for transport in args.transports:
                started = time.perf_counter()
                result = bench(trainer, model_dir, transport, args.pushes, dtype, args.wire)
                row = {"model": model, **result}
                row["wall_s"] = time.perf_counter() - started
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\n| model | engine dtype | wire | transport | MiB sent | first push s | push s | GiB/s "
          "| max gap |")  # fmt: skip
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['engine_dtype']} | {r['wire']} | {r['transport']} | "
            f"{r['weights_mib']:.0f} | "
            f"{r['first_push_s']:.3f} | {r['median_push_s']:.3f} | {r['gib_per_s']:.2f} | "
            f"{r['max_gap_vs_trainer']:.1e} |"
        )


if __name__ == "__main__":
    main()
