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

from rlve.types import PrefixTree, Segment


def _gather(states: Tensor, segment: Segment) -> Tensor:
    """[B, H, A + L, D]: the ancestors' rows of `states` [B, H, N, D], then the segment's own."""
    runs = [*segment.ancestors, segment.nodes]
    return torch.cat([states[:, :, start:end] for start, end in runs], dim=2)


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
    [1, H, N, D], each segment attending as described in the module docstring."""
    gqa = query.shape[1] != key.shape[1]
    parts = []
    for segment in tree.segments:
        start, end = segment.nodes
        own_query = query[:, :, start:end]
        if not segment.ancestors:
            keys, values, mask = key[:, :, start:end], value[:, :, start:end], None
        else:
            keys, values = _gather(key, segment), _gather(value, segment)
            prefix = keys.shape[2] - (end - start)
            mask = after_prefix_mask(end - start, prefix, query.device)
        parts.append(
            F.scaled_dot_product_attention(
                own_query,
                keys,
                values,
                attn_mask=mask,
                is_causal=mask is None,
                scale=scaling,
                dropout_p=dropout,
                enable_gqa=gqa,
            )  # fmt: skip
        )
    return torch.cat(parts, dim=2)
