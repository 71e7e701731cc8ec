"""Sequence-level policy losses: one importance ratio per sequence instead of one per token.

A token's ratio r_t = pi(y_t) / pi_old(y_t) is noisy, and a long answer multiplies that noise;
these losses take the sequence's geometric mean of its token ratios,

    s_i = exp( 1/|y_i| * sum_t log r_{i,t} ),

and clip at the sequence (GSPO) or clip each token in log space inside the mean (GMPO). A
sequence is a row, or with `sequence_ids` the positions of a packed row that share an id; its
advantage is the mean of its trained tokens' advantages (the episode's advantage when every
token has it), and the sampler correction's `token_weight` weighs it by its tokens' mean weight.
Both register with `aggregation="sequence"`: a mean over this call's sequences.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import masked_log_ratio
from rlve.algorithms.loss_registry import LossTerms, register_loss


def sequence_of_positions(mask: Tensor, sequence_ids: Tensor | None) -> tuple[Tensor, int]:
    """The sequence id of every position ([B, T] long) and how many ids there are."""
    if sequence_ids is None:
        rows = torch.arange(mask.shape[0], device=mask.device)
        return rows[:, None].expand(mask.shape), mask.shape[0]
    return sequence_ids, int(sequence_ids.max()) + 1 if sequence_ids.numel() else 0


def sequence_means(values: Tensor, mask: Tensor, sequence_ids: Tensor | None) -> Tensor:
    """[S] the mean of `values` over each sequence's masked positions (0 for a sequence with
    none), differentiable."""
    ids, size = sequence_of_positions(mask, sequence_ids)
    counts = torch.bincount(ids[mask], minlength=size)
    sums = values.new_zeros(size).index_add(0, ids[mask], values[mask])
    return sums / counts.clamp(min=1)


def _trained_sequences(mask: Tensor, sequence_ids: Tensor | None) -> Tensor:
    """[S] bool: the sequences with at least one masked position."""
    ids, size = sequence_of_positions(mask, sequence_ids)
    return torch.bincount(ids[mask], minlength=size) > 0


def _on_tokens(per_sequence: Tensor, mask: Tensor, sequence_ids: Tensor | None) -> Tensor:
    """[B, T] bool: each masked position takes its sequence's flag."""
    ids, _ = sequence_of_positions(mask, sequence_ids)
    return mask & per_sequence[ids]


def _weighted_mean(per_sequence: Tensor, token_weight: Tensor, mask: Tensor,
                   sequence_ids: Tensor | None) -> Tensor:  # fmt: skip
    """The mean over the trained sequences of `per_sequence`, each weighed by the mean
    `token_weight` of its tokens (1 without a sampler correction)."""
    trained = _trained_sequences(mask, sequence_ids)
    weighted = per_sequence * sequence_means(token_weight, mask, sequence_ids).detach()
    return torch.where(trained, weighted, 0).sum() / trained.sum().clamp(min=1)


@register_loss(
    "gspo",
    aggregation="sequence",
    uses=("eps_low", "eps_high", "sequence_ids"),
    defaults={"eps_low": 3e-4, "eps_high": 4e-4, "std_normalize": True},
)
def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    token_weight: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    sequence_ids: Tensor | None = None,
) -> LossTerms:
    """GSPO (Zheng et al. 2025, Group Sequence Policy Optimization, eq. 5-7): PPO's clip on the
    sequence ratio s_i,

        L = -1/G * sum_i min(s_i * A_i, clip(s_i, 1 - eps_low, 1 + eps_high) * A_i),

    the gradient of s_i spreading over its tokens as s_i / |y_i| * grad log pi(y_t). Its clip
    range is the sequence's: the paper used eps 3e-4 / 4e-4, far below a token ratio's 0.2.
    Clip flags are the sequence's, on each of its tokens.
    """
    log_ratio = masked_log_ratio(logp, old_logp, mask)
    ratio = torch.exp(sequence_means(log_ratio, mask, sequence_ids))
    advantage = sequence_means(advantages, mask, sequence_ids)
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    per_sequence = -torch.minimum(ratio * advantage, clipped * advantage)
    low = _on_tokens((advantage < 0) & (ratio < 1.0 - eps_low), mask, sequence_ids)
    high = _on_tokens((advantage > 0) & (ratio > 1.0 + eps_high), mask, sequence_ids)
    return LossTerms(_weighted_mean(per_sequence, token_weight, mask, sequence_ids), low, high)


@register_loss(
    "gmpo",
    aggregation="sequence",
    uses=("eps_low", "eps_high", "sequence_ids"),
    defaults={"eps_low": 0.4, "eps_high": 0.4, "std_normalize": True},
)
def gmpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    token_weight: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    sequence_ids: Tensor | None = None,
) -> LossTerms:
    """GMPO (Zhao et al. 2025, Geometric-Mean Policy Optimization, eq. 4): the geometric mean of
    the tokens' clipped surrogates instead of their arithmetic mean,

        L = -1/G * sum_i A_i * exp( 1/|y_i| * sum_t c_{i,t} ),
        c = min(log r, clip(log r, -eps_low, eps_high)) for A >= 0, the max for A < 0,

    so one token with an extreme ratio moves the sequence's objective by its share only. Here
    `eps_low` and `eps_high` bound log r (the paper's range: 0.4 each, r in [e^-0.4, e^0.4]).
    A token whose clip is active gets no gradient, as in PPO.
    """
    log_ratio = masked_log_ratio(logp, old_logp, mask)
    bounded = log_ratio.clamp(-eps_low, eps_high)
    positive = advantages >= 0
    chosen = torch.where(positive, torch.minimum(log_ratio, bounded),
                         torch.maximum(log_ratio, bounded))  # fmt: skip
    geometric = torch.exp(sequence_means(chosen, mask, sequence_ids))
    per_sequence = -sequence_means(advantages, mask, sequence_ids) * geometric
    low = mask & ~positive & (log_ratio < -eps_low)
    high = mask & positive & (log_ratio > eps_high)
    return LossTerms(_weighted_mean(per_sequence, token_weight, mask, sequence_ids), low, high)
