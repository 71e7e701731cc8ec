"""Rubrics: weighted reward functions that score episodes.

A reward function asks by parameter name for what it needs, any of `prompt, completion, answer,
state, info, parser`, and returns a float. A group reward function sees a whole rollout group
(`prompts, completions, answers, states, infos, parser`) and returns one float per rollout. The
reward is the weighted sum; every function's raw value is also kept as a metric, so weight 0 makes
a pure metric. A function that raises, or runs past the rubric's time limit, scores 0 and is
counted under `errors/<name>` (and its episode as a `verifier_error` fault): one bad function never
crashes or stalls a batch. With a time limit, plain functions run in a thread of their own; one
that never returns is left running there (Python cannot stop a thread), a daemon thread that
ends with the process.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlve.envs.parsers import Parser
from rlve.types import Message

log = logging.getLogger(__name__)

ROLLOUT_ARGS = ("prompt", "completion", "answer", "state", "info", "parser")
GROUP_ARGS = ("prompts", "completions", "answers", "states", "infos", "parser")

REWARD_TIME_LIMIT_S = 60.0
"""a rubric's default limit on one call of one reward function (a group function: its group)"""


@dataclass
class RewardFunc:
    """A reward function with its weight, name and the arguments it asks for."""

    func: Callable[..., Any]
    weight: float
    name: str
    wants: tuple[str, ...]
    group: bool

    @staticmethod
    def of(func: Callable[..., Any], weight: float, group: bool) -> RewardFunc:
        if not math.isfinite(weight):
            raise ValueError(f"reward weight must be finite, got {weight} for {func}")
        allowed = GROUP_ARGS if group else ROLLOUT_ARGS
        params = inspect.signature(func).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if takes_all:
            wants = allowed
        else:
            unknown = [n for n in params if n not in allowed]
            if unknown:
                raise ValueError(
                    f"reward function {getattr(func, '__name__', func)} asks for {unknown}; "
                    f"it may ask for any of {list(allowed)}"
                )
            wants = tuple(params)
        name = getattr(func, "__name__", type(func).__name__)
        return RewardFunc(func, float(weight), name, wants, group)


@dataclass
class Score:
    """What a rubric gives one rollout: the reward, each function's value, the failures."""

    reward: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error: str = ""
    """the first failure's message ("<function>: <error>"); empty when every function scored"""


@dataclass(frozen=True)
class RewardError:
    """What a reward function gave instead of a value: why it failed."""

    message: str


async def _call(func: Callable[..., Any], kwargs: dict[str, Any], limit_s: float | None) -> Any:
    if limit_s is None:
        value = func(**kwargs)
    elif inspect.iscoroutinefunction(func):
        value = await asyncio.wait_for(func(**kwargs), limit_s)
    else:
        value = await asyncio.wait_for(_in_thread(func, kwargs), limit_s)
    if inspect.isawaitable(value):  # e.g. an object with an async __call__
        value = await asyncio.wait_for(value, limit_s)
    return value


async def _in_thread(func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`func(**kwargs)` in a daemon thread, so that the event loop can give up waiting on it."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if outcome.done():  # given up on (timed out) meanwhile
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(value)

    def run() -> None:
        value, error = None, None
        try:
            value = func(**kwargs)
        except Exception as exc:  # handed to the waiting coroutine
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop closed while the function ran: nobody waits any more
            pass

    threading.Thread(target=run, daemon=True, name="rlve-reward").start()
    return await outcome


class Rubric:
    """Weighted reward functions, per rollout and per group."""

    def __init__(
        self,
        funcs: Sequence[Callable[..., Any]] = (),
        weights: Sequence[float] | None = None,
        parser: Parser | None = None,
        time_limit_s: float | None = REWARD_TIME_LIMIT_S,
    ):
        if weights is not None and len(weights) != len(funcs):
            raise ValueError(f"got {len(funcs)} reward functions but {len(weights)} weights")
        if time_limit_s is not None and not time_limit_s > 0:
            raise ValueError(f"time_limit_s must be None or > 0, got {time_limit_s}")
        self.parser = parser or Parser()
        self.time_limit_s = time_limit_s
        """longest call of one reward function; None = no limit (and plain functions run inline)"""
        self.funcs: list[RewardFunc] = []
        for i, func in enumerate(funcs):
            self.add(func, 1.0 if weights is None else weights[i])

    def add(self, func: Callable[..., Any], weight: float = 1.0) -> Rubric:
        """Add a per-rollout reward function; weight 0 keeps it as a metric only."""
        self._append(RewardFunc.of(func, weight, group=False))
        return self

    def add_group(self, func: Callable[..., Any], weight: float = 1.0) -> Rubric:
        """Add a group reward function: lists in, one float per rollout out."""
        self._append(RewardFunc.of(func, weight, group=True))
        return self

    def _append(self, reward_func: RewardFunc) -> None:
        if any(f.name == reward_func.name for f in self.funcs):
            raise ValueError(f"the rubric already has a reward function named {reward_func.name!r}")
        self.funcs.append(reward_func)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.funcs]

    async def score_group(
        self,
        prompts: list[list[Message]],
        completions: list[list[Message]],
        answers: list[str],
        states: list[dict[str, Any]],
        infos: list[dict[str, Any]],
    ) -> list[Score]:
        """Score every rollout of one group with every function."""
        scores = [Score() for _ in prompts]
        for rf in self.funcs:
            if rf.group:
                values = await self._group_values(rf, prompts, completions, answers, states, infos)
            else:
                values = [
                    await self._rollout_value(rf, p, c, a, s, i)
                    for p, c, a, s, i in zip(
                        prompts, completions, answers, states, infos, strict=True
                    )
                ]
            for score, value in zip(scores, values, strict=True):
                if isinstance(value, RewardError):
                    score.errors[rf.name] = score.errors.get(rf.name, 0) + 1
                    score.error = score.error or f"{rf.name}: {value.message}"
                    value = 0.0
                score.metrics[f"reward/{rf.name}"] = value
                score.reward += rf.weight * value
        return scores

    async def _rollout_value(
        self, rf: RewardFunc, prompt, completion, answer, state, info
    ) -> float | RewardError:
        available = dict(
            prompt=prompt, completion=completion, answer=answer, state=state, info=info,
            parser=self.parser,
        )  # fmt: skip
        try:
            value = await _call(rf.func, {k: available[k] for k in rf.wants}, self.time_limit_s)
            return _as_reward(value, rf.name)
        except Exception as exc:  # a broken reward function must not take the batch down
            return self._failed(rf, exc)

    async def _group_values(
        self, rf: RewardFunc, prompts, completions, answers, states, infos
    ) -> list[float | RewardError]:
        available = dict(
            prompts=prompts, completions=completions, answers=answers, states=states,
            infos=infos, parser=self.parser,
        )  # fmt: skip
        try:
            values = await _call(rf.func, {k: available[k] for k in rf.wants}, self.time_limit_s)
            if len(values) != len(prompts):
                raise ValueError(f"returned {len(values)} values for {len(prompts)} rollouts")
            return [_as_reward(v, rf.name) for v in values]
        except Exception as exc:
            return [self._failed(rf, exc)] * len(prompts)

    def _failed(self, rf: RewardFunc, exc: Exception) -> RewardError:
        if isinstance(exc, TimeoutError) and not str(exc):  # asyncio's, at the time limit
            message = f"no value within {self.time_limit_s} s (the rubric's time limit)"
        else:
            message = f"{type(exc).__name__}: {exc}"
        log.warning("reward function %s failed: %s", rf.name, message)
        return RewardError(message)


def _as_reward(value: Any, name: str) -> float:
    reward = float(value)
    if not math.isfinite(reward):
        raise ValueError(f"reward function {name} returned {reward}")
    return reward
