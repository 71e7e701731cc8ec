"""DPPO ("Rethinking the Trust Region in LLM Reinforcement Learning", arXiv 2602.04879): the
ratio clip replaced by a mask from a direct estimate of how far the policy moved
on each sampled token.

A ratio clip judges a token by pi/mu, which is large for a rare token that moved a little (mu
0.01 -> 0.05: ratio 5, clipped) and close to 1 for a common one that moved a lot (0.6 -> 0.76:
ratio 1.27, kept). DPPO judges the move itself, on the sampled token's probability under the
policy (pi) and under the policy that sampled it (mu, `old_logp`):
- binary TV (`dppo_tv`): d = pi - mu;
- binary KL (`dppo_kl`): D = mu log(mu/pi) + (1 - mu) log((1 - mu)/(1 - pi)), the KL between the
  two Bernoulli distributions "this token or another", taken where the move is upward (pi > mu)
  for a positive advantage and downward for a negative one.
A token with A > 0 is masked when it rose past the trust region (d > eps_high; D > eps_high with
pi > mu), one with A < 0 when it fell past it (d < -eps_low; D > eps_low with pi < mu): moves
back towards mu are never masked. The surrogate is the authors' (their verl fork, Stable-RL):
-A * sg(min(r, is_cap)) * mask * log pi per token, r = pi/mu, summed over the trained tokens and
divided by the step's count (masked tokens stay in it). Thresholds from the paper: 0.15 (TV),
0.05 (KL); the ratio's cap 10 as in Stable-RL.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlve.algorithms.loss_inputs import masked_log_ratio
from rlve.algorithms.loss_registry import LossTerms, register_loss
from rlve.algorithms.losses import token_mean

BINARY_KL_EPS = 1e-8
"""keeps log(1 - p) finite where a token's probability rounds to 1 (the authors' value)"""


def binary_kl(mu: Tensor, pi: Tensor) -> Tensor:
    """KL(Bernoulli(mu) || Bernoulli(pi)) per token, [B, T]: the divergence between "the sampled
    token or another" under the sampler and under the policy."""
    return mu * (torch.log(mu) - torch.log(pi)) + (1 - mu) * torch.log(
        (1 - mu + BINARY_KL_EPS) / (1 - pi + BINARY_KL_EPS)
    )


def dppo_outside(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, *, divergence: str,
    eps_low: float, eps_high: float,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The trained tokens DPPO masks, bool [B, T] each: (fell too far with A < 0, rose too far
    with A > 0), by `divergence` "tv" or "kl" (see the module's docstring)."""
    with torch.no_grad():
        pi = torch.exp(torch.where(mask, logp, torch.zeros_like(logp)))
        mu = torch.exp(torch.where(mask, old_logp, torch.zeros_like(old_logp)))
        if divergence == "tv":
            rose, fell = pi - mu > eps_high, mu - pi > eps_low
        elif divergence == "kl":
            kl = binary_kl(mu, pi)
            rose, fell = (kl > eps_high) & (pi > mu), (kl > eps_low) & (pi < mu)
        else:
            raise ValueError(f"divergence must be 'tv' or 'kl', got {divergence!r}")
    return mask & (advantages < 0) & fell, mask & (advantages > 0) & rose


def _dppo(logp, old_logp, advantages, mask, token_weight, divergence, eps_low, eps_high, is_cap,
          num_tokens) -> LossTerms:  # fmt: skip
    low, high = dppo_outside(logp, old_logp, advantages, mask, divergence=divergence,
                             eps_low=eps_low, eps_high=eps_high)  # fmt: skip
    ratio = torch.exp(masked_log_ratio(logp, old_logp, mask))
    coefficient = ratio.clamp(max=is_cap).detach()
    kept = (~(low | high)).to(logp.dtype)
    per_token = -advantages * coefficient * kept * logp
    return LossTerms(token_mean(per_token * token_weight, mask, num_tokens), low, high)


DPPO_USES = ("eps_low", "eps_high", "is_cap", "num_tokens")


@register_loss("dppo_tv", aggregation="token", uses=DPPO_USES,
               defaults={"eps_low": 0.15, "eps_high": 0.15, "is_cap": 10.0})  # fmt: skip
def dppo_tv_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                 token_weight: Tensor, *, eps_low: float, eps_high: float, is_cap: float,
                 num_tokens: int | None) -> LossTerms:  # fmt: skip
    """DPPO with the binary total-variation mask: |pi - mu| of the sampled token against
    eps_low (downward moves) and eps_high (upward). Shapes as `dapo_loss`."""
    return _dppo(logp, old_logp, advantages, mask, token_weight, "tv", eps_low, eps_high, is_cap,
                 num_tokens)  # fmt: skip


@register_loss("dppo_kl", aggregation="token", uses=DPPO_USES,
               defaults={"eps_low": 0.05, "eps_high": 0.05, "is_cap": 10.0})  # fmt: skip
def dppo_kl_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                 token_weight: Tensor, *, eps_low: float, eps_high: float, is_cap: float,
                 num_tokens: int | None) -> LossTerms:  # fmt: skip
    """DPPO with the binary KL mask: KL(Bernoulli(mu) || Bernoulli(pi)) against eps_low
    (downward moves) and eps_high (upward). Shapes as `dapo_loss`."""
    return _dppo(logp, old_logp, advantages, mask, token_weight, "kl", eps_low, eps_high, is_cap,
                 num_tokens)  # fmt: skip
