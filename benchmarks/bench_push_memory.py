"""How much a shared-memory weight push raises the vLLM worker's peak memory: rlve's streaming
load (one tensor at a time from the mapped file, through the worker's `reload_weights`) against
the load it replaced (the whole file read at once with `safetensors.torch.load_file` onto the
worker's device, then the model runner's reload), side by side in one engine.

    python benchmarks/bench_push_memory.py [--model smollm2-135m] [--dtype float32] [--rounds 2]

Both loads run inside the worker process, by turns. Each row is that load's rise above the
memory held before it: on a GPU, torch's peak allocation on the worker's device (where the old
load put the whole file next to the served model: the out-of-memory of a large model's first
push); on the CPU, the process's private memory (RssAnon, sampled every millisecond by a thread;
the pages of the mapped file are shared and already in RAM, so they do not count).
The benchmark sends Python functions to the worker, which vLLM allows only with
VLLM_ALLOW_INSECURE_SERIALIZATION=1: the script sets it for its own engine.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from rlve.config import InferenceConfig, TrainerConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.training.trainer import Trainer


def anonymous_bytes() -> int:
    """This process's private memory (RssAnon): what a load allocates, not the pages of the
    mapped weights file it reads, which are shared and already in RAM."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def peak_rise_during(worker, load: str, path: str) -> int:
    """Bytes the worker's memory rose above its size before the load named `load` (in LOADS),
    at the most: on its GPU if it has one, else its private CPU memory."""
    import threading
    import time

    import torch

    if worker.device.type == "cuda":
        torch.cuda.synchronize(worker.device)
        torch.cuda.reset_peak_memory_stats(worker.device)
        before = torch.cuda.memory_allocated(worker.device)
        LOADS[load](worker, path)
        torch.cuda.synchronize(worker.device)
        return torch.cuda.max_memory_allocated(worker.device) - before
    before, highest, done = anonymous_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            highest[0] = max(highest[0], anonymous_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        LOADS[load](worker, path)
    finally:
        done.set()
        sampler.join()
    return max(highest[0], anonymous_bytes()) - before


def streaming_load(worker, path: str) -> None:
    worker.rlve_load_weights_file(path, 0)


def whole_file_load(worker, path: str) -> None:
    """rlve's load before the streaming one, as it was."""
    from safetensors.torch import load_file

    tensors = load_file(path, device=str(worker.device))
    worker.model_runner.reload_weights(
        weights_iterator=iter(tensors.items()), is_checkpoint_format=True
    )


LOADS = {"streaming (now)": streaming_load, "whole file (before)": whole_file_load}


def rise(engine: VLLMEngine, load: str, path: str) -> float:
    """MiB the worker's private memory rose during `load`."""
    return engine._call(engine._rpc(0, peak_rise_during, load, path), 600, "load")[0] / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32", help="the engine's (and file's) dtype")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # this benchmark's engine only
    trainer = Trainer(TrainerConfig(model=args.model))
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = trainer.export(f"{workdir}/served")
        settings = InferenceConfig(dtype=args.dtype, max_model_len=256, max_num_seqs=8)
        with VLLMEngine(model_dir, trainer.tokenizer, settings) as engine:
            engine.push_weights(trainer.named_weights_for_inference(), 1)  # lays out the file
            path = str(engine._files.path)
            file_mib = os.path.getsize(path) / 2**20
            rows = []
            for _ in range(args.rounds):
                for name in LOADS:
                    rows.append((name, rise(engine, name, path)))
                    print(f"{name}: peak +{rows[-1][1]:.0f} MiB", flush=True)
    largest = max(t.numel() * t.element_size() for _, t in trainer.named_weights_for_inference())
    print(f"\n{args.model}, engine dtype {args.dtype}: pushed file {file_mib:.0f} MiB, largest "
          f"tensor {largest / 2**20:.0f} MiB (trainer's dtype)")  # fmt: skip
    print("| load | worker's peak rise (GPU on a GPU, private RAM on the CPU), MiB |\n|---|---:|")
    for name, mib in rows:
        print(f"| {name} | {mib:.0f} |")


if __name__ == "__main__":
    main()
