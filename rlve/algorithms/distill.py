"""On-policy distillation: a teacher's per-token score of the student's own samples as advantage.

For each token y_t the student sampled, d_t = log p_teacher(y_t | c_t) - log p_sampler(y_t | x_<t)
is minus the one-sample (k1) estimate of the reverse KL(student || teacher) at that position
(Agarwal et al. 2024, GKD; Lu & Thinking Machines 2025, "On-policy distillation"). Taken as a
constant advantage with discount 0 and no group normalization, a policy-gradient step on it
lowers the reverse KL. c_t is the teacher's context: the student's own, or a privileged view of
it (the environment's `privileged_view`) holding the same sampled ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rlve.algorithms.train_sequences import TrainSequence

QUARTERS = 4
"""the answer's length is cut in this many parts for distill/reverse_kl_q*"""


@dataclass
class DistillStats:
    """Sums over a step's sampled tokens, turned into `distill/*` metrics by `metrics()`."""

    tokens: int = 0
    reverse_kl: float = 0.0
    """sum of log p_sampler - log p_teacher (unclipped)"""
    teacher_logprob: float = 0.0
    clipped: int = 0
    quarter_kl: list[float] = field(default_factory=lambda: [0.0] * QUARTERS)
    quarter_tokens: list[int] = field(default_factory=lambda: [0] * QUARTERS)

    def metrics(self) -> dict[str, float]:
        """Means per sampled token; the reverse KL also per quarter of each answer's length."""
        n = max(self.tokens, 1)
        out = {
            "distill/reverse_kl": self.reverse_kl / n,
            "distill/teacher_logprob": self.teacher_logprob / n,
            "distill/clip_frac": self.clipped / n,
            "distill/tokens": float(self.tokens),
        }
        quarters = zip(self.quarter_kl, self.quarter_tokens, strict=True)
        for number, (kl, tokens) in enumerate(quarters, start=1):
            out[f"distill/reverse_kl_q{number}"] = kl / max(tokens, 1)
        return out


def answer_quarters(loss_mask: Sequence[int]) -> list[int]:
    """For each sampled token (mask 1), in order, the quarter (0-3) of its answer it lies in; an
    answer is a run of consecutive sampled tokens (one model turn)."""
    quarters: list[int] = []
    start = None
    for t, m in enumerate([*loss_mask, 0]):
        if m and start is None:
            start = t
        elif not m and start is not None:
            length = t - start
            quarters += [QUARTERS * i // length for i in range(length)]
            start = None
    return quarters


def distilled_sequence(
    sequence: TrainSequence, teacher_logprobs: Sequence[float], *, coef: float,
    reward_weight: float, clip_low: float, clip_high: float, stats: DistillStats,
) -> TrainSequence:  # fmt: skip
    """`sequence` with each sampled token's advantage reward_weight * A_t + coef * clip(d_t),
    d_t = teacher_logprobs[i] - sampler log-prob, the i-th sampled token's; tokens off the mask
    (the prompt, the environment's replies) keep advantage 0. Adds to `stats`.

    Args:
        teacher_logprobs: the teacher's log-prob of each sampled token of `sequence`, in order.

    Raises:
        ValueError: the sequence has no sampler log-probs, or the count differs.
    """
    if sequence.sampler_logprobs is None:
        raise ValueError("distillation needs the sampler's log-probs of every sampled token")
    sampled = [t for t, m in enumerate(sequence.loss_mask) if m]
    if len(teacher_logprobs) != len(sampled):
        raise ValueError(
            f"{len(teacher_logprobs)} teacher log-probs for {len(sampled)} sampled tokens"
        )
    advantages = [reward_weight * a for a in sequence.advantages()]
    quarters = answer_quarters(sequence.loss_mask)
    for t, teacher, quarter in zip(sampled, teacher_logprobs, quarters, strict=True):
        d = teacher - sequence.sampler_logprobs[t]
        clipped = min(max(d, clip_low), clip_high)
        advantages[t] += coef * clipped
        stats.tokens += 1
        stats.reverse_kl -= d
        stats.teacher_logprob += teacher
        stats.clipped += clipped != d
        stats.quarter_kl[quarter] -= d
        stats.quarter_tokens[quarter] += 1
    return replace(sequence, token_advantages=advantages)
