"""The policy loss of one micro-batch, as its share of the whole optimizer step's loss.

Token-level losses divide by the step's trained-token count, so the micro-batches' losses add up
to the loss of one big batch; GRPO's per-sequence mean is weighted by the micro-batch's share of
the step's sequences; the k3 KL penalty is a token mean over the same count.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from rlve.algorithms import LossStats, find_loss, kl_penalty, policy_loss, token_mean
from rlve.algorithms.entropy_selection import high_entropy_mask
from rlve.algorithms.packed_rows import sequence_ids
from rlve.config import TrainerConfig
from rlve.types import MicroBatch, TrainBatch


def micro_batch_loss(
    config: TrainerConfig, logp: Tensor, micro: MicroBatch, batch: TrainBatch,
    entropy: Tensor | None = None,
) -> tuple[Tensor, LossStats, float]:  # fmt: skip
    """(loss to backpropagate, the loss's statistics, the summed k3 KL of the trained tokens;
    0.0 without KL) of `micro` with the policy's log-probs `logp`. With `entropy_quantile` < 1,
    only the highest-entropy share of the micro-batch's trained tokens (`entropy`, [B, T])
    keeps its advantage."""
    mask = micro.loss_mask
    advantages = micro.advantages
    kept_frac = 1.0
    if config.entropy_quantile < 1.0:
        kept = high_entropy_mask(entropy, mask, config.entropy_quantile)
        advantages = torch.where(kept, advantages, torch.zeros_like(advantages))
        kept_frac = float(kept.sum()) / max(float(mask.sum()), 1.0)
    old = micro.old_logprobs if micro.old_logprobs is not None else logp.detach()
    packed = micro.position_ids is not None  # rows hold several sequences
    loss, stats = policy_loss(
        config.loss, logp, old, advantages, mask,
        eps_low=config.eps_low, eps_high=config.eps_high, is_cap=config.is_cap,
        sampler_logp=micro.sampler_logprobs, tis_cap=config.tis_cap,
        tis_mode=config.tis_mode, tis_level=config.tis_level, num_tokens=batch.num_loss_tokens,
        sequence_ids=sequence_ids(micro.position_ids) if packed else None,
        length_norm=config.length_norm,
    )  # fmt: skip
    stats = replace(stats, entropy_kept_frac=kept_frac)
    if find_loss(config.loss).aggregation == "sequence":  # weight by this share of sequences
        loss = loss * (len(micro.sequence_index) / batch.num_sequences)
    kl_sum = 0.0
    if config.kl_beta > 0:
        k3 = kl_penalty(logp, micro.ref_logprobs, mask)
        loss = loss + config.kl_beta * token_mean(k3, mask, batch.num_loss_tokens)
        kl_sum = float(k3.detach()[mask].sum())
    return loss, stats, kl_sum
