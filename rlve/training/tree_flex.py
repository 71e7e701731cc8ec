"""A prefix tree's attention as one FlexAttention call a layer (`trainer.tree_attention=flex`).

The tree's nodes are in depth-first order (the sequences sorted), so the nodes that read node k
(k itself, the rest of its segment and every segment after it that shares it) are the run
k .. `visible_until[k]` - 1: query q sees key k exactly when k <= q < visible_until[k]. That is
the `mask_mod`; `visible_until[k]` is the largest end of a segment whose keys include k. Torch
builds a block mask from it once per micro-batch and skips the blocks no query sees.

FlexAttention compiles per shape, so the nodes are padded to a multiple of PAD_NODES (a padded
key is seen by nobody, a padded query by nothing: its output is 0 and is cut off): a run compiles
once per padded length, not once per step. torch 2.13 has no FlexAttention backward on the CPU,
so `flex` is for GPUs; its forward runs on the CPU, which is how its parity is tested here.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from rlve.training.tree_buckets import segment_shapes
from rlve.types import FlexPlan, PrefixTree

PAD_NODES = 1024
"""the nodes of a tree are padded to a multiple of this"""


def visible_until(tree: PrefixTree) -> Tensor:
    """[N] long: for each node k, one past the last node that sees it. Example: nodes 5 6 7 | 8 9
    (segment 1 after nodes 0-1) -> [5, 5, 3, 5, 5]."""
    _, reads = segment_shapes(tree)
    ends = torch.tensor([segment.nodes[1] for segment in tree.segments])
    key_index = tree.key_index.cpu()
    until = torch.zeros(tree.num_nodes, dtype=torch.long)
    return until.scatter_reduce(0, key_index, ends.repeat_interleave(torch.tensor(reads)), "amax")


def plan_flex(tree: PrefixTree, device: torch.device | str) -> FlexPlan:
    """The block mask of `tree` over its nodes padded to a multiple of PAD_NODES, on `device`."""
    from torch.nn.attention.flex_attention import create_block_mask

    padded = -(-tree.num_nodes // PAD_NODES) * PAD_NODES
    until = torch.zeros(padded, dtype=torch.long)
    until[: tree.num_nodes] = visible_until(tree)
    until = until.to(device)

    def sees(batch, head, query, key):
        return (key <= query) & (query < until[key])

    mask = create_block_mask(sees, None, None, padded, padded, device=str(device))
    return FlexPlan(mask, padded, str(torch.device(device)))


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def flex_tree_sdpa(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    plan: FlexPlan,
    scaling: float | None,
    dropout: float = 0.0,
) -> Tensor:
    """query [1, H, N, D], key and value [1, H_kv, N, D] -> [1, H, N, D]: tree_sdpa's result in
    one FlexAttention call."""
    if dropout:
        raise ValueError(f"trainer.tree_attention=flex has no attention dropout (got {dropout})")
    nodes = query.shape[2]
    pad = (0, 0, 0, plan.padded - nodes)
    out = _compiled_flex_attention()(
        F.pad(query, pad),
        F.pad(key, pad),
        F.pad(value, pad),
        block_mask=plan.block_mask,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out[:, :, :nodes]
