"""A prefix tree's attention in a few sdpa calls a layer: its segments grouped into buckets of
like shapes, each bucket one batched call.

rlve.training.tree_attention calls sdpa once per segment (63 calls a layer in the recipe's
step, each small). Here the segments are sorted by how many keys they read and cut into buckets;
a bucket's segments are stacked as one batch, each padded to the bucket's longest queries and
keys, with a boolean mask that gives every real query what it sees in the per-segment call (its
ancestors, then its own nodes up to itself) and hides the padding. A bucket grows while its padded
area stays within `max_padding` times the real one, so the waste is bounded and the number of
calls is what the tree's shapes need: a tree of the recipe's kind (a system prompt, 8 group
prompts, 64 answers) needs 3 (docs/benchmarks.md, "The prefix tree's attention in buckets").

The plan (which node goes where) depends on the tree only: it is made once per micro-batch and
read by every layer. Padded rows and columns point at node 0: a padded key is masked (weight 0,
so no gradient reaches node 0 from it), a padded query's output is never read (no gradient
either), and every padded query row sees key 0 so that no row of the softmax is empty (a NaN).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlve.types import Bucket, PrefixTree, TreeBuckets

MAX_PADDING = 1.25
"""a bucket's padded area (segments x longest queries x longest keys) at most this many times
the sum of its segments' own queries x keys read"""


def segment_shapes(tree: PrefixTree) -> tuple[list[int], list[int]]:
    """Per segment, its own nodes (queries) and the keys it reads (ancestors + own)."""
    own = [end - start for start, end in (segment.nodes for segment in tree.segments)]
    reads = [
        size + sum(end - start for start, end in segment.ancestors)
        for size, segment in zip(own, tree.segments, strict=True)
    ]
    return own, reads


def group_segments(own: list[int], reads: list[int], max_padding: float) -> list[list[int]]:
    """Segment indices cut into buckets: sorted by keys read (then queries), a bucket takes the
    next segment while its padded area stays within `max_padding` x its real area.
    Example: own [250, 150, 250], reads [430, 150, 430], 1.25 -> [[1], [0, 2]]."""
    if max_padding < 1:
        raise ValueError(f"max_padding must be at least 1 (no padding), got {max_padding}")
    order = sorted(range(len(own)), key=lambda i: (reads[i], own[i], i))
    groups: list[list[int]] = []
    most_own = most_read = real = 0
    for i in order:
        grown_own, grown_read = max(most_own, own[i]), max(most_read, reads[i])
        grown_real = real + own[i] * reads[i]
        if groups and (len(groups[-1]) + 1) * grown_own * grown_read <= max_padding * grown_real:
            groups[-1].append(i)
            most_own, most_read, real = grown_own, grown_read, grown_real
        else:
            groups.append([i])
            most_own, most_read, real = own[i], reads[i], own[i] * reads[i]
    return groups


def plan_buckets(tree: PrefixTree, max_padding: float = MAX_PADDING) -> TreeBuckets:
    """The buckets of `tree`'s segments (on the CPU; `.to(device)` moves them)."""
    own, reads = segment_shapes(tree)
    read_nodes = tree.key_index.cpu().split(reads)
    buckets, placed = [], []
    for group in group_segments(own, reads, max_padding):
        queries, keys = max(own[i] for i in group), max(reads[i] for i in group)
        query_index = torch.zeros(len(group), queries, dtype=torch.long)
        key_index = torch.zeros(len(group), keys, dtype=torch.long)
        for row, i in enumerate(group):
            query_index[row, : own[i]] = torch.arange(*tree.segments[i].nodes)
            key_index[row, : reads[i]] = read_nodes[i]
            placed.append(query_index[row, : own[i]])
        sizes = torch.tensor([own[i] for i in group])[:, None, None]
        prefix = torch.tensor([reads[i] - own[i] for i in group])[:, None, None]
        row_ids = torch.arange(queries)[None, :, None]
        column = torch.arange(keys)[None, None, :]
        real_row = row_ids < sizes
        mask = torch.where(real_row, column <= prefix + row_ids, column == 0)
        real_rows = (torch.arange(len(group))[:, None] * queries + torch.arange(queries))[
            real_row[:, :, 0]
        ]
        buckets.append(Bucket(query_index, key_index, mask.unsqueeze(1), real_rows))
    node_order = torch.empty(tree.num_nodes, dtype=torch.long)
    nodes_placed = torch.cat(placed)
    node_order[nodes_placed] = torch.arange(len(nodes_placed))
    return TreeBuckets(tuple(buckets), node_order)


def bucketed_tree_sdpa(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    plan: TreeBuckets,
    scaling: float | None,
    dropout: float = 0.0,
) -> Tensor:
    """query [1, H, N, D], key and value [1, H_kv, N, D] -> [1, H, N, D]: tree_sdpa's result,
    one sdpa call per bucket of `plan`."""
    gqa = query.shape[1] != key.shape[1]
    parts = []
    for bucket in plan.buckets:
        segments, queries = bucket.query_index.shape
        out = F.scaled_dot_product_attention(
            _gathered(query, bucket.query_index),
            _gathered(key, bucket.key_index),
            _gathered(value, bucket.key_index),
            attn_mask=bucket.mask,
            scale=scaling,
            dropout_p=dropout,
            enable_gqa=gqa,
        )  # [S, H, Q, D]
        rows = out.transpose(1, 2).reshape(segments * queries, *out.shape[1:2], out.shape[3])
        parts.append(rows.index_select(0, bucket.real_rows))
    by_node = torch.cat(parts).index_select(0, plan.node_order)  # [N, H, D]
    return by_node.transpose(0, 1).unsqueeze(0)


def _gathered(x: Tensor, index: Tensor) -> Tensor:
    """[1, h, N, D] read at index [S, L] -> [S, h, L, D]."""
    picked = x[0].index_select(1, index.flatten())  # [h, S * L, D]
    return picked.unflatten(1, index.shape).transpose(0, 1)
