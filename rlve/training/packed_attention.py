"""How a transformers decoder attends within packed rows (sequences end to end, position ids
restarting at 0 at each one) without ever crossing from one sequence into another.

Flash-attention kernels take the sequence boundaries from `position_ids` of a one-row batch
(transformers' varlen path: each sequence costs its own length squared), and so does
`SEQUENCE_SDPA` (rlve.training.sequence_attention), which the trainer gives sdpa models: a
micro-batch can then be one row, without padding. Plain sdpa and eager attention get a
block-diagonal causal 4D mask, which transformers hands to the kernel as it is
(`masking_utils._preprocess_mask_arguments`: a 4D mask counts as prepared): bool for sdpa, and
0 / dtype-min added to the scores for eager, as transformers' own `eager_mask` does.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlve.training.sequence_attention import SEQUENCE_SDPA, is_packed, prepared_mask

DENSE_MASK_ATTENTION = ("sdpa", "eager")
"""attention implementations that take a block-diagonal 4D mask"""


def _implementation(config: object) -> str:
    return str(getattr(config, "_attn_implementation", None) or "")


def attends_varlen(config: object) -> bool:
    """Whether the model's attention (`config._attn_implementation`) is a flash-attention kernel,
    which reads packed sequence boundaries from `position_ids` ("flash_attention_2", "..._3",
    kernels-community flash builds)."""
    return "flash" in _implementation(config)


def separates_sequences(config: object) -> bool:
    """Whether the model's attention finds packed sequences itself, each costing its own length
    squared (flash attention, SEQUENCE_SDPA): a micro-batch is then best one long row."""
    return attends_varlen(config) or _implementation(config) == SEQUENCE_SDPA


def check_packable(config: object) -> None:
    """Raise ValueError unless a model with this transformers config can train on packed rows:
    attention the mask or the position ids confine to each sequence, and only attention layers
    (a convolution or recurrent layer, as in LFM2, would carry state across the boundary)."""
    implementation = getattr(config, "_attn_implementation", None)
    if not separates_sequences(config) and implementation not in DENSE_MASK_ATTENTION:
        raise ValueError(
            f"trainer.packing='packed' needs sdpa, eager or flash attention; the model uses "
            f"{implementation!r}: set trainer.packing=padded"
        )
    layer_types = sorted(set(getattr(config, "layer_types", None) or []) - {"full_attention"})
    if layer_types:
        model_type = getattr(config, "model_type", "?")
        raise ValueError(
            f"trainer.packing='packed' needs full-attention layers only; {model_type} also has "
            f"{layer_types} layers, which would see across packed sequences: set "
            "trainer.packing=padded"
        )


def shares_prefixes(config: object) -> bool:
    """Whether the model's attention can run over a prefix tree (rlve.types.PrefixTree): only
    `SEQUENCE_SDPA`, rlve's own, reads one; flash kernels find sequences in position ids."""
    return _implementation(config) == SEQUENCE_SDPA


def check_tree_attention(config: object) -> None:
    """Raise ValueError unless `shares_prefixes(config)`: another attention would ignore the
    tree and let every node see every earlier one."""
    if not shares_prefixes(config):
        raise ValueError(
            f"a prefix tree needs the {SEQUENCE_SDPA!r} attention, the model uses "
            f"{_implementation(config)!r}: set trainer.share_prefixes=false"
        )


def block_causal_mask(position_ids: Tensor) -> Tensor:
    """[B, 1, T, T] bool, True where query t may attend key s: s <= t and no sequence starts in
    (s, t], i.e. both lie in the same sequence of the row (a sequence starts where its position
    id is 0). From position_ids [B, T] long."""
    segment = (position_ids == 0).cumsum(-1)  # [B, T], +1 at each sequence start
    same = segment[:, :, None] == segment[:, None, :]
    length = position_ids.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=position_ids.device).tril()
    return (same & causal)[:, None]


def packed_decoder_inputs(config: object, position_ids: Tensor, dtype: torch.dtype) -> dict:
    """The `attention_mask` and `position_ids` to call the decoder with on packed rows.

    Args:
        config: the model's transformers config (its `_attn_implementation` decides).
        position_ids: [B, T] long, restarting at 0 at each sequence; B must be 1 for flash.
        dtype: the dtype of the model's hidden states, for eager's additive mask.
    """
    if attends_varlen(config):
        if position_ids.shape[0] != 1:  # transformers unpacks only a one-row batch
            raise ValueError(f"flash attention packs one row, got {position_ids.shape[0]}")
        return {"attention_mask": None, "position_ids": position_ids}
    check_packable(config)
    if not is_packed(position_ids):
        # one sequence per row (its padding continues it): the causal mask alone keeps them
        # apart, and without a mask sdpa takes its faster is_causal kernels
        return {"attention_mask": None, "position_ids": position_ids}
    if _implementation(config) == SEQUENCE_SDPA:
        return {"attention_mask": prepared_mask(position_ids), "position_ids": position_ids}
    mask = block_causal_mask(position_ids)
    if _implementation(config) == "eager":
        blocked = torch.full(mask.shape, torch.finfo(dtype).min, dtype=dtype, device=mask.device)
        mask = torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), blocked)
    return {"attention_mask": mask, "position_ids": position_ids}
