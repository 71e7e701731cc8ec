"""Where a weight push through the shared-memory file spends its time, part by part.

For each model: a trainer with LoRA (rank 8, every linear layer) and a vLLM engine on the same
weights; each push is timed as (1) merging LoRA into the weights the engine loads, (2) writing
them to /dev/shm, (3) the engine loading them (read + vLLM's in-place reload) and (4) the
prefix-cache reset. Median of pushes 2..N.

    python benchmarks/bench_push_parts.py [--models tiny smollm2-135m qwen3-0.6b] [--pushes 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from rlve.config import InferenceConfig, LoraConfig, TrainerConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import resolve_model_path
from rlve.sync.push import gather, wait_for
from rlve.training.trainer import Trainer


def model_path(model: str, workdir: str) -> tuple[str, str]:
    """(path, dtype) of a model name; qwen3-0.6b is random weights of that shape, bf16."""
    if model == "qwen3-0.6b":
        from bench_trainer import build_qwen3_shaped_model

        return build_qwen3_shaped_model(f"{workdir}/qwen3-0.6b-shape"), "bfloat16"
    return resolve_model_path(model), "float32"


def timed_push(trainer: Trainer, engine: VLLMEngine, version: int) -> dict[str, float]:
    times = {}
    started = time.perf_counter()
    tensors = [(name, t.detach().contiguous()) for name, t in trainer.named_weights_for_inference()]
    times["merge"] = time.perf_counter() - (mark := started)
    path = engine._files.write(tensors, version)
    times["write"] = time.perf_counter() - (mark := mark + times["merge"])
    loading = engine._everywhere("rlve_load_weights_file", str(path), version)
    wait_for(loading, 600, "a push")
    times["load"] = time.perf_counter() - (mark := mark + times["write"])
    resets = gather(*(llm.reset_prefix_cache() for llm in engine._replicas))
    engine._call(resets, 600, "resetting the prefix caches")
    times["reset"] = time.perf_counter() - (mark + times["load"])
    times["total"] = time.perf_counter() - started
    times["mib"] = sum(t.numel() * t.element_size() for _, t in tensors) / 2**20
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2-135m"])
    parser.add_argument("--pushes", type=int, default=4)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for model in args.models:
            path, dtype = model_path(model, workdir)
            lora = LoraConfig(enabled=True, rank=8, target_modules=["all-linear"])
            trainer = Trainer(TrainerConfig(model=path, dtype=dtype, lora=lora))
            settings = InferenceConfig(max_model_len=1024, dtype=dtype)
            with VLLMEngine(path, trainer.tokenizer, settings) as engine:
                pushes = []
                for version in range(1, args.pushes + 1):
                    with torch.no_grad():  # a trained adapter: B is zero at the start
                        for name, p in trainer.model.named_parameters():
                            if "lora_B" in name:
                                p.add_(0.01)
                    pushes.append(timed_push(trainer, engine, version))
            later = pushes[1:] or pushes
            rows.append((model, {k: statistics.median(p[k] for p in later) for k in later[0]}))
            del trainer
    print(f"\nshared-memory push, median of pushes 2..{args.pushes}, seconds")
    print(
        f"{'model':<14} {'MiB':>7} {'merge':>7} {'write':>7} {'load':>7} {'reset':>7} {'total':>7}"
    )
    for model, t in rows:
        print(f"{model:<14} {t['mib']:7.0f} {t['merge']:7.3f} {t['write']:7.3f} {t['load']:7.3f} "
              f"{t['reset']:7.3f} {t['total']:7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
