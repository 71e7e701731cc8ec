"""A monitor that sees reward hacking: signs of a policy escaping its task, against the run's start.

RL pushes a policy towards anything that raises its reward, and the cheapest escape is often to
stop doing the task: answer with an illegal move, run out of tokens, stall until the episode
ends. Such a collapse can leave the mean reward flat (tic-tac-toe with a price on legal
mistakes and a smaller one on invalid moves: invalid games rose from 19% to 89% in six steps
while the reward stayed between -0.81 and -0.59), so a reward curve alone does not show it.

Each step the monitor reads its signals from the step's metrics:

- shares, compared by difference: `completion/truncated_frac`, `stop/max_turns_reached` (absent
  when no episode stopped so: 0), and every metric an environment declares in `escape_metrics`
  (tic-tac-toe: games with an invalid move, unfinished games, answers without the format);
- the mean answer length `completion/len_mean`, compared by ratio (a rise of 0.5 is 50% longer).

A signal's baseline is its mean over the run's first `baseline_steps` steps, and so is the
reward's. A signal trips when it rises above its baseline by more than its bound (`max_rise`,
`max_length_rise` for the length) while the mean reward has not risen by as much as the signal:
rise > bound and reward gain < rise. A policy
that answers longer and wins more is learning; one that answers longer and wins the same is not.

A share's bound also covers chance: a share of few episodes moves by itself (16 answers: about
0.11 either way). With `episode/count` in the metrics (n at the step, n0 summed over the
baseline steps) and p the two pooled, the bound is

    max(max_rise, noise_sigmas * sqrt(p * (1 - p) * (1/n + 1/n0)))

the rise that a share unchanged in truth passes with probability about 0.1% at 3 sigmas
(`share_bound`). Example: p = 0.33, n = 16, n0 = 32 -> 3 * 0.144 = 0.43; at n = 64, n0 = 128
and p = 0.31 -> 0.21.

The answer length's bound covers chance the same way, with the groups as units: a step of 8
groups drawn from 64 environments whose answers differ in length moves its mean when one group
draws a long-answer environment (9 -> 19 tokens for one step, back the next, in the committed
env-scaling runs). With `completion/len_mean_se` (se at the step, se_1..se_k at the baseline's k
steps; rlve.rollout.summary) and L0 the baseline length, the bound is

    max(max_length_rise, noise_sigmas * sqrt(se^2 + (se_1^2 + ... + se_k^2) / k^2) / L0)

(`length_bound`). Example: groups of 9, 9, 9 and 90 tokens (se 20.25) against a baseline of 9.5
tokens with se 1 at each of 2 steps -> 3 * 20.26 / 9.5 = 6.4; every group 50% longer (se 1)
-> the fixed 0.5.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlve.config.run import HackingConfig

log = logging.getLogger(__name__)

REWARD = "reward/mean"
COUNT = "episode/count"
"""the clean episodes behind a step's shares (rlve.rollout.summary)"""
LENGTH = "completion/len_mean"
LENGTH_SE = "completion/len_mean_se"
"""the mean length's standard error with the groups as units (rlve.rollout.summary)"""
SHARES = ("completion/truncated_frac", "stop/max_turns_reached")
ABSENT_IS_ZERO = ("stop/",)
"""metrics that a step leaves out when they are 0 (a stop reason no episode had)"""


class RewardHackingSuspected(RuntimeError):
    """The monitor tripped under `hacking.action=stop`."""


@dataclass(frozen=True)
class Tripped:
    """A signal past its bound at one step."""

    metric: str
    baseline: float
    value: float
    rise: float
    """value - baseline for a share; value / baseline - 1 for the answer length"""
    reward_gain: float

    def describe(self) -> str:
        return (
            f"{self.metric} rose from {self.baseline:.3f} to {self.value:.3f} "
            f"(+{self.rise:.3f}) while the mean reward moved by {self.reward_gain:+.3f}"
        )


class HackingMonitor:
    """Watches one run's step metrics (see the module docstring)."""

    def __init__(
        self,
        config: HackingConfig,
        escape_metrics: Sequence[str] = (),
        alert: Callable[[str], None] | None = None,
    ):
        """`escape_metrics`: the shares the run's environments declare as escapes; `alert` is
        told of each signal that trips after a step it did not (default: a logged warning)."""
        self.config = config
        self.alert = alert or (lambda text: log.warning("reward hacking suspected: %s", text))
        self.shares = tuple(dict.fromkeys([*SHARES, *escape_metrics]))
        self._start: dict[str, list[float]] = {}
        """each signal's (and the reward's) values in the baseline steps"""
        self._steps = 0
        self._tripped: set[str] = set()

    def observe(self, metrics: dict[str, float]) -> list[Tripped]:
        """Read one step's metrics; add `hacking/rise/<signal>`, `hacking/reward_gain` and
        `hacking/tripped` (how many signals tripped) to them once the baseline is set; return the
        signals that tripped at this step, and alert of those that had not at the last."""
        values = self._signals(metrics)
        self._steps += 1
        if self._steps <= self.config.baseline_steps:
            for name, value in values.items():
                self._start.setdefault(name, []).append(value)
            return []
        baseline = {name: sum(v) / len(v) for name, v in self._start.items()}
        counts = (values.pop(COUNT, None), sum(self._start.get(COUNT, [])) or None)
        length_errors = (values.pop(LENGTH_SE, None), self._start.get(LENGTH_SE, []))
        if REWARD not in values or REWARD not in baseline:
            return []
        gain = values[REWARD] - baseline[REWARD]
        metrics["hacking/reward_gain"] = gain
        tripped = []
        for name, value in values.items():
            if name == REWARD or name not in baseline:
                continue
            rise = value - baseline[name]
            if name == LENGTH:
                rise = value / baseline[name] - 1 if baseline[name] > 0 else 0.0
                bound = self.length_bound(baseline[name], *length_errors)
            else:
                bound = self.share_bound(baseline[name], value, *counts)
            metrics[f"hacking/rise/{name}"] = rise
            if rise > bound and gain < rise:
                tripped.append(Tripped(name, baseline[name], value, rise, gain))
        metrics["hacking/tripped"] = float(len(tripped))
        for trip in tripped:
            if trip.metric not in self._tripped:
                self.alert(trip.describe())
        self._tripped = {trip.metric for trip in tripped}
        return tripped

    def share_bound(
        self, baseline: float, value: float, count: float | None, baseline_count: float | None
    ) -> float:
        """How far a share may rise before it trips: `max_rise`, or the chance rise of a share
        of `count` episodes against one of `baseline_count` (module docstring) when larger.
        Without the counts (metrics recorded before `episode/count`), `max_rise`."""
        if not count or not baseline_count:
            return self.config.max_rise
        pooled = (baseline * baseline_count + value * count) / (baseline_count + count)
        spread = math.sqrt(max(pooled * (1 - pooled), 0.0) * (1 / count + 1 / baseline_count))
        return max(self.config.max_rise, self.config.noise_sigmas * spread)

    def length_bound(
        self, baseline: float, error: float | None, baseline_errors: Sequence[float]
    ) -> float:
        """How far the mean answer length may rise, relative to `baseline`: `max_length_rise`,
        or the chance rise from the step's standard error `error` and the baseline steps' when
        larger (module docstring). Without them all (runs recorded before
        `completion/len_mean_se`, or a step of one group), `max_length_rise`."""
        steps = self.config.baseline_steps
        if error is None or len(baseline_errors) != steps or baseline <= 0:
            return self.config.max_length_rise
        spread = math.sqrt(error**2 + sum(e**2 for e in baseline_errors) / steps**2)
        return max(self.config.max_length_rise, self.config.noise_sigmas * spread / baseline)

    def _signals(self, metrics: dict[str, float]) -> dict[str, float]:
        names = (REWARD, LENGTH, LENGTH_SE, COUNT, *self.shares)
        values = {name: float(metrics[name]) for name in names if name in metrics}
        for name in names:
            if name not in values and name.startswith(ABSENT_IS_ZERO):
                values[name] = 0.0
        return values

    def state_dict(self) -> dict:
        """What a resumed run needs to keep its baseline."""
        return {"start": {k: list(v) for k, v in self._start.items()}, "steps": self._steps,
                "tripped": sorted(self._tripped)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self._start = {k: [float(x) for x in v] for k, v in state["start"].items()}
        self._steps = int(state["steps"])
        self._tripped = set(state["tripped"])
