"""Training only where the policy hesitates: the highest-entropy share of the sampled tokens.

Wang et al. 2025 ("Beyond the 80/20 Rule") find that a minority of tokens, where the policy's
next-token entropy is high ("forking" tokens), carry the learning signal of RL with verifiable
rewards, and that training on the top 20% alone matches or beats training on all of them (TRL's
`top_entropy_quantile`). The other tokens keep their place in the loss's denominators; their
advantage is set to 0, so they add no gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor


def high_entropy_mask(entropy: Tensor, mask: Tensor, share: float) -> Tensor:
    """bool [B, T]: the masked tokens whose entropy is at least the (1 - share) quantile of the
    masked tokens' entropies (ties kept, so at least `share` of them); `share` in (0, 1]."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    if share == 1.0 or not mask.any():
        return mask
    threshold = torch.quantile(entropy[mask].float(), 1.0 - share)
    return mask & (entropy >= threshold)
