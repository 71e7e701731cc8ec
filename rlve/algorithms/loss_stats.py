"""What one `policy_loss` call saw, as python numbers ready for logging: clip fractions, the
policy ratio, the trainer/sampler mismatch and what its correction did, per token and sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import masked_log_ratio
from rlve.algorithms.loss_registry import LossTerms
from rlve.algorithms.mismatch import MismatchWeights
from rlve.algorithms.sequence_losses import sequence_means


@dataclass(frozen=True)
class LossStats:
    """What one `policy_loss` call saw, as python numbers ready for logging."""

    clip_frac_low: float
    """share of masked tokens whose ratio is clipped from below (r < 1 - eps_low with A < 0)"""
    clip_frac_high: float
    """share of masked tokens clipped from above (r > 1 + eps_high with A > 0; cispo: r > is_cap)"""
    is_ratio_mean: float
    """mean of exp(old_logp - sampler_logp) over masked tokens; 1.0 without sampler log-probs"""
    is_ratio_max: float
    """max of exp(old_logp - sampler_logp) over masked tokens; 1.0 without sampler log-probs"""
    logprob_diff_mean: float
    """mean |old_logp - sampler_logp| over masked tokens (trainer/sampler mismatch); 0 without"""
    logprob_diff_max: float
    """max |old_logp - sampler_logp| over masked tokens; 0 without sampler log-probs"""
    tis_masked_frac: float
    """share of masked tokens given weight 0 by tis_mode="mask"; 0 in the other modes"""
    num_tokens: int
    """masked tokens in this call (the micro-batch), not the step-wide `num_tokens` argument"""
    ratio_mean: float = 1.0
    """mean of the policy ratio r = exp(logp - old_logp) over masked tokens (1.0 on-policy)"""
    ratio_min: float = 1.0
    """min of r over masked tokens"""
    ratio_max: float = 1.0
    """max of r over masked tokens"""
    tis_truncated_frac: float = 0.0
    """share of masked tokens whose correction weight tis_mode="truncate" capped at tis_cap"""
    num_sequences: int = 0
    """sequences with a masked token in this call"""
    tis_sequence_frac: float = 0.0
    """share of those sequences with a token the sampler correction masked or truncated"""
    sequence_ratio_min: float = 1.0
    """min over sequences of exp(mean log r), the geometric mean of a sequence's token ratios"""
    sequence_ratio_max: float = 1.0
    """max over sequences of that ratio: with the min, the sequence-level ratio's spread"""
    entropy_kept_frac: float = 1.0
    """share of masked tokens that kept their advantage under `trainer.entropy_quantile`"""

    @staticmethod
    def combine(stats: Sequence[LossStats]) -> LossStats:
        """Merge micro-batch stats into the step's: token-weighted means, max of maxes."""
        total = sum(s.num_tokens for s in stats)
        if total == 0:
            return empty_stats()

        def weighted(name: str) -> float:
            return sum(getattr(s, name) * s.num_tokens for s in stats) / total

        return LossStats(
            clip_frac_low=weighted("clip_frac_low"),
            clip_frac_high=weighted("clip_frac_high"),
            is_ratio_mean=weighted("is_ratio_mean"),
            is_ratio_max=max(s.is_ratio_max for s in stats if s.num_tokens > 0),
            logprob_diff_mean=weighted("logprob_diff_mean"),
            logprob_diff_max=max(s.logprob_diff_max for s in stats if s.num_tokens > 0),
            tis_masked_frac=weighted("tis_masked_frac"),
            num_tokens=total,
            ratio_mean=weighted("ratio_mean"),
            ratio_min=min(s.ratio_min for s in stats if s.num_tokens > 0),
            ratio_max=max(s.ratio_max for s in stats if s.num_tokens > 0),
            tis_truncated_frac=weighted("tis_truncated_frac"),
            num_sequences=sum(s.num_sequences for s in stats),
            tis_sequence_frac=sum(s.tis_sequence_frac * s.num_sequences for s in stats)
            / max(sum(s.num_sequences for s in stats), 1),
            sequence_ratio_min=min(s.sequence_ratio_min for s in stats if s.num_tokens > 0),
            sequence_ratio_max=max(s.sequence_ratio_max for s in stats if s.num_tokens > 0),
            entropy_kept_frac=weighted("entropy_kept_frac"),
        )


def empty_stats() -> LossStats:
    return LossStats(0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0)


@torch.no_grad()
def loss_stats(
    terms: LossTerms,
    mask: Tensor,
    logp: Tensor,
    old_logp: Tensor,
    sampler_logp: Tensor | None,
    corrected: MismatchWeights,
    sequence_ids: Tensor | None,
) -> LossStats:
    count = int(mask.sum().item())
    if count == 0:
        return empty_stats()

    def share(flags: Tensor) -> float:
        return float(flags.sum().item()) / count

    is_ratio_mean = is_ratio_max = 1.0
    diff_mean = diff_max = 0.0
    if sampler_logp is not None:
        diff = (old_logp - sampler_logp)[mask].double()  # stats in fp64 even for bf16 inputs
        is_ratio = torch.exp(diff)
        is_ratio_mean, is_ratio_max = float(is_ratio.mean()), float(is_ratio.max())
        diff_mean, diff_max = float(diff.abs().mean()), float(diff.abs().max())
    ratio = torch.exp((logp - old_logp)[mask].double())
    log_ratio = masked_log_ratio(logp, old_logp, mask).double()
    trained = sequence_means(mask.double(), mask, sequence_ids) > 0
    sequence_ratio = torch.exp(sequence_means(log_ratio, mask, sequence_ids))[trained]
    touched = sequence_means((corrected.masked | corrected.truncated).double(), mask,
                             sequence_ids)[trained] > 0  # fmt: skip
    return LossStats(
        clip_frac_low=share(terms.clipped_low),
        clip_frac_high=share(terms.clipped_high),
        is_ratio_mean=is_ratio_mean,
        is_ratio_max=is_ratio_max,
        logprob_diff_mean=diff_mean,
        logprob_diff_max=diff_max,
        tis_masked_frac=share(corrected.masked),
        num_tokens=count,
        ratio_mean=float(ratio.mean()),
        ratio_min=float(ratio.min()),
        ratio_max=float(ratio.max()),
        tis_truncated_frac=share(corrected.truncated),
        num_sequences=int(trained.sum()),
        tis_sequence_frac=float(touched.double().mean()),
        sequence_ratio_min=float(sequence_ratio.min()),
        sequence_ratio_max=float(sequence_ratio.max()),
    )
