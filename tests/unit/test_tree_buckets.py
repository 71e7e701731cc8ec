"""The prefix tree's attention batched into buckets (rlve.training.tree_buckets) against the call
per segment it stands in for (rlve.training.tree_attention), on trees of several shapes."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rlve.algorithms.prefix_tree import build_prefix_tree
from rlve.training.tree_attention import tree_sdpa
from rlve.training.tree_buckets import (
    bucketed_tree_sdpa,
    group_segments,
    plan_buckets,
    segment_shapes,
)

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}


def test_segments_group_while_the_padding_stays_bounded():
    # a system prompt alone (150 x 150), then two answers that read 430 keys each
    assert group_segments([250, 150, 250], [430, 150, 430], 1.25) == [[1], [0, 2]]
    assert group_segments([250, 150, 250], [430, 150, 430], float("inf")) == [[1, 0, 2]]
    assert group_segments([250, 150, 250], [430, 150, 430], 1.0) == [[1], [0, 2]]
    with pytest.raises(ValueError, match="max_padding must be at least 1"):
        group_segments([1], [1], 0.5)


def test_the_plan_of_two_sequences_by_hand():
    # nodes 5 6 7 | 8 9: segment 0 is nodes 0-2; segment 1 is nodes 3-4 after nodes 0-1
    tree = build_prefix_tree([[5, 6, 7], [5, 6, 8, 9]])
    plan = plan_buckets(tree, float("inf"))
    (bucket,) = plan.buckets
    assert bucket.query_index.tolist() == [[0, 1, 2], [3, 4, 0]]  # padding reads node 0
    assert bucket.key_index.tolist() == [[0, 1, 2, 0], [0, 1, 3, 4]]
    assert bucket.mask[:, 0].int().tolist() == [
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]],  # causal, the padded key hidden
        [[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]],  # both ancestors, then causal; a padded row
    ]
    assert bucket.real_rows.tolist() == [0, 1, 2, 3, 4]
    assert plan.node_order.tolist() == [0, 1, 2, 3, 4]
    # bounded at 1.25 the two shapes (3 x 3 and 2 x 4) go apart: 2 x 3 x 4 = 24 > 1.25 x 17
    assert [b.mask.shape for b in plan_buckets(tree).buckets] == [(1, 1, 3, 3), (1, 1, 2, 4)]


def random_tokens(rng: random.Random, n: int, vocab: int = 1000) -> list[int]:
    return [rng.randrange(vocab) for _ in range(n)]


def one_segment(rng):
    return [random_tokens(rng, 50)]


def wide_group(rng):  # a prompt and 16 answers of several lengths
    prompt = random_tokens(rng, 40)
    return [prompt + random_tokens(rng, rng.randint(5, 30)) for _ in range(16)]


def deep_chain(rng):  # a multi-turn game: each episode replays the one before for a while
    turns = [random_tokens(rng, 12) for _ in range(8)]
    return [sum(turns[:k], []) + random_tokens(rng, 6) for k in range(1, 9)]


def small_vocabulary(rng):  # branches anywhere: sequences over 3 tokens share prefixes at random
    return [random_tokens(rng, rng.randint(4, 40), vocab=3) for _ in range(24)]


def recipe_micro_batch(rng):  # the recipe's RL step: 9 teacher games, 9 segments, 1,939 nodes
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "recipe_tree" / "tree.json"
    return json.loads(fixture.read_text())["sequences"]


SHAPES = [one_segment, wide_group, deep_chain, small_vocabulary, recipe_micro_batch]


def check_parity(shape, plan_of, dtype: torch.dtype, device: str, backward: bool = True) -> None:
    """tree_sdpa on a tree of `shape` with the plan `plan_of(tree)` against one call per
    segment: the output and, with `backward`, every gradient."""
    rng = random.Random(0)
    tree = build_prefix_tree(sorted(shape(rng))).to(device)
    planned = replace(tree, plan=plan_of(tree))
    generator = torch.Generator().manual_seed(1)
    head_dim, nodes = 16, tree.num_nodes
    inputs = [torch.randn(1, heads, nodes, head_dim, generator=generator).to(device, dtype)
              for heads in (4, 2, 2)]  # GQA: 4 query heads on 2 key heads  # fmt: skip
    grad_out = torch.randn(1, 4, nodes, head_dim, generator=generator).to(device, dtype)

    def run(attended_tree):
        q, k, v = (x.clone().requires_grad_(backward) for x in inputs)
        out = tree_sdpa(q, k, v, attended_tree, 0.25)
        if not backward:
            return [out.detach()]
        out.backward(grad_out)
        return [out.detach(), q.grad, k.grad, v.grad]

    # Each result is a sum of at most K terms (keys read; or D terms of a dot product), added
    # in another order by the other kernel's tiling: |error| <= 2 (K + D) u of the largest
    # term. In bf16 the kernel works in float32 and rounds once (one bf16 ulp apart at most),
    # but a key's gradient adds up in bf16 over the segments that read it, one rounding each.
    _, reads = segment_shapes(tree)
    readers = torch.bincount(tree.key_index, minlength=nodes).max().item()
    u = UNIT_ROUNDOFF[dtype]
    bound = 2 * (max(reads) + head_dim) * u if dtype == torch.float32 else 2 * (readers + 1) * u
    names = ["output", "dq", "dk", "dv"]
    for name, a, b in zip(names, run(tree), run(planned), strict=False):
        scale = a.abs().max().item()
        assert (a.float() - b.float()).abs().max().item() <= bound * scale, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("max_padding", [1.0, 1.25, float("inf")])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_buckets_give_the_per_segment_outputs_and_gradients(shape, max_padding, dtype):
    check_parity(shape, lambda tree: plan_buckets(tree, max_padding), dtype, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_buckets_on_cuda_give_the_per_segment_outputs_and_gradients(shape, dtype):
    check_parity(shape, lambda tree: plan_buckets(tree).to("cuda"), dtype, "cuda")


def test_a_padded_row_or_column_sends_no_gradient_to_node_0():
    # node 0 is what padding reads: with a tree whose segments differ in shape, its gradient
    # must be what the per-segment calls give, not that plus the padding's
    tree = build_prefix_tree(sorted(wide_group(random.Random(3))))
    plan = plan_buckets(tree, float("inf"))
    assert any((b.query_index == 0).sum() > 1 for b in plan.buckets)  # padding is there
    q, k, v = (torch.randn(1, 2, tree.num_nodes, 8).requires_grad_() for _ in range(3))
    bucketed_tree_sdpa(q, k, v, plan, None).sum().backward()
    grads = [x.grad[:, :, 0].clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    tree_sdpa(q, k, v, tree, None).sum().backward()
    for got, x in zip(grads, (q, k, v), strict=True):
        assert torch.allclose(got, x.grad[:, :, 0], rtol=1e-5, atol=1e-6)
