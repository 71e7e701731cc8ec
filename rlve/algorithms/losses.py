"""Policy-gradient losses of the RL trainer: GRPO, DAPO, CISPO and Dr. GRPO as pure tensor
functions.

`policy_loss(kind, ...)` looks the loss up by name (`rlve.algorithms.loss_registry`: the four
here register themselves, as do the sequence-ratio ones and a user's own), weights tokens by the
optional sampler-mismatch correction (`rlve.algorithms.mismatch`), and returns the scalar loss
with its `LossStats` (`rlve.algorithms.loss_stats`). Nothing here knows about models or
devices; it all runs on CPU in tests.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import (
    TisMode,
    check_hyperparameters,
    check_shapes,
    check_token_count,
    masked_log_ratio,
)
from rlve.algorithms.loss_registry import LossTerms, find_loss, register_loss
from rlve.algorithms.loss_stats import LossStats, loss_stats
from rlve.algorithms.mismatch import MismatchWeights, mismatch_weights

# ---------------------------------------------------------------------------------------------
# Aggregation: how per-token losses become one number
# ---------------------------------------------------------------------------------------------


def token_mean(values: Tensor, mask: Tensor, num_tokens: int | None = None) -> Tensor:
    """Token-level aggregation (DAPO, Yu et al. 2025, section 3.3): sum over masked tokens / N.

    `values`, `mask` (bool): [B, T]. N = `num_tokens`, the masked-token count of the whole
    optimizer step, so summing the losses of micro-batches gives the loss of the big batch;
    N = mask.sum() when None. Every token weighs the same, however long its sequence.
    """
    denominator = mask.sum() if num_tokens is None else num_tokens
    return torch.where(mask, values, torch.zeros_like(values)).sum() / denominator


def sequence_mean(values: Tensor, mask: Tensor, sequence_ids: Tensor | None = None) -> Tensor:
    """Sample-level aggregation (GRPO, Shao et al. 2024, eq. 3): mean of per-sequence means.

    `values`, `mask` (bool): [B, T]. Each sequence's masked tokens are averaged, then the
    sequences. A sequence without masked tokens adds 0 and is left out of the count (it has no
    sampled token to learn from, and counting it would shrink everyone else's gradient).
    A sequence is a row, or with `sequence_ids` ([B, T] long in [0, S), packed rows that hold
    several) the positions that share an id.
    """
    if sequence_ids is None:
        tokens_per_sequence = mask.sum(dim=1)
        summed = torch.where(mask, values, torch.zeros_like(values)).sum(dim=1)
    else:
        ids = sequence_ids[mask]
        size = int(sequence_ids.max()) + 1 if sequence_ids.numel() else 0
        tokens_per_sequence = torch.bincount(ids, minlength=size)
        summed = values.new_zeros(size).index_add(0, ids, values[mask])
    per_sequence = summed / tokens_per_sequence.clamp(min=1)
    return per_sequence.sum() / (tokens_per_sequence > 0).sum().clamp(min=1)


# ---------------------------------------------------------------------------------------------
# Per-token surrogates
# ---------------------------------------------------------------------------------------------


def _clipped_surrogate(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO clip per token, [B, T]: -min(r*A, clip(r, 1-eps_low, 1+eps_high)*A), r = exp(logp-old).

    The clip is active (the min picks the clipped term, whose gradient is 0) when r < 1-eps_low
    with A < 0, or r > 1+eps_high with A > 0; those are the returned bool masks.
    """
    ratio = torch.exp(masked_log_ratio(logp, old_logp, mask))
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    clipped_low = mask & (advantages < 0) & (ratio < 1.0 - eps_low)
    clipped_high = mask & (advantages > 0) & (ratio > 1.0 + eps_high)
    return per_token, clipped_low, clipped_high


@register_loss(
    "grpo",
    aggregation="sequence",
    uses=("eps_low", "eps_high", "sequence_ids"),
    defaults={"eps_low": 0.2, "eps_high": 0.2, "std_normalize": True},
)
def grpo_loss(
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
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3, without its KL term): the clipped surrogate,
    averaged per sequence, then over sequences (`sequence_mean`).

    Shapes: logp, old_logp, token_weight: [B, T]; advantages: [B, T]; mask: bool [B, T]. The
    mean is over this call's sequences, so a trainer that accumulates GRPO gradients scales each
    micro-batch by its share of the step's sequences. `sequence_ids` tells the sequences of
    packed rows apart (`sequence_mean`).
    """
    per_token, low, high = _clipped_surrogate(logp, old_logp, advantages, mask, eps_low, eps_high)
    return LossTerms(sequence_mean(per_token * token_weight, mask, sequence_ids), low, high)


@register_loss(
    "dapo",
    aggregation="token",
    uses=("eps_low", "eps_high", "num_tokens"),
    defaults={"eps_low": 0.2, "eps_high": 0.28, "std_normalize": True, "dynamic_sampling": True},
)
def dapo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    token_weight: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    num_tokens: int | None,
) -> LossTerms:
    """DAPO (Yu et al. 2025, sections 3.1 and 3.3): the clipped surrogate with decoupled
    eps_low / eps_high ("clip-higher"), summed over all masked tokens / `num_tokens`.

    Shapes: logp, old_logp, token_weight: [B, T]; advantages: [B, T]; mask: bool [B, T].
    """
    per_token, low, high = _clipped_surrogate(logp, old_logp, advantages, mask, eps_low, eps_high)
    return LossTerms(token_mean(per_token * token_weight, mask, num_tokens), low, high)


@register_loss(
    "cispo",
    aggregation="token",
    uses=("is_cap", "num_tokens"),
    defaults={"is_cap": 5.0, "std_normalize": False},
)
def cispo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    token_weight: Tensor,
    *,
    is_cap: float,
    num_tokens: int | None,
) -> LossTerms:
    """CISPO (MiniMax-M1, 2025, section 3.1): -sg(min(r, is_cap)) * A * logp per token, summed
    over all masked tokens / `num_tokens`.

    Clipping the detached importance weight instead of the update keeps a gradient on every
    token (PPO's clip zeroes it), so rare high-ratio tokens still learn. The gradient wrt logp is
    -min(r, is_cap) * A / num_tokens. The lower bound is off, as in the paper's recipe (no
    eps_low / eps_high). Shapes as `dapo_loss`.
    """
    ratio = torch.exp(masked_log_ratio(logp, old_logp, mask))
    coefficient = ratio.clamp(max=is_cap).detach()
    per_token = -coefficient * advantages * logp
    clipped_high = mask & (ratio > is_cap)
    loss = token_mean(per_token * token_weight, mask, num_tokens)
    return LossTerms(loss, torch.zeros_like(mask), clipped_high)


@register_loss(
    "dr_grpo",
    aggregation="sequence",
    uses=("eps_low", "eps_high", "length_norm", "sequence_ids"),
    defaults={"eps_low": 0.2, "eps_high": 0.2, "std_normalize": False},
)
def dr_grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    token_weight: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    length_norm: int,
    sequence_ids: Tensor | None = None,
) -> LossTerms:
    """Dr. GRPO (Liu et al. 2025, Understanding R1-Zero-Like Training, section 3.2): GRPO's
    clipped surrogate with each sequence's token losses summed and divided by a constant,
    `length_norm`, instead of the sequence's own length, then averaged over sequences:

        L = -1/G * sum_i 1/length_norm * sum_t min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)

    so a token weighs the same in a short answer and a long one (GRPO's 1/|y_i| favours long
    wrong answers and short right ones). Its `std_normalize` is off, as in the paper.
    """
    per_token, low, high = _clipped_surrogate(logp, old_logp, advantages, mask, eps_low, eps_high)
    summed = torch.where(mask, per_token * token_weight, torch.zeros_like(per_token)).sum()
    if sequence_ids is None:
        sequences = (mask.sum(dim=1) > 0).sum()
    else:
        sequences = torch.unique(sequence_ids[mask]).numel()
    return LossTerms(summed / (length_norm * max(int(sequences), 1)), low, high)


# ---------------------------------------------------------------------------------------------
# Entry point: validation, truncated importance sampling, stats
# ---------------------------------------------------------------------------------------------


def policy_loss(
    kind: str,
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    is_cap: float = 5.0,
    sampler_logp: Tensor | None = None,
    tis_cap: float | None = None,
    tis_mode: TisMode = "truncate",
    tis_level: str = "token",
    num_tokens: int | None = None,
    sequence_ids: Tensor | None = None,
    length_norm: int = 1024,
) -> tuple[Tensor, LossStats]:
    """The policy-gradient loss `kind` ("grpo", "dapo", "cispo", another registered name or an
    import path: `rlve.algorithms.loss_registry.find_loss`) and what it saw.

    Args:
        logp: [B, T] trainer log-probs of the sampled tokens under the current weights (grad).
        old_logp: [B, T] the same under the weights that sampled (treated as constant).
        advantages: [B] per sequence or [B, T] per token.
        mask: [B, T] 1 (or True) on sampled tokens, 0 on prompt, environment and padding tokens.
        eps_low, eps_high: clip range [1 - eps_low, 1 + eps_high] of grpo/dapo.
        is_cap: cap on CISPO's importance weight (absolute, e.g. 5.0).
        sampler_logp: [B, T] the sampler's (vLLM's) log-probs, for the mismatch correction/stats.
        tis_cap: C of truncated importance sampling (Yao et al. 2025) against `sampler_logp`;
            None turns the correction off. Needs `sampler_logp`.
        tis_mode: "truncate" multiplies each token's loss by sg(min(w, C)),
            w = exp(old_logp - sampler_logp); "mask" gives weight 0 to tokens with w outside
            [1/C, C] and 1 to the rest. Masked tokens still count in the denominators (of the
            sequence mean or `num_tokens`): they are dropped from the gradient, not from the batch.
        tis_level: w per "token", or per sequence: the product of its tokens' ratios
            ("sequence") or their geometric mean ("geometric"), on each of its tokens
            (`rlve.algorithms.mismatch`).
        num_tokens: masked-token count of the whole optimizer step, the denominator of dapo/cispo
            so that gradient accumulation equals one big batch; None = mask.sum() of this call.
        sequence_ids: [B, T] long, the sequence of each token when rows are packed (several
            sequences per row, `rlve.algorithms.packed_rows.sequence_ids`); None: one per row.
        length_norm: dr_grpo's constant in place of a sequence's length; >= 1.

    Returns:
        (loss, stats): the scalar loss to minimise and `LossStats`.

    Raises:
        ValueError: unknown kind, out-of-range hyper-parameter, shape mismatch, or an all-masked
            batch with `num_tokens` None (the trainer skips such batches).
    """
    loss_fn = find_loss(kind)
    check_hyperparameters(eps_low, eps_high, is_cap, tis_cap, tis_mode, num_tokens)
    if length_norm < 1:
        raise ValueError(f"length_norm must be >= 1, got {length_norm}")
    if tis_cap is not None and sampler_logp is None:
        raise ValueError(f"tis_cap={tis_cap} needs sampler_logp (the sampler's log-probs)")
    mask, advantages = check_shapes(logp, old_logp, advantages, mask, sampler_logp)
    if sequence_ids is not None and sequence_ids.shape != logp.shape:
        raise ValueError(f"sequence_ids has shape {tuple(sequence_ids.shape)}, logp has "
                         f"{tuple(logp.shape)}")  # fmt: skip
    check_token_count(mask, num_tokens)
    old_logp = old_logp.detach()

    token_weight = torch.ones_like(logp)
    corrected = MismatchWeights(token_weight, torch.zeros_like(mask), torch.zeros_like(mask))
    if sampler_logp is not None:
        sampler_logp = sampler_logp.detach()
        if tis_cap is not None:
            corrected = mismatch_weights(old_logp, sampler_logp, mask, cap=tis_cap, mode=tis_mode,
                                         level=tis_level, sequence_ids=sequence_ids)  # fmt: skip
            token_weight = corrected.weight

    terms = loss_fn(
        logp,
        old_logp,
        advantages,
        mask,
        token_weight,
        eps_low=eps_low,
        eps_high=eps_high,
        is_cap=is_cap,
        num_tokens=num_tokens,
        sequence_ids=sequence_ids,
        length_norm=length_norm,
    )
    stats = loss_stats(terms, mask, logp.detach(), old_logp, sampler_logp, corrected,
                        sequence_ids)  # fmt: skip
    return terms.loss, stats
