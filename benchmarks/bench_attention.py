"""Attention forward and backward on the CPU: the kernels torch offers, on the recipe's shapes.

SmolLM2-135M's attention (9 query heads, 3 key/value heads, head dim 64) for one game of the
tic-tac-toe recipe: a whole grid-board game (450 tokens, causal), and what prefix sharing leaves
per game: the continuation after the shared prompt attending to it (grid: 276 queries over 450
keys; compact board: 181 over 316). Inputs arrive in float32, as the decoder hands them over
under bf16 autocast. Kernels:
- sdpa: F.scaled_dot_product_attention under bf16 autocast (the trainer's; the CPU flash kernel);
- sdpa fp32: the same kernel without autocast;
- math fp32: sdpa's reference (math) kernel in float32;
- matmul bf16: the scores and the weighted sum as two bf16 matrix products under autocast, a
  float32 softmax between them. On the CPU a bf16 product has no float32 output, so the scores
  are rounded to bf16 (8 bits) before the softmax, and the [heads, queries, keys] weights are
  kept for the backward pass.

    python benchmarks/bench_attention.py --repeats 10
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64
SHAPES = {  # name: (queries, keys)
    "grid game, alone (450 causal)": (450, 450),
    "grid continuation (276 after 174)": (276, 450),
    "compact continuation (181 after 135)": (181, 316),
}


def after_prefix(queries: int, keys: int) -> torch.Tensor:
    return torch.ones(queries, keys, dtype=torch.bool).tril(diagonal=keys - queries)


def matmul_attention(q, k, v, mask):
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)).float() * HEAD_DIM**-0.5
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.to(v.dtype if not torch.is_autocast_enabled("cpu") else torch.bfloat16) @ v


def kernel(name: str):
    def sdpa(q, k, v, mask):
        causal = mask.shape[0] == mask.shape[1]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if causal else mask, is_causal=causal, enable_gqa=True
        )

    def math(q, k, v, mask):
        with sdpa_kernel([SDPBackend.MATH]):
            return sdpa(q, k, v, mask)

    return {"sdpa": sdpa, "sdpa fp32": sdpa, "math fp32": math, "matmul bf16": matmul_attention}[
        name
    ]


def time_kernel(name: str, queries: int, keys: int, repeats: int) -> tuple[float, float]:
    """Mean forward and backward milliseconds (after two warm-up rounds)."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, HEADS, queries, HEAD_DIM, generator=generator, requires_grad=True)
    k = torch.randn(1, KV_HEADS, keys, HEAD_DIM, generator=generator, requires_grad=True)
    v = torch.randn(1, KV_HEADS, keys, HEAD_DIM, generator=generator, requires_grad=True)
    mask = after_prefix(queries, keys)
    autocast = name in ("sdpa", "matmul bf16")
    forward = backward = 0.0
    for round_ in range(repeats + 2):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = kernel(name)(q, k, v, mask)
        middle = time.perf_counter()
        out.float().sum().backward()
        if round_ >= 2:
            forward += middle - started
            backward += time.perf_counter() - middle
    return 1e3 * forward / repeats, 1e3 * backward / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| shape | kernel | forward ms | backward ms | total ms | vs sdpa |")
    print("|---|---|---:|---:|---:|---:|")
    for shape, (queries, keys) in SHAPES.items():
        base = None
        for name in ("sdpa", "sdpa fp32", "math fp32", "matmul bf16"):
            forward, backward = time_kernel(name, queries, keys, args.repeats)
            base = base or forward + backward
            total = forward + backward
            print(f"| {shape} | {name} | {forward:.2f} | {backward:.2f} | {total:.2f} | "
                  f"{total / base:.2f}x |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
