"""Trainer throughput and peak memory: the tiny model and a random Qwen3-0.6B-shaped model.

Each case runs in its own subprocess, started by a parent that never imports torch, so its
peak RSS (ru_maxrss) is its own. The Qwen3-shaped
model is built from a Qwen3Config with random weights (no download) into a temporary directory.

    python benchmarks/bench_trainer.py                       # all cases, CPU
    python benchmarks/bench_trainer.py --cases tiny-full --steps 5 --device cuda
    python benchmarks/bench_trainer.py --cases tiny-full --profile runs/profile   # + op table
    python benchmarks/bench_trainer.py --cases qwen3-0.6b-full --device cuda --dtype bfloat16 \
        --fused none liger compile          # trainer.fused_kernels side by side
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CASES = ("tiny-full", "tiny-lora", "qwen3-0.6b-lora", "qwen3-0.6b-full")
BATCH_DEFAULTS = {  # groups, group size, prompt and completion tokens: ~1 min a step on 2 cores
    "tiny": {"groups": 2, "group_size": 4, "prompt_len": 64, "completion_len": 64},
    "qwen3": {"groups": 1, "group_size": 2, "prompt_len": 32, "completion_len": 32},
}


def build_qwen3_shaped_model(path: str) -> str:
    """Qwen3-0.6B's shape with random weights (bf16 on disk), plus the tiny tokenizer."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from rlve.models import load_tokenizer

    config = Qwen3Config(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
        rope_theta=1_000_000.0,
    )
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    load_tokenizer("tiny").save_pretrained(path)  # only its pad id is used: ids are random
    return path


def synthetic_groups(
    num_groups: int,
    group_size: int,
    prompt_len: int,
    completion_len: int,
    vocab: int,
    seed: int,
    weight_version: int,
):
    """Random token ids, half the rollouts rewarded; sampled at the trainer's current weights."""
    import random

    from rlve.types import RolloutGroup, Trajectory

    rng = random.Random(seed)
    groups = []
    for example_id in range(num_groups):
        prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
        trajectories = [
            Trajectory(
                prompt=[],
                completion=[],
                token_ids=prompt + [rng.randrange(vocab) for _ in range(completion_len)],
                loss_mask=[0] * prompt_len + [1] * completion_len,
                reward=float(rng.random() < 0.5),
                weight_version=weight_version,  # on-policy: no extra old-log-prob pass
            )
            for _ in range(group_size)
        ]
        groups.append(RolloutGroup(example_id, "bench", trajectories))
    return groups


def peak_memory_mib(device: str) -> dict[str, float]:
    import torch

    # Linux reports ru_maxrss in KiB
    memory = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.startswith("cuda"):
        memory["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return memory


def call_site(event) -> str:
    """Where a profiled op came from: the backward function it ran in, else the innermost frame of
    rlve, transformers, peft or torch.optim code above it (its profiler parents)."""
    parent = event.cpu_parent
    while parent is not None:
        name = parent.name
        if name.startswith("autograd::engine::evaluate_function: "):
            return "backward: " + name.split(": ", 1)[1]
        if any(part in name for part in ("rlve/", "transformers/", "peft/", "torch/optim/")):
            return name.split("site-packages/")[-1]
        parent = parent.cpu_parent
    return "?"


def profiled_step(trainer, groups, path: str) -> None:
    """One more train step under torch.profiler, outside the timed ones. Written to `path`:
    torch's table of the 25 costliest ops by their own time on the device (CPU time on a CPU),
    then the 40 costliest (op, call site) pairs (`call_site`), with their calls and share."""
    from torch.profiler import ProfilerActivity, profile

    cuda = trainer.config.device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities, with_stack=True) as profiler:
        trainer.train_step(groups)
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    by_site: dict[tuple[str, str], list[float]] = {}
    for event in profiler.events():
        if event.name.startswith("aten::"):
            own = event.self_device_time_total if cuda else event.self_cpu_time_total
            entry = by_site.setdefault((event.name, call_site(event)), [0, 0.0])
            entry[0] += 1
            entry[1] += own
    total = sum(us for _, us in by_site.values()) or 1.0
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as table:
        table.write(profiler.key_averages().table(sort_by=key, row_limit=25))
        table.write(f"\n\nThe costliest ops by call site ({'GPU' if cuda else 'CPU'} time)\n")
        table.write(f"{'share':>6} {'ms':>9} {'calls':>6}  op  <- call site\n")
        for (op, site), (calls, us) in sorted(by_site.items(), key=lambda kv: -kv[1][1])[:40]:
            table.write(f"{us / total:6.1%} {us / 1000:9.1f} {calls:6d}  {op}  <- {site}\n")


def run_case(args: argparse.Namespace) -> dict:
    from rlve.config import LoraConfig, TrainerConfig
    from rlve.training.trainer import Trainer

    model = "tiny" if args.case.startswith("tiny") else args.model_dir
    for name, value in BATCH_DEFAULTS[args.case.split("-")[0]].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    config = TrainerConfig(
        model=model,
        dtype=args.dtype,
        device=args.device,
        gradient_checkpointing=args.gradient_checkpointing,
        fused_kernels=args.fused_kernels,
        lora=LoraConfig(enabled=args.case.endswith("lora")),
        lr=1e-5,
        loss="cispo",
        max_tokens_per_microbatch=args.max_tokens_per_microbatch,
    )
    started = time.perf_counter()
    trainer = Trainer(config)
    load_s = time.perf_counter() - started
    vocab = min(len(trainer.tokenizer), trainer.causal_lm.config.vocab_size)
    steps = []

    def batch(seed: int) -> list:
        return synthetic_groups(args.groups, args.group_size, args.prompt_len,
                                args.completion_len, vocab, seed, trainer.version)  # fmt: skip

    for step in range(args.steps + 1):  # step 0 warms up allocators and kernels
        metrics = trainer.train_step(batch(step))
        if step > 0:
            steps.append(metrics)
    if args.profile:  # its profiler's overhead stays out of the timed steps
        path = os.path.join(args.profile, f"{args.case}.txt")
        profiled_step(trainer, batch(args.steps + 1), path)
    train_s = sum(m["perf/train_s"] for m in steps)
    tflops = sum(m["perf/train_flops"] for m in steps) / train_s / 1e12
    tokens = args.groups * args.group_size * (args.prompt_len + args.completion_len) * len(steps)
    return {
        "case": args.case,
        "device": args.device,
        "dtype": args.dtype,
        "fused": args.fused_kernels,
        "trainable_params_m": sum(p.numel() for p in trainer.trainable_parameters) / 1e6,
        "tokens_per_step": tokens // len(steps),
        "load_s": round(load_s, 1),
        "step_s": round(train_s / len(steps), 2),
        "train_tokens_per_s": round(tokens / train_s, 1),
        "train_tflops": round(tflops, 4),
        "peak_tflops": trainer.peak.tflops and round(trainer.peak.tflops, 4),
        "mfu": trainer.peak.tflops and round(tflops / trainer.peak.tflops, 3),
        **{k: round(v) for k, v in peak_memory_mib(args.device).items()},
    }


def without_options(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """`argv` without the options `names` and the values that follow each."""
    kept, dropping = [], False
    for arg in argv:
        if arg.startswith("--"):
            dropping = arg.split("=")[0] in names
            if dropping:
                continue
        if not dropping:
            kept.append(arg)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ...")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--groups", type=int, default=None, help="default per model")
    parser.add_argument("--group-size", type=int, default=None, help="default per model")
    parser.add_argument("--prompt-len", type=int, default=None, help="default per model")
    parser.add_argument("--completion-len", type=int, default=None, help="default per model")
    parser.add_argument("--max-tokens-per-microbatch", type=int, default=1024)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument(
        "--profile", metavar="DIR", help="profile one more step, untimed: DIR/<case>.txt"
    )
    parser.add_argument("--fused", nargs="+", default=["none"],
                        help="trainer.fused_kernels settings, each case run with each")  # fmt: skip
    parser.add_argument("--case", help=argparse.SUPPRESS)  # set in the per-case subprocess
    parser.add_argument("--fused-kernels", default="none", help=argparse.SUPPRESS)  # likewise
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--build-model-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args)))
        return
    if args.build_model_dir:
        build_qwen3_shaped_model(args.build_model_dir)
        return

    with tempfile.TemporaryDirectory(prefix="rlve-bench-") as tmp:
        model_dir = None
        if any(case.startswith("qwen3") for case in args.cases):
            # in a subprocess too: a child inherits its parent's peak RSS through fork
            model_dir = os.path.join(tmp, "qwen3-0.6b-shape")
            subprocess.run([sys.executable, __file__, "--build-model-dir", model_dir], check=True)
        forwarded = without_options(sys.argv[1:], ("--cases", "--fused"))
        for case, fused in [(c, f) for c in args.cases for f in args.fused]:
            command = [
                sys.executable,
                __file__,
                *forwarded,
                "--case",
                case,
                "--fused-kernels",
                fused,
            ]
            if model_dir:
                command += ["--model-dir", model_dir]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                print(f"{case}, fused {fused}: failed\n{result.stderr[-3000:]}", file=sys.stderr)
                continue
            print(result.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
