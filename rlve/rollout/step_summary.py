"""A step's rollout-side metrics (rewards of every group played, per environment, the batch,
the curriculum and faults), as the RL loop logs them."""

from __future__ import annotations

from rlve.envs.base import Environment
from rlve.rollout.collector import StepBatch
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.summary import summarize
from rlve.types import RolloutGroup


def mixed_outcome_ratio(groups: list[RolloutGroup], envs: dict[str, Environment]) -> float:
    """Share of the groups (with two clean rollouts or more) that both solve and fail their
    problem (`Environment.accuracy`): the effective prompt ratio of pass/fail. Under a
    partial-credit reward such as rlve/sorting's, almost any two answers score differently, so
    the effective prompt ratio stays near 1 at every level; this one falls at levels the model
    always or never solves."""
    counted = [g for g in groups if len(g.clean) > 1]
    mixed = [g for g in counted if len({envs[g.env_name].accuracy(t) for t in g.clean}) > 1]
    return len(mixed) / len(counted) if counted else 0.0


def step_metrics(batch: StepBatch, sampler: ProblemSampler, waited_s: float) -> dict[str, float]:
    """Rollout-side metrics of a step: rewards of every group played, batch, curriculum and
    faults."""
    metrics = summarize(batch.played)
    for name in {g.env_name for g in batch.played}:
        env = sampler.envs[name]
        rollouts = [t for g in batch.played if g.env_name == name for t in g.clean]
        if not rollouts:  # every one spoiled by a fault: faults/* says so
            continue
        metrics[f"env/{name}/reward"] = sum(t.reward for t in rollouts) / len(rollouts)
        metrics[f"env/{name}/accuracy"] = sum(env.accuracy(t) for t in rollouts) / len(rollouts)
    metrics["batch/effective_prompt_ratio"] = batch.effective_prompt_ratio
    metrics["batch/mixed_outcome_ratio"] = mixed_outcome_ratio(batch.played, sampler.envs)
    metrics["batch/groups_dropped"] = float(len(batch.played) - len(batch.groups))
    metrics["batch/groups"] = float(len(batch.groups))
    metrics["batch/rounds"] = float(batch.rounds)
    metrics["perf/rollout_s"] = waited_s
    metrics["perf/generate_s"] = batch.generate_s
    metrics["perf/rollout_tokens_per_s"] = batch.sampled_tokens / max(batch.generate_s, 1e-9)
    prompts = batch.prompt_tokens
    if prompts is not None and prompts.total > 0:  # perf/: a resumed run starts with a cold cache
        metrics["perf/prompt_tokens_cached_frac"] = prompts.cached / prompts.total
    metrics.update(batch.curriculum)
    metrics.update(batch.faults)
    return metrics
