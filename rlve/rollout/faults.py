"""Faults: what goes wrong outside the model, counted each step and judged over a window.

A fault is a problem generator that raised or hung (`generator_error`: the sampler draws a
replacement), or an episode spoiled by its environment (`env_error`, a dead tool server
included), by an engine request that failed or timed out (`engine_error`), by the episode's time
limit (`timeout`), or by a reward function that raised or hung (`verifier_error`). An episode
counts once, under the first of these that applies. The run goes on through faults until more
than `rollout.max_fault_rate` of the last `rollout.fault_window` episodes and failed generations
were faulty; then `FaultWindow.check` stops it with `TooManyFaults`, which says what failed.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import Any

from rlve.envs.rubric import Score
from rlve.reliability.clean_text import terminal_safe
from rlve.types import Fault

FAULT_KINDS = ("generator_error", "env_error", "engine_error", "timeout", "verifier_error")

EPISODE_ENDING = ("engine_error", "env_error", "timeout")
"""the faults that end an episode, as the state keys their message is left under (by the episode
runner, or by an environment such as MCPEnv); the first present names the fault"""


def episode_fault(state: dict[str, Any], score: Score) -> Fault | None:
    """The fault of one scored episode: what ended it, else a reward function's failure (the
    rubric's, or the one an environment verifying on its own left in `state["verifier_error"]`),
    its message `terminal_safe` (it is logged, and TooManyFaults prints an example)."""
    for kind in EPISODE_ENDING:
        if kind in state:
            return Fault(kind, terminal_safe(str(state[kind])))
    message = score.error or state.get("verifier_error")
    return Fault("verifier_error", terminal_safe(str(message))) if message else None


def fault_metrics(entries: Sequence[Fault | None]) -> dict[str, float]:
    """One step's `faults/<kind>` counts (every kind, zeros included) and `faults/rate`, the
    faulty share of `entries`: one per episode played (None when clean), one per failed
    generation."""
    counts = Counter(entry.kind for entry in entries if entry is not None)
    metrics = {f"faults/{kind}": float(counts[kind]) for kind in FAULT_KINDS}
    metrics["faults/rate"] = sum(counts.values()) / len(entries) if entries else 0.0
    return metrics


class TooManyFaults(RuntimeError):
    """More faults than `rollout.max_fault_rate` allows; the message counts them by kind."""


class FaultWindow:
    """The last `size` episodes and failed generations, judged once `size` of them were seen (so
    that a few unlucky episodes at the start cannot stop a run)."""

    def __init__(self, max_rate: float, size: int):
        self.max_rate = max_rate
        self.recent: deque[Fault | None] = deque(maxlen=size)

    def add(self, entries: Iterable[Fault | None]) -> None:
        self.recent.extend(entries)

    def check(self) -> None:
        """TooManyFaults when the window is full and its faulty share is above `max_rate`."""
        if len(self.recent) < self.recent.maxlen:
            return
        faults = [entry for entry in self.recent if entry is not None]
        rate = len(faults) / len(self.recent)
        if rate > self.max_rate:
            raise TooManyFaults(self._report(faults, rate))

    def _report(self, faults: list[Fault], rate: float) -> str:
        counts = Counter(fault.kind for fault in faults)
        first = {}
        for fault in faults:
            first.setdefault(fault.kind, fault.message)
        kinds = "; ".join(
            f"{kind} {counts[kind]} (e.g. {first[kind]!r})" for kind in FAULT_KINDS if counts[kind]
        )
        size = len(self.recent)
        return (
            f"{len(faults)} of the last {size} episodes and problem generations were faulty "
            f"({rate:.1%}), more than rollout.max_fault_rate={self.max_rate:g} allows over "
            f"rollout.fault_window={size}: {kinds}. Fix what fails, or raise "
            "rollout.max_fault_rate (1.0 never stops)"
        )
