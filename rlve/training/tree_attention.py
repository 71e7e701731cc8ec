"""Attention over a prefix tree (rlve.types.PrefixTree): each segment's nodes attend to the
nodes of the prefix they share with earlier sequences, and causally to each other.

One sdpa call per segment: its queries, and as keys its ancestors' keys followed by its own. The
mask is causal aligned to the bottom right (query i sees every ancestor and its own nodes up to
i), which is what query i sees in the sequence written out alone; the ancestors' keys and values
are shared, so their gradients sum over every sequence that reads them, as the separate
sequences' gradients sum over their copies of the prefix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlve.training.tree_buckets import bucketed_tree_sdpa, segment_shapes
from rlve.training.tree_flex import flex_tree_sdpa
from rlve.types import FlexPlan, PrefixTree, TreeBuckets


def after_prefix_mask(queries: int, prefix: int, device: torch.device) -> Tensor:
    """[queries, prefix + queries] bool: query i sees the whole prefix and its own keys up to i.
    Example: 2 queries after a prefix of 1 -> [[True, True, False], [True, True, True]]."""
    keys = prefix + queries
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(diagonal=prefix)


def tree_sdpa(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    tree: PrefixTree,
    scaling: float | None,
    dropout: float = 0.0,
) -> Tensor:
    """query [1, H, N, D], key and value [1, H_kv, N, D] over the tree's N nodes ->
    [1, H, N, D], each segment attending as described in the module docstring; a tree with a
    `plan` is attended as it says (rlve.training.tree_plan)."""
    if isinstance(tree.plan, TreeBuckets):
        return bucketed_tree_sdpa(query, key, value, tree.plan, scaling, dropout)
    if isinstance(tree.plan, FlexPlan):
        return flex_tree_sdpa(query, key, value, tree.plan, scaling, dropout)
    gqa = query.shape[1] != key.shape[1]
    own_sizes, read_sizes = segment_shapes(tree)
    # One split and one index_select for all segments: their backward passes write each
    # gradient once, where a slice per segment would add up a zero-filled [1, H, N, D] tensor
    # per segment, quadratic in the number of sequences.
    queries = query.split(own_sizes, dim=2)
    keys = key.index_select(2, tree.key_index).split(read_sizes, dim=2)
    values = value.index_select(2, tree.key_index).split(read_sizes, dim=2)
    parts = []
    for own_query, keys_read, values_read, own in zip(
        queries, keys, values, own_sizes, strict=True
    ):
        prefix = keys_read.shape[2] - own
        mask = after_prefix_mask(own, prefix, query.device) if prefix else None
        parts.append(
            F.scaled_dot_product_attention(
                own_query,
                keys_read,
                values_read,
                attn_mask=mask,
                is_causal=mask is None,
                scale=scaling,
                dropout_p=dropout,
                enable_gqa=gqa,
            )  # fmt: skip
        )
    return torch.cat(parts, dim=2)
