"""Collecting one training step's rollout groups, with DAPO dynamic sampling.

`BatchCollector.collect()` draws problems, plays their groups, feeds every finished group to the
curriculum (also the ones dropped later), applies overlong shaping, and with dynamic sampling keeps
only groups whose rewards differ, sampling again until the batch is full or the refills run out.
`submit()` does the same in a background thread, so generation can overlap training
(`async_level` 1). Faults (rlve.rollout.faults) are counted for the step's metrics and fed to a
`FaultWindow` that stops the run past `rollout.max_fault_rate`; the window is not checkpointed (a
resumed run starts with an empty one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from rlve.algorithms import filter_groups, turn_overlong_penalties
from rlve.config import RolloutConfig
from rlve.inference.engine import Engine, PromptTokenCounts
from rlve.reliability.kill_points import kill_point
from rlve.rollout.episode import EpisodeSettings
from rlve.rollout.faults import FaultWindow, fault_metrics
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.runner import env_sampling, play_groups
from rlve.types import Fault, RolloutGroup


@dataclass
class StepBatch:
    """The groups of one step and how they were obtained."""

    groups: list[RolloutGroup]
    """groups to train on (at most groups_per_step)"""
    played: list[RolloutGroup]
    """every group played this step, dropped ones included"""
    rounds: int
    generate_s: float
    sampler_state: dict[str, Any] = field(default_factory=dict)
    """the problem sampler's state right after this batch: where a resumed run continues"""
    curriculum: dict[str, float] = field(default_factory=dict)
    """the controller's metrics right after this batch, taken in the thread that moves the
    windows (reading them from another thread while a batch is collected is a race)"""
    faults: dict[str, float] = field(default_factory=dict)
    """the step's `faults/*` metrics: faulty episodes and failed generations by kind, and rate"""
    prompt_tokens: PromptTokenCounts | None = None
    """prompt tokens of this batch's requests, and how many of them the engine's prefix cache
    held; None for engines that do not count them"""

    @property
    def effective_prompt_ratio(self) -> float:
        return filter_groups(self.played).effective_prompt_ratio

    @property
    def sampled_tokens(self) -> int:
        return sum(
            p.num_sampled_tokens for g in self.played for t in g.trajectories for p in [t, *t.seats]
        )


class BatchCollector:
    """Plays the rollout groups of each step; one batch at a time, possibly in the background."""

    def __init__(
        self,
        engine: Engine,
        sampler: ProblemSampler,
        config: RolloutConfig,
        settings: EpisodeSettings,
    ):
        self.engine = engine
        self.sampler = sampler
        self.config = config
        self.settings = settings
        self.fault_window = FaultWindow(config.max_fault_rate, config.fault_window)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rollouts")
        self.next_step = 1
        """the step the next collected batch is for (a resumed run sets it)"""

    def submit(self) -> concurrent.futures.Future[StepBatch]:
        """Start collecting the next batch in the background."""
        return self._executor.submit(self.collect)

    def collect(self) -> StepBatch:
        started = time.perf_counter()
        step, self.next_step = self.next_step, self.next_step + 1
        need = self.config.groups_per_step
        kept: list[RolloutGroup] = []
        played: list[RolloutGroup] = []
        faults: list[Fault | None] = []
        rounds = 0
        counts = getattr(self.engine, "prompt_tokens", None)
        before = replace(counts) if counts is not None else None
        dynamic = self.config.dynamic_sampling
        max_rounds = 1 + (self.config.max_refills if dynamic else 0)
        while len(kept) < need and rounds < max_rounds:
            missing = need - len(kept)
            ask = math.ceil(missing * self.config.oversample) if dynamic else missing
            groups = self._play(ask)
            kill_point("rollout", step)
            rounds += 1
            found: list[Fault | None] = [*self.sampler.take_generator_faults()]
            found += [t.fault for g in groups for t in g.trajectories]
            faults += found
            self.fault_window.add(found)
            self.fault_window.check()
            self.sampler.observe(groups)
            self._shape_overlong(groups)
            played += groups
            kept += filter_groups(groups).kept if dynamic else groups
        return StepBatch(
            groups=kept[:need],
            played=played,
            rounds=rounds,
            generate_s=time.perf_counter() - started,
            sampler_state=self.sampler.state_dict(),
            curriculum=self.sampler.controller.metrics() if self.sampler.controller else {},
            faults=fault_metrics(faults),
            prompt_tokens=counts.since(before) if counts is not None else None,
        )

    def _play(self, count: int) -> list[RolloutGroup]:
        jobs = self.sampler.draw(count, self.config.generate_time_limit_s)
        return asyncio.run(
            play_groups(
                self.engine,
                jobs,
                self.config.group_size,
                self.settings,
                self.config.max_concurrent,
            )
        )

    def _shape_overlong(self, groups: list[RolloutGroup]) -> None:
        """DAPO overlong shaping: each turn that ran into the last tokens of the limit pays its own
        penalty, at that turn under per-turn credit."""
        buffer = self.config.overlong_buffer
        if buffer is None:
            return
        for group in groups:
            env = self.sampler.envs[group.env_name]
            limit = (self.sampler.sampling.get(group.env_name) or env_sampling(env)).max_tokens
            for t in (p for g in group.trajectories for p in [g, *g.seats]):  # seats: theirs
                if not t.turn_spans:
                    continue
                t.turn_shaping = turn_overlong_penalties(t.turn_spans, limit, min(buffer, limit))
                t.shaping += sum(t.turn_shaping)
                t.metrics["reward/overlong_penalty"] = sum(t.turn_shaping)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
