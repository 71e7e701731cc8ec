"""Batch evaluation, the library side: play an environment's examples with an engine and summarise.

`rlve.evaluate` is `evaluate` here; the command line is `rlve.cli.eval` (`scripts/evaluate.py`).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlve.envs.base import Environment
from rlve.inference.engine import Engine, SamplingConfig
from rlve.rollout.episode import EpisodeSettings
from rlve.rollout.group_journal import GroupJournal
from rlve.rollout.records import trajectory_row, write_text_atomically
from rlve.rollout.runner import GroupJob, play_groups
from rlve.rollout.summary import summarize
from rlve.types import RolloutGroup


@dataclass
class EvalResult:
    """The summary metrics and every rollout group of an evaluation."""

    summary: dict[str, float]
    groups: list[RolloutGroup]

    def save_rollouts(self, path: str | Path) -> None:
        """Write one JSON line per rollout (messages, reward, metrics) for inspection."""
        rows = (trajectory_row(t) for group in self.groups for t in group.trajectories)
        write_text_atomically(path, "".join(json.dumps(row) + "\n" for row in rows))


def evaluation_jobs(
    env: Environment, num_examples: int, seed: int, sampling: SamplingConfig | None = None
) -> list[GroupJob]:
    """`num_examples` examples drawn without replacement (cycling past the dataset's end)."""
    if num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    order = list(range(len(env)))
    random.Random(seed).shuffle(order)
    return [
        GroupJob(env, env.example(order[i % len(order)]), seed * 100_003 + i, sampling)
        for i in range(num_examples)
    ]


async def evaluate_async(
    env: Environment,
    engine: Engine,
    num_examples: int,
    rollouts_per_example: int = 1,
    seed: int = 0,
    sampling: SamplingConfig | None = None,
    max_concurrent: int = 64,
    time_limit_s: float | None = None,
    max_seq_len: int | None = None,
    progress: bool = False,
    journal: GroupJournal | None = None,
) -> EvalResult:
    """`journal`: groups already played (by job index) are not played again, and each new one is
    appended to it as it finishes; the result is the same as one uninterrupted evaluation's."""
    max_seq_len = max_seq_len or getattr(engine, "max_seq_len", None)
    settings = EpisodeSettings(max_seq_len=max_seq_len, time_limit_s=time_limit_s)
    jobs = evaluation_jobs(env, num_examples, seed, sampling)
    done = dict(journal.done) if journal else {}
    todo = [i for i in range(len(jobs)) if i not in done]

    def finished(position: int, group: RolloutGroup) -> None:
        if journal is not None:
            journal.append(todo[position], group)

    played = await play_groups(engine, [jobs[i] for i in todo], rollouts_per_example, settings,
                               max_concurrent, progress, on_group=finished)  # fmt: skip
    done.update(zip(todo, played, strict=True))
    groups = [done[i] for i in range(len(jobs))]
    summary = {**summarize(groups), **uncertainty(groups), **per_difficulty(env, groups)}
    return EvalResult(summary=summary, groups=groups)


def per_difficulty(env: Environment, groups: list[RolloutGroup]) -> dict[str, float]:
    """For rollouts with a difficulty level, per level d over its clean rollouts:
    `difficulty/<d>/accuracy` (the environment's own `accuracy`) with its 95% Wilson interval,
    `difficulty/<d>/reward` (the mean) and `difficulty/<d>/rollouts` (how many)."""
    by_level: dict[int, list] = {}
    for group in groups:
        for t in group.clean:
            if t.difficulty is not None:
                by_level.setdefault(int(t.difficulty), []).append(t)
    out = {}
    for level, rollouts in sorted(by_level.items()):
        key = f"difficulty/{level}"
        accuracy = sum(env.accuracy(t) for t in rollouts) / len(rollouts)
        out[f"{key}/accuracy"] = accuracy
        out[f"{key}/accuracy/ci95_low"], out[f"{key}/accuracy/ci95_high"] = wilson_interval(
            accuracy, len(rollouts)
        )
        out[f"{key}/reward"] = sum(t.reward for t in rollouts) / len(rollouts)
        out[f"{key}/rollouts"] = float(len(rollouts))
    return out


def uncertainty(groups: list[RolloutGroup]) -> dict[str, float]:
    """For every metric that is 0 or 1 in each clean rollout (a win, a correct answer): its 95%
    Wilson interval, `<metric>/ci95_low` and `/ci95_high`; with k > 1 rollouts per example, also
    `pass@k/<metric>`, the share of examples where at least one rollout scored 1."""
    rollouts = [t for g in groups for t in g.clean]
    names = {name for t in rollouts for name in t.metrics}
    binary = sorted(n for n in names if all(t.metrics.get(n) in (0.0, 1.0) for t in rollouts))
    out = {}
    for name in binary:
        rate = sum(t.metrics[name] for t in rollouts) / len(rollouts)
        out[f"{name}/ci95_low"], out[f"{name}/ci95_high"] = wilson_interval(rate, len(rollouts))
    k = max((len(g.trajectories) for g in groups), default=1)
    if k > 1:
        scored = [g for g in groups if g.clean]
        for name in binary:
            hits = sum(any(t.metrics[name] == 1.0 for t in g.clean) for g in scored)
            out[f"pass@{k}/{name}"] = hits / len(scored)
    return out


def evaluate(env: Environment, engine: Engine, num_examples: int, rollouts_per_example: int = 1,
             seed: int = 0, **kwargs: Any) -> EvalResult:  # fmt: skip
    """Play `num_examples` examples `rollouts_per_example` times each and summarise.

    The same seed gives the same examples, the same per-rollout seeds and, with a deterministic
    engine, identical results. Keyword arguments: see `evaluate_async`.
    """

    async def run_and_close() -> EvalResult:
        try:
            return await evaluate_async(
                env, engine, num_examples, rollouts_per_example, seed, **kwargs
            )
        finally:  # the engine's connections belong to this loop, which ends here
            if hasattr(engine, "aclose"):
                await engine.aclose()

    return asyncio.run(run_and_close())


def wilson_interval(rate: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate observed in `n` trials (95% for z = 1.96): unlike
    rate +- z * sqrt(rate (1 - rate) / n) it stays inside [0, 1] and is not empty at 0 or 1.
    Example: 60 of 200 -> (0.241, 0.367)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)
