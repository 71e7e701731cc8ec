"""KL penalty to a frozen reference policy, per token.

Off by default in the DAPO and CISPO recipes; the trainer adds beta * its token mean when on.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import masked_log_ratio


def kl_penalty(logp: Tensor, ref_logp: Tensor, mask: Tensor) -> Tensor:
    """k3 estimate of KL(pi_theta || pi_ref) per token (Schulman 2020, "Approximating KL
    Divergence"; GRPO uses it in Shao et al. 2024, eq. 4):

        k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1

    Unbiased for the KL when tokens are sampled from pi_theta, and never negative (e^x >= 1 + x),
    unlike the plain log-ratio. The caller adds beta * token_mean(k3, mask) to the loss.

    Args:
        logp: [B, T] current policy log-probs of the sampled tokens (gradient flows here).
        ref_logp: [B, T] reference policy log-probs of the same tokens (treated as constant).
        mask: [B, T] 1 (or True) on sampled tokens.

    Returns:
        [B, T] k3 per token, 0 where the mask is 0 (padding never overflows the exp()).
    """
    if logp.shape != ref_logp.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp {tuple(logp.shape)}, ref_logp {tuple(ref_logp.shape)} and mask "
            f"{tuple(mask.shape)} must have the same [B, T] shape"
        )
    mask = mask.bool()
    log_ratio = masked_log_ratio(ref_logp.detach(), logp, mask)
    # Outside the mask log_ratio is 0, so k3 is exactly 0 there.
    return torch.exp(log_ratio) - log_ratio - 1.0
