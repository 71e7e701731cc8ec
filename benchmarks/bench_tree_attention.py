"""Attention over a prefix tree, forward and backward: rlve's tree_sdpa against the slice per
segment it replaced, side by side on the same tree.

The tree is a packed micro-batch of the recipe's kind: `--groups` rollout groups of
`--group-size` sequences; every sequence starts with the same `--system` tokens, a group's share
its `--prompt` tokens after them, and each ends in its own `--completion` tokens. Before: each
segment sliced its queries, and its ancestors' keys and values, out of the [1, H, N, D] tensors;
the backward of every slice writes a zero-filled [1, H, N, D] gradient and adds it to the others,
so its cost grows with segments x nodes. Now: one split and one index_select. The gradients
match up to the order of float sums, which is printed. Then the calls batched
(rlve.training.tree_buckets): segments of like shapes in buckets, one masked sdpa call each,
at each `--max-padding` given (`inf`: every segment in one call, padded to the longest); the
padded area each computes is printed beside its time. On a GPU, also FlexAttention in one call
(rlve.training.tree_flex), with its compile (the first call) apart; it has no backward on the
CPU in torch 2.13 ("FlexAttention does not support backward on CPU"), so not there.

    python benchmarks/bench_tree_attention.py                       # SmolLM2-135M's heads, CPU
    python benchmarks/bench_tree_attention.py --groups 8 --group-size 8 --heads 16 --kv-heads 8 \\
        --head-dim 128 --device cuda --dtype bfloat16            # Qwen3-0.6B's heads on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from rlve.algorithms.prefix_tree import build_prefix_tree
from rlve.training.peak import measured_cpu_tflops
from rlve.training.tree_attention import after_prefix_mask, tree_sdpa
from rlve.training.tree_buckets import bucketed_tree_sdpa, plan_buckets, segment_shapes
from rlve.training.tree_flex import plan_flex
from rlve.types import PrefixTree


def sliced_tree_sdpa(query, key, value, tree: PrefixTree, scaling=None):
    """The implementation before: a slice of query, key and value per segment and run."""
    gqa = query.shape[1] != key.shape[1]
    parts = []
    for segment in tree.segments:
        start, end = segment.nodes
        runs = [*segment.ancestors, segment.nodes]
        keys = torch.cat([key[:, :, first:last] for first, last in runs], dim=2)
        values = torch.cat([value[:, :, first:last] for first, last in runs], dim=2)
        prefix = keys.shape[2] - (end - start)
        mask = after_prefix_mask(end - start, prefix, query.device) if prefix else None
        parts.append(
            F.scaled_dot_product_attention(
                query[:, :, start:end],
                keys,
                values,
                attn_mask=mask,
                is_causal=mask is None,
                scale=scaling,
                enable_gqa=gqa,
            )
        )
    return torch.cat(parts, dim=2)


def recipe_tree(args: argparse.Namespace) -> PrefixTree:
    generator = torch.Generator().manual_seed(0)

    def tokens(n: int) -> list[int]:
        return torch.randint(100, 30000, (n,), generator=generator).tolist()

    system = tokens(args.system)
    sequences = []
    for _ in range(args.groups):
        prompt = system + tokens(args.prompt)
        sequences += [prompt + tokens(args.completion) for _ in range(args.group_size)]
    return build_prefix_tree(sorted(sequences))


def timed(attention, inputs, tree, device: str, repeats: int) -> tuple[float, list]:
    """Median seconds of forward + backward over `repeats` (after one warm-up; with 0 repeats
    the warm-up's), and the grads."""
    times = []
    for _ in range(repeats + 1):
        q, k, v = (x.detach().requires_grad_() for x in inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        attention(q, k, v, tree).float().square().sum().backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:] or times), [q.grad, k.grad, v.grad]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--system", type=int, default=150, help="tokens every sequence shares")
    parser.add_argument("--prompt", type=int, default=30, help="tokens a group shares after them")
    parser.add_argument("--completion", type=int, default=250, help="each sequence's own tokens")
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-padding", type=float, nargs="+", default=[1.25, 2.0, float("inf")],
                        help="buckets' padding bounds to time (inf: one call)")  # fmt: skip
    args = parser.parse_args()

    tree = recipe_tree(args).to(args.device)
    nodes = tree.num_nodes
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator(device=args.device).manual_seed(1)
    query_shape = (1, args.heads, nodes, args.head_dim)
    key_shape = (1, args.kv_heads, nodes, args.head_dim)
    inputs = [
        torch.randn(shape, generator=generator, device=args.device, dtype=dtype)
        for shape in (query_shape, key_shape, key_shape)
    ]
    print(
        f"{len(tree.segments)} segments, {nodes} nodes ({args.groups} groups x {args.group_size},"
        f" {args.system} + {args.prompt} + {args.completion} tokens a sequence), heads"
        f" {args.heads}/{args.kv_heads} x {args.head_dim}, {args.dtype} on {args.device}"
    )
    before_s, before_grads = timed(sliced_tree_sdpa, inputs, tree, args.device, args.repeats)
    now_s, now_grads = timed(
        lambda q, k, v, t: tree_sdpa(q, k, v, t, None), inputs, tree, args.device, args.repeats
    )
    drift = max(  # relative to the largest gradient: bf16 keeps 8 bits, so about 4e-3
        float((a - b).abs().max() / a.abs().max())
        for a, b in zip(before_grads, now_grads, strict=True)
    )
    print(f"slice per segment (before): {before_s * 1000:8.1f} ms forward + backward")
    print(f"split + index_select (now): {now_s * 1000:8.1f} ms forward + backward, "
          f"{len(tree.segments)} calls")  # fmt: skip
    print(f"speed-up {before_s / now_s:.2f}x; gradients differ by {drift:.1e} of the largest")
    own, reads = segment_shapes(tree)
    real = sum(o * r for o, r in zip(own, reads, strict=True))
    # 7 products of [queries x keys] by the head size, 2 forward and 5 backward (flash recomputes
    # the scores), over each segment's whole rectangle, masked part included
    flops = 14 * real * args.head_dim * args.heads
    line = f"the per-segment calls run at {flops / now_s / 1e12:.3f} TFLOP/s"
    if args.device == "cpu":
        float32, bf16 = (measured_cpu_tflops(d, torch.get_num_threads())
                         for d in ("float32", "bfloat16"))  # fmt: skip
        line += f"; a 1,024^3 product: {float32:.3f} float32, {bf16:.3f} bf16 (rlve.training.peak)"
    print(line)
    for max_padding in args.max_padding:
        plan = plan_buckets(tree, max_padding).to(args.device)
        area = sum(b.mask[:, 0].numel() for b in plan.buckets) / real
        bucketed_s, grads = timed(lambda q, k, v, t, p=plan: bucketed_tree_sdpa(q, k, v, p, None),
                                  inputs, tree, args.device, args.repeats)  # fmt: skip
        bucket_drift = max(float((a - b).abs().max() / a.abs().max())
                           for a, b in zip(now_grads, grads, strict=True))  # fmt: skip
        print(f"buckets, max padding {max_padding:>4}: {bucketed_s * 1000:8.1f} ms, "
              f"{len(plan.buckets)} calls, padded area {area:.2f}x; {now_s / bucketed_s:.2f}x the "
              f"per-segment calls; gradients differ by {bucket_drift:.1e}")  # fmt: skip
    if args.device == "cpu":  # no FlexAttention backward on the CPU (torch 2.13)
        return print("FlexAttention: not timed on the CPU (it has no backward there)")
    started = time.perf_counter()
    flex_tree = replace(tree, plan=plan_flex(tree, args.device))
    plan_s = time.perf_counter() - started
    compile_s, _ = timed(lambda q, k, v, t: tree_sdpa(q, k, v, flex_tree, None), inputs, tree,
                         args.device, 0)  # fmt: skip
    flex_s, grads = timed(lambda q, k, v, t: tree_sdpa(q, k, v, flex_tree, None), inputs, tree,
                          args.device, args.repeats)  # fmt: skip
    flex_drift = max(float((a - b).abs().max() / a.abs().max())
                     for a, b in zip(now_grads, grads, strict=True))  # fmt: skip
    print(f"FlexAttention, one call:    {flex_s * 1000:8.1f} ms, {now_s / flex_s:.2f}x the "
          f"per-segment calls; gradients differ by {flex_drift:.1e}; block mask "
          f"{plan_s * 1000:.1f} ms; first call (compile) {compile_s:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
