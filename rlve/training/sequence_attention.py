"""sdpa one sequence at a time inside a packed row: attention that costs each sequence its own
length squared, without a flash-attention kernel (on the CPU).

A block-diagonal mask over a packed row of T tokens makes sdpa compute all T x T scores, most of
them masked; so rows could hold no more than the longest sequence and short games still shared
rows with padding. Under this implementation (registered with transformers as
`SEQUENCE_SDPA`, the trainer's choice for sdpa models with `trainer.packing=packed`) a packed
row's sequences, found where `position_ids` restart at 0, each get their own causal sdpa call;
a row may then hold a whole micro-batch, as with flash attention, and nothing is padded. Calls
without packed rows (a padded micro-batch, generation) go to transformers' sdpa unchanged. On the
CPU the packed calls and the prefix tree's run in float32, also under bf16 autocast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from rlve.training.tree_attention import tree_sdpa
from rlve.types import PrefixTree

SEQUENCE_SDPA = "rlve_sequence_sdpa"
"""the attention implementation's name in transformers' registries"""


def is_packed(position_ids: Tensor) -> bool:
    """Whether some row holds more than one sequence (a position id restarts at 0 inside it)."""
    return bool((position_ids[:, 1:] == 0).any())


def prepared_mask(position_ids: Tensor) -> Tensor:
    """The `attention_mask` to call the decoder with on packed rows: a [B, 1, 1, 1] True tensor.
    transformers takes any 4D mask as prepared and builds none of its own (a T x T one, here
    wasted); `sequence_sdpa` separates the sequences from the position ids instead."""
    return torch.ones(position_ids.shape[0], 1, 1, 1, dtype=torch.bool, device=position_ids.device)


def sequence_bounds(position_ids: Tensor) -> list[list[tuple[int, int]]]:
    """Per row, the [start, end) of each sequence: a sequence starts at 0 and wherever its
    position id is 0. Example: [[0, 1, 2, 0, 1]] -> [[(0, 3), (3, 5)]]."""
    length = position_ids.shape[-1]
    bounds = []
    for row in position_ids:
        starts = [0] + [s for s in (row == 0).nonzero().flatten().tolist() if s > 0]
        bounds.append(list(zip(starts, [*starts[1:], length], strict=True)))
    return bounds


def sequence_sdpa(
    module: torch.nn.Module, query: Tensor, key: Tensor, value: Tensor,
    attention_mask: Tensor | None, dropout: float = 0.0, scaling: float | None = None,
    position_ids: Tensor | None = None, **kwargs,
) -> tuple[Tensor, None]:  # fmt: skip
    """transformers' attention-function contract: query [B, H, T, D], key and value
    [B, H_kv, T, D] -> ([B, T, H, D], None). Packed rows: causal sdpa per sequence; a
    `prefix_tree` keyword (the decoder passes it through): attention over its nodes."""
    tree = kwargs.get("prefix_tree")
    if tree is None and (position_ids is None or not is_packed(position_ids)):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.device.type != "cpu":
        output = _attend(query, key, value, position_ids, tree, scaling, dropout)
    else:  # the CPU's flash kernel runs faster in float32 than under bf16 autocast, and keeps
        # its scores in float32 (docs/benchmarks.md, "Attention on the CPU")
        with torch.autocast("cpu", enabled=False):
            output = _attend(query.float(), key.float(), value.float(), position_ids, tree,
                             scaling, dropout)  # fmt: skip
    return output.to(query.dtype).transpose(1, 2).contiguous(), None


def _attend(
    query: Tensor, key: Tensor, value: Tensor, position_ids: Tensor | None,
    tree: PrefixTree | None, scaling: float | None, dropout: float,
) -> Tensor:  # fmt: skip
    """[B, H, T, D]: attention over the tree's nodes, or causal within each packed sequence."""
    if tree is not None:
        return tree_sdpa(query, key, value, tree, scaling, dropout)
    gqa = query.shape[1] != key.shape[1]
    rows = []
    for b, bounds in enumerate(sequence_bounds(position_ids)):
        parts = [
            F.scaled_dot_product_attention(
                query[b : b + 1, :, s:e],
                key[b : b + 1, :, s:e],
                value[b : b + 1, :, s:e],
                dropout_p=dropout,
                is_causal=True,
                scale=scaling,
                enable_gqa=gqa,
            )  # fmt: skip
            for s, e in bounds
        ]
        rows.append(torch.cat(parts, dim=2))
    return torch.cat(rows, dim=0)


AttentionInterface.register(SEQUENCE_SDPA, sequence_sdpa)
AttentionMaskInterface.register(SEQUENCE_SDPA, sdpa_mask)  # unpacked calls: sdpa's own masks


def use_sequence_sdpa(model) -> None:
    """Switch a transformers model that attends with sdpa to `SEQUENCE_SDPA` (others keep
    theirs: flash attention separates packed sequences itself, eager keeps the dense mask)."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        model.set_attn_implementation(SEQUENCE_SDPA)
