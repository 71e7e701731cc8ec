"""Rollout groups: several episodes of one example, played concurrently and scored together.

`play_groups` keeps at most `max_concurrent` episodes in flight across all groups, scores each
finished group with the environment's rubric (group reward functions see the whole group; each
self-play seat is scored as a group of its own, from its own state), marks each faulty episode
with its `Fault`, and returns the groups in the order of the examples, whatever order they
finished in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlve.envs.base import Environment, State
from rlve.inference.engine import Engine, SamplingConfig
from rlve.rollout.episode import EpisodeSettings, play_episode
from rlve.rollout.faults import episode_fault
from rlve.rollout.progress import progress_bar
from rlve.types import Example, RolloutGroup, Trajectory


@dataclass(frozen=True)
class GroupJob:
    """One group to play: the environment, the example, and the seed its rollouts derive their
    seeds from. `sampling` None means the environment's defaults (`env_sampling`)."""

    env: Environment
    example: Example
    seed: int
    sampling: SamplingConfig | None = None


def env_sampling(env: Environment, **overrides) -> SamplingConfig:
    """The defaults, then the environment's own settings, then `overrides` (None skips)."""
    return SamplingConfig().with_overrides(**env.sampling).with_overrides(**overrides)


def rollout_seed(group_seed: int, rollout_index: int) -> int:
    """Each rollout's own seed: distinct within a group, reproducible across runs."""
    return group_seed * 997 + rollout_index


async def play_group(
    engine: Engine,
    job: GroupJob,
    group_size: int,
    settings: EpisodeSettings,
    limit: asyncio.Semaphore,
) -> RolloutGroup:
    """Play `group_size` episodes of one example and score them as a group."""
    env = job.env
    sampling = job.sampling or env_sampling(env)

    async def one(index: int):
        async with limit:
            seed = rollout_seed(job.seed, index)
            return await play_episode(env, engine, job.example, sampling, settings, seed)

    played = await asyncio.gather(*(one(i) for i in range(group_size)))
    trajectories = [t for t, _ in played]
    states = [s for _, s in played]
    await _score(env, trajectories, states)
    for seat in range(max(len(t.seats) for t in trajectories)):
        seated = [(t, s) for t, s in played if len(t.seats) > seat]
        await _score(env, [t.seats[seat] for t, _ in seated],
                     [s["seats"][seat].state for _, s in seated])  # fmt: skip
        for t, _ in seated:
            t.seats[seat].fault = t.fault  # a seat of a spoiled game is spoiled with it
    return RolloutGroup(
        example_id=job.example.example_id,
        env_name=env.name,
        trajectories=trajectories,
        difficulty=job.example.info.get("difficulty"),
    )


async def _score(env: Environment, trajectories: list[Trajectory], states: list[State]) -> None:
    """Score rollouts that are compared with each other (one group, or one seat of a group's
    games): the rubric's reward, errors, metrics and fault of each."""
    scores = await env.rubric.score_group(
        prompts=[t.prompt for t in trajectories],
        completions=[t.completion for t in trajectories],
        answers=[t.answer for t in trajectories],
        states=states,
        infos=[t.info for t in trajectories],
    )
    for trajectory, state, score in zip(trajectories, states, scores, strict=True):
        trajectory.reward = score.reward
        trajectory.errors = dict(score.errors)
        if "env_error" in state:
            trajectory.errors["env_response"] = 1
        if "chat_template_error" in state:
            trajectory.errors["chat_template"] = 1
        trajectory.metrics = {**score.metrics, **env.episode_metrics(state)}
        trajectory.fault = episode_fault(state, score)


async def play_groups(
    engine: Engine,
    jobs: Sequence[GroupJob],
    group_size: int,
    settings: EpisodeSettings = EpisodeSettings(),
    max_concurrent: int = 64,
    progress: bool = False,
    on_group: Callable[[int, RolloutGroup], None] | None = None,
) -> list[RolloutGroup]:
    """Play every job's group, at most `max_concurrent` episodes at a time; `on_group(index,
    group)` is called as each one finishes."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
    limit = asyncio.Semaphore(max_concurrent)

    async def indexed(index: int, job: GroupJob) -> tuple[int, RolloutGroup]:
        return index, await play_group(engine, job, group_size, settings, limit)

    tasks = [asyncio.ensure_future(indexed(i, job)) for i, job in enumerate(jobs)]
    bar = progress_bar(total=len(tasks), desc="rollout groups", disable=not progress, leave=False)
    try:
        for finished in asyncio.as_completed(tasks):
            index, group = await finished
            if on_group is not None:
                on_group(index, group)
            bar.update(1)
    finally:
        bar.close()
        for task in tasks:
            task.cancel()
    return [task.result()[1] for task in tasks]
