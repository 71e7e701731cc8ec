"""The correction for the sampler's and the trainer's disagreement on log-probs.

vLLM samples with its own kernels (often in bf16), so the trainer's log-prob of a sampled token
under the same weights differs a little, and now and then a lot; a run can collapse from it.
The ratio w = exp(old_logp - sampler_logp) measures it, taken per token, per sequence (the
product of its tokens' ratios: the sequence's likelihood ratio), or as the sequence's geometric
mean (the product's |y|-th root, comparable across lengths), and acts on the loss as a weight:

- "truncate": min(w, C) (Yao et al. 2025, truncated importance sampling; one-sided);
- "mask": 1 inside [1/C, C], 0 outside (two-sided, as IcePop and TRL's sequence masking).

At sequence and geometric level every token of a sequence gets the sequence's weight. Tokens
given weight 0 still count in the losses' denominators: dropped from the gradient, not from the
batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import masked_log_ratio
from rlve.algorithms.sequence_losses import sequence_of_positions

TIS_LEVELS = ("token", "sequence", "geometric")


@dataclass(frozen=True)
class MismatchWeights:
    """The weight of every token ([B, T]) and where the correction acted (bool [B, T])."""

    weight: Tensor
    masked: Tensor
    """tokens given weight 0 by "mask\""""
    truncated: Tensor
    """tokens whose weight "truncate" capped at C"""


def level_log_ratio(log_ratio: Tensor, mask: Tensor, level: str,
                    sequence_ids: Tensor | None = None) -> Tensor:  # fmt: skip
    """log w at `level`, on every position ([B, T]): the token's own, or its sequence's sum
    ("sequence") or mean ("geometric") over the sequence's masked tokens."""
    if level == "token":
        return log_ratio
    if level not in TIS_LEVELS:
        raise ValueError(f"tis_level must be one of {list(TIS_LEVELS)}, got {level!r}")
    ids, size = sequence_of_positions(mask, sequence_ids)
    sums = log_ratio.new_zeros(size).index_add(0, ids[mask], log_ratio[mask])
    if level == "geometric":
        sums = sums / torch.bincount(ids[mask], minlength=size).clamp(min=1)
    return sums[ids]


def mismatch_weights(old_logp: Tensor, sampler_logp: Tensor, mask: Tensor, *, cap: float,
                     mode: str, level: str = "token",
                     sequence_ids: Tensor | None = None) -> MismatchWeights:  # fmt: skip
    """The correction's weights (module docstring) on the masked tokens, 1 elsewhere. A
    sequence's product may overflow to inf or underflow to 0: both compare and cap as they
    should, and the weights carry no gradient."""
    log_ratio = masked_log_ratio(old_logp, sampler_logp, mask)
    w = torch.exp(level_log_ratio(log_ratio, mask, level, sequence_ids))
    no = torch.zeros_like(mask)
    if mode == "truncate":
        truncated = mask & (w > cap)
        return MismatchWeights(torch.where(truncated, cap, w).where(mask, 1.0), no, truncated)
    masked = mask & ((w < 1.0 / cap) | (w > cap))
    return MismatchWeights((~masked).to(old_logp.dtype), masked, no)
