"""Summary metrics of rollout groups, in rlve's one namespace (`reward/mean`, `game/win`...).

Rewards and per-rollout metrics are averaged over the clean rollouts (a fault's score says
nothing about the model); error counts are summed and stop reasons become shares
(`stop/<reason>`) over all of them. The training loop adds the per-environment `env/<name>/...`
metrics and the collector's `faults/...` (rlve.rollout.faults).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

from rlve.types import RolloutGroup, Trajectory


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: Sequence[float]) -> float:
    """Population standard deviation (how spread the rewards of the whole batch are)."""
    if not values:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def summarize(groups: Sequence[RolloutGroup]) -> dict[str, float]:
    """One flat dict of metrics for a list of rollout groups."""
    rollouts = [t for g in groups for t in g.trajectories]
    clean = [t for g in groups for t in g.clean]
    if not rollouts:
        return {}
    summary = _clean_summary(clean) if clean else {}
    summary.update(_length_spread(groups))
    seats = [seat for t in clean for seat in t.seats]
    if seats:  # self-play: the other players' side, under seat/ (seat/reward/mean...)
        summary.update({f"seat/{name}": v for name, v in _clean_summary(seats).items()})
        summary["seat/per_episode"] = len(seats) / len(clean)  # seats that played, per episode
    errors: dict[str, int] = defaultdict(int)
    stops: dict[str, int] = defaultdict(int)
    for t in rollouts:
        for name, count in t.errors.items():
            errors[name] += count
        stops[t.stop_reason] += 1
    summary.update({f"errors/{name}": float(n) for name, n in sorted(errors.items())})
    summary.update({f"stop/{reason}": n / len(rollouts) for reason, n in sorted(stops.items())})
    return summary


def _clean_summary(rollouts: Sequence[Trajectory]) -> dict[str, float]:
    """Rewards, turns, lengths and the rollouts' own metrics, averaged."""
    rewards = [t.reward for t in rollouts]
    summary = {
        "reward/mean": _mean(rewards),
        "reward/std": _std(rewards),
        "reward/min": min(rewards),
        "reward/max": max(rewards),
        "episode/count": float(len(rollouts)),
        "episode/turns_mean": _mean([t.num_turns for t in rollouts]),
        "completion/truncated_frac": _mean([float(t.truncated_turns > 0) for t in rollouts]),
    }
    per_metric: dict[str, list[float]] = defaultdict(list)
    for t in rollouts:
        for name, value in t.metrics.items():
            per_metric[name].append(value)
    summary.update({name: _mean(values) for name, values in sorted(per_metric.items())})
    token_rollouts = [t for t in rollouts if t.is_token_exact]
    if token_rollouts:
        lengths = [t.num_sampled_tokens for t in token_rollouts]
        summary["completion/len_mean"] = _mean(lengths)
        summary["completion/len_max"] = float(max(lengths))
    return summary


def _length_spread(groups: Sequence[RolloutGroup]) -> dict[str, float]:
    """`completion/len_mean_se`: the standard error of the step's mean answer length with the
    groups as units (a group's answers share a prompt, so they are not independent): the sample
    standard deviation of the groups' mean lengths over sqrt(groups). Example: groups averaging
    9, 9, 9 and 90 tokens -> 40.5 / 2 = 20.25. Left out under 2 groups with token-exact answers."""
    means = []
    for group in groups:
        lengths = [t.num_sampled_tokens for t in group.clean if t.is_token_exact]
        if lengths:
            means.append(_mean(lengths))
    if len(means) < 2:
        return {}
    return {"completion/len_mean_se": statistics.stdev(means) / math.sqrt(len(means))}


def weight_lag(groups: Sequence[RolloutGroup], version: int) -> dict[str, float]:
    """How many trainer steps behind `version` the weights that sampled each rollout were
    (0 on-policy, 1 with `async_level` 1): `sampling/weight_lag_min|mean|max`.

    ValueError when a rollout claims weights newer than `version`: the trainer and the engine
    disagree about the step (e.g. an engine left over from another run).
    """
    lags = [version - t.weight_version for g in groups for t in g.trajectories]
    if not lags:
        return {}
    if min(lags) < 0:
        raise ValueError(
            f"a rollout was sampled by weights version {version - min(lags)}, but the trainer "
            f"is at version {version}: the engine's weights do not come from this trainer"
        )
    return {
        "sampling/weight_lag_min": min(lags),
        "sampling/weight_lag_mean": sum(lags) / len(lags),
        "sampling/weight_lag_max": max(lags),
    }


def within_lag(
    groups: Sequence[RolloutGroup], version: int, max_lag: int
) -> tuple[list[RolloutGroup], int]:
    """The groups every rollout of which was sampled at most `max_lag` versions behind
    `version`, and how many groups were older than that (dropped: off-policy beyond what the
    run allows)."""
    kept = [g for g in groups if all(version - t.weight_version <= max_lag for t in g.trajectories)]
    return kept, len(groups) - len(kept)


def staleness(groups: Sequence[RolloutGroup], version: int, max_staleness: int) -> dict[str, float]:
    """Rollouts that span weight pushes (`rollout.max_staleness`), seen by a trainer at
    `version`: `async/version_span_mean|max` (versions that sampled a rollout's turns),
    `async/staleness_<j>` (the share of rollouts whose oldest token is j versions old, j up to
    `max_staleness`, and `async/staleness_over` beyond it) and `async/dropped_rollouts` (those in
    groups dropped for a rollout beyond it)."""
    rollouts = [t for g in groups for t in g.trajectories]
    if not rollouts:
        return {}
    spans = [t.version_span for t in rollouts]
    lags = [version - t.weight_version for t in rollouts]
    metrics = {"async/version_span_mean": _mean(spans), "async/version_span_max": max(spans)}
    for j in range(max_staleness + 1):
        metrics[f"async/staleness_{j}"] = _mean([float(lag == j) for lag in lags])
    metrics["async/staleness_over"] = _mean([float(lag > max_staleness) for lag in lags])
    kept, _ = within_lag(groups, version, max_staleness)
    metrics["async/dropped_rollouts"] = float(
        len(rollouts) - sum(len(g.trajectories) for g in kept)
    )
    return metrics
