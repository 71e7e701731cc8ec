"""Credit: the advantage each rollout of a roster earns, for the whole episode or per turn.

A roster is the rollouts compared with each other: a group's episodes, or one seat of a group's
self-play games. Whole-episode credit is `group_advantages` of their trained rewards; per-turn
credit (`turn_gamma`) gives each turn its discounted return compared with the other rollouts'
turns (rlve.algorithms.turn_credit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlve.algorithms.advantages import group_advantages, maxrl_advantages
from rlve.algorithms.turn_credit import token_advantages, turn_advantages, turn_returns
from rlve.types import Trajectory


@dataclass(frozen=True)
class Credit:
    """A rollout's advantage: one for the episode, and with per-turn credit one per token."""

    advantage: float
    token_advantages: list[float] | None = None
    """one per token of the trajectory (0.0 off its turns); None: `advantage` on every token"""


def assign_credit(
    rollouts: Sequence[Trajectory], *, std_normalize: bool, turn_gamma: float | None = None,
    turn_positions: bool = False, advantage: str = "group",
) -> list[Credit]:  # fmt: skip
    """The credit of each of `rollouts`, in order. With `turn_gamma`, each turn of a trajectory
    gets its own advantage, discounted by `turn_gamma`; with `turn_positions` a turn is compared
    with the turns after the same conversation (its token ids before it). `advantage` "maxrl":
    the episode's is `maxrl_advantages` (0/1 rewards, whole episodes only)."""
    rewards = torch.tensor([[t.trained_reward for t in rollouts]], dtype=torch.float64)
    if advantage == "maxrl":
        if turn_gamma is not None:
            raise ValueError("trainer.advantage=maxrl gives whole episodes their advantage: it "
                             "does not combine with trainer.credit=turn")  # fmt: skip
        return [Credit(float(a)) for a in maxrl_advantages(rewards)[0].tolist()]
    if advantage != "group":
        raise ValueError(f"advantage must be 'group' or 'maxrl', got {advantage!r}")
    advantages = group_advantages(rewards, std_normalize=std_normalize)[0].tolist()
    if turn_gamma is None:
        return [Credit(float(a)) for a in advantages]
    per_token = _turn_token_advantages(rollouts, turn_gamma, std_normalize, turn_positions)
    return [Credit(float(a), tokens) for a, tokens in zip(advantages, per_token, strict=True)]


def _turn_token_advantages(
    rollouts: Sequence[Trajectory], gamma: float, std_normalize: bool, positions: bool
) -> list[list[float]]:
    """Each trajectory's per-token advantages from its turns' returns; the rubric's reward is the
    episode's, its turn rewards (and each turn's overlong shaping) say when it was earned."""
    returns = []
    for t in rollouts:
        turns = len(t.turn_spans)
        rewards, shaping = t.turn_rewards or [0.0] * turns, t.turn_shaping or [0.0] * turns
        if not len(rewards) == len(shaping) == turns:
            raise ValueError(
                f"a trajectory of {t.env_name} has {turns} sampled turns but {len(rewards)} "
                f"turn rewards and {len(shaping)} turn shapings"
            )
        earned = [r + s for r, s in zip(rewards, shaping, strict=True)]
        returns.append(turn_returns(earned, t.trained_reward, gamma))
    keys = None
    if positions:
        keys = [[tuple(t.token_ids[:start]) for start, _ in t.turn_spans] for t in rollouts]
    per_turn = turn_advantages(returns, std_normalize=std_normalize, positions=keys)
    return [
        token_advantages(len(t.token_ids), t.turn_spans, advantages)
        for t, advantages in zip(rollouts, per_turn, strict=True)
    ]
