"""Per-turn credit: each model turn of a multi-turn episode gets its own return and advantage.

An environment may say when its reward was earned: `turn_rewards[t]` is the part of the episode's
reward that turn t earned (an invalid move costs at that move). What the turns do not claim, the
episode's reward minus their sum, is earned at the last turn, so with `gamma` 1 the first turn's
return is the episode's reward and turn 0 gets the whole-episode advantage. Each turn's return is
the discounted sum of what it and the turns after it earned:

    r_t = turn_rewards[t] (+ R - sum(turn_rewards) at the last turn)
    G_t = r_t + gamma * G_{t+1}

and its advantage compares it with the same turn of the group's other rollouts, as
`group_advantages` compares episodes: A_{i,t} = G_{i,t} - mean_j G_{j,t} over the rollouts j that
reached turn t (divided by their std with `std_normalize`); a turn only one rollout reached has
nothing to be compared with and gets 0. Every token of turn t is trained with A_{i,t}.

Turn t of two games need not be the same decision: in a game the boards differ by then. With
`positions` (one hashable key per turn, e.g. the conversation before it) a turn is compared with
the group's turns from the same position instead, where the group has more than one; a turn
alone at its position is compared with all the group's turns of its index, as without them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import torch

from rlve.algorithms.advantages import group_advantages


def turn_returns(turn_rewards: Sequence[float], reward: float, gamma: float) -> list[float]:
    """G_t for every turn of one episode (see the module docstring); [] for no turns.

    Example: turn_rewards [-1, 0], reward 0, gamma 1 -> r = [-1, 1], G = [0, 1]."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if not all(math.isfinite(r) for r in [*turn_rewards, reward]):
        raise ValueError(f"rewards must be finite: turns {list(turn_rewards)}, episode {reward}")
    earned = [float(r) for r in turn_rewards]
    if not earned:
        return []
    earned[-1] += reward - sum(turn_rewards)
    returns, following = [0.0] * len(earned), 0.0
    for t in reversed(range(len(earned))):
        following = earned[t] + gamma * following
        returns[t] = following
    return returns


def turn_advantages(
    returns: Sequence[Sequence[float]],
    *,
    std_normalize: bool,
    eps: float = 1e-6,
    positions: Sequence[Sequence[Hashable]] | None = None,
) -> list[list[float]]:
    """A_{i,t} for the returns of one group's rollouts (rollout i: one return per turn), each
    turn compared with its position's turns when `positions` are given (module docstring)."""
    if positions is not None and [len(p) for p in positions] != [len(r) for r in returns]:
        raise ValueError(f"positions for {[len(p) for p in positions]} turns, returns for "
                         f"{[len(r) for r in returns]}")  # fmt: skip
    peers: dict[Hashable, list[tuple[int, int]]] = {}
    for i, turns in enumerate(returns):
        for t in range(len(turns)):
            peers.setdefault(("turn", t), []).append((i, t))
            if positions is not None:
                peers.setdefault(("position", positions[i][t]), []).append((i, t))

    def alone(i: int, t: int) -> bool:
        return positions is None or len(peers["position", positions[i][t]]) == 1

    advantages = [[0.0] * len(r) for r in returns]
    for (kind, _), members in peers.items():
        if kind == "position" and len(members) == 1:
            continue
        values = torch.tensor([[returns[i][t] for i, t in members]], dtype=torch.float64)
        compared = group_advantages(values, std_normalize=std_normalize, eps=eps)[0].tolist()
        for (i, t), advantage in zip(members, compared, strict=True):
            if kind == "position" or alone(i, t):  # by index only where no position peer is
                advantages[i][t] = advantage
    return advantages


def token_advantages(
    length: int, turn_spans: Sequence[tuple[int, int]], advantages: Sequence[float]
) -> list[float]:
    """One advantage per token of a sequence of `length`: turn t's on the tokens of its span
    [start, end), 0 elsewhere (prompt and environment replies)."""
    if len(turn_spans) != len(advantages):
        raise ValueError(f"{len(turn_spans)} turns but {len(advantages)} turn advantages")
    per_token = [0.0] * length
    for (start, end), advantage in zip(turn_spans, advantages, strict=True):
        if not 0 <= start <= end <= length:
            raise ValueError(f"turn span ({start}, {end}) is outside a sequence of {length}")
        per_token[start:end] = [advantage] * (end - start)
    return per_token
