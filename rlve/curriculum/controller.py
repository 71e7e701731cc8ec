"""The RLVE adaptive difficulty window, one per environment (Zeng et al. 2025, section 2.2).

Each environment keeps a window [low, high] of difficulty levels. Problems are drawn uniformly
from the window; once `tau_num` rollouts at `high` have been seen, `high` goes up by one if their
accuracy reached `tau_acc`, and `low` follows so the window is never wider than `d_delta`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlve.config import is_int, require

STATE_VERSION = 1


@dataclass
class EnvWindow:
    """One environment's difficulty window and the counters that move it."""

    low: int = 0
    """lowest difficulty sampled"""
    high: int = 0
    """highest difficulty sampled; the level the model must master before moving on"""
    correct: float = 0.0
    """correct rollouts at `high` since the last check (a float accuracy adds its value)"""
    attempted: int = 0
    """rollouts at `high` since the last check"""
    low_correct: float = 0.0
    """correct rollouts at `low` since `low` last changed or was checked (lower_floor only)"""
    low_attempted: int = 0
    """rollouts at `low` since `low` last changed or was checked (lower_floor only)"""
    last_accuracy: float | None = None
    """accuracy at `high` when the last check fired; None before the first check"""
    reward_variances: list[float] = field(default_factory=list)
    """reward variance of each recent group of this environment, oldest first"""

    def reset_high_counters(self) -> None:
        self.correct, self.attempted = 0.0, 0

    def reset_low_counters(self) -> None:
        self.low_correct, self.low_attempted = 0.0, 0


class DifficultyController:
    """Per-environment difficulty windows, moved by the accuracy observed at their top level.

    The RLVE rule (`tau_acc`, `tau_num`, `d_delta`) is the whole algorithm when the keyword-only
    options keep their defaults. Two extensions, off by default:

    - `lower_floor`: also count accuracy at `low` (while `low < high`); when `tau_num` rollouts
      there reached an accuracy below `lower_floor`, `low` goes down by one (never below 0), so a
      model that forgot the easy end gets it back. This may widen the window to `d_delta + 1`
      until the next raise of `high` slides `low` up again.
    - `variance_weighting`: `choose_env` prefers environments whose recent groups had spread-out
      rewards, i.e. groups that carry a learning signal (see `env_weights`).
    """

    def __init__(
        self,
        tau_acc: float = 0.9,
        tau_num: int = 128,
        d_delta: int = 4,
        *,
        lower_floor: float | None = None,
        variance_weighting: bool = False,
        variance_window: int = 64,
        variance_floor: float = 0.01,
    ) -> None:
        require(0.0 < tau_acc <= 1.0, f"tau_acc must be in (0, 1], got {tau_acc!r}")
        require(
            is_int(tau_num) and tau_num >= 1, f"tau_num must be an integer >= 1, got {tau_num!r}"
        )
        require(
            is_int(d_delta) and d_delta >= 1, f"d_delta must be an integer >= 1, got {d_delta!r}"
        )
        require(
            lower_floor is None or 0.0 < lower_floor < 1.0,
            f"lower_floor must be None or in (0, 1), got {lower_floor!r}",
        )
        require(
            is_int(variance_window) and variance_window >= 1,
            f"variance_window must be an integer >= 1, got {variance_window!r}",
        )
        require(variance_floor > 0.0, f"variance_floor must be > 0, got {variance_floor!r}")
        self.tau_acc = float(tau_acc)
        self.tau_num = tau_num
        self.d_delta = d_delta
        self.lower_floor = lower_floor
        self.variance_weighting = variance_weighting
        self.variance_window = variance_window
        self.variance_floor = float(variance_floor)
        self._windows: dict[str, EnvWindow] = {}

    # ---------------------------------------------------------------- reading the windows

    @property
    def envs(self) -> list[str]:
        """Environments seen so far, in the order they were first seen."""
        return list(self._windows)

    def env_window(self, env: str) -> EnvWindow:
        """The live record of `env` (created at (0, 0) on first use)."""
        if env not in self._windows:
            self._windows[env] = EnvWindow()
        return self._windows[env]

    def window(self, env: str) -> tuple[int, int]:
        """(low, high) of `env`, both inclusive."""
        record = self.env_window(env)
        return record.low, record.high

    def sample(self, env: str, rng: random.Random) -> int:
        """A difficulty drawn uniformly from the window of `env`."""
        low, high = self.window(env)
        return rng.randint(low, high)

    # ---------------------------------------------------------------- the update rule

    def observe(
        self,
        env: str,
        difficulty: int,
        accuracies: Sequence[bool | float],
        rewards: Sequence[float] | None = None,
    ) -> None:
        """Count one finished group of `env` generated at `difficulty`.

        `accuracies` has one entry per rollout: a bool, or a float in [0, 1] that adds its value
        to the correct count. Only rollouts at the current `high` count (and, with `lower_floor`,
        those at `low`); a group sampled before the window moved counts only for the variance
        history. `rewards` (same length) feed `variance_weighting`; without them the accuracies
        stand in. Call it for every finished group, also those dynamic sampling drops.
        """
        values = [_as_accuracy(a) for a in accuracies]
        if rewards is not None and len(rewards) != len(values):
            raise ValueError(
                f"rewards has {len(rewards)} entries but accuracies has {len(values)}; "
                "give one of each per rollout"
            )
        if not values:
            return
        record = self.env_window(env)
        self._record_variance(
            record, [float(r) for r in rewards] if rewards is not None else values
        )
        if difficulty == record.high:
            record.correct += sum(values)
            record.attempted += len(values)
        elif self.lower_floor is not None and difficulty == record.low:
            record.low_correct += sum(values)
            record.low_attempted += len(values)
        self._check_high(record)
        if self.lower_floor is not None:
            self._check_low(record)

    def _check_high(self, record: EnvWindow) -> None:
        # Division, not `correct >= tau_acc * attempted`: 0.9 * 30 rounds above 27 in binary.
        if record.attempted < self.tau_num:
            return
        accuracy = record.correct / record.attempted
        record.last_accuracy = accuracy
        if accuracy >= self.tau_acc:
            record.high += 1
        record.reset_high_counters()
        new_low = max(record.low, record.high - self.d_delta + 1)
        if new_low != record.low:
            record.low = new_low
            record.reset_low_counters()

    def _check_low(self, record: EnvWindow) -> None:
        if record.low >= record.high:
            record.reset_low_counters()
            return
        if record.low_attempted < self.tau_num:
            return
        accuracy = record.low_correct / record.low_attempted
        if accuracy < self.lower_floor and record.low > 0:
            record.low -= 1
        record.reset_low_counters()

    def _record_variance(self, record: EnvWindow, rewards: list[float]) -> None:
        mean = sum(rewards) / len(rewards)
        variance = sum((r - mean) ** 2 for r in rewards) / len(rewards)
        record.reward_variances.append(variance)
        del record.reward_variances[: -self.variance_window]

    # ---------------------------------------------------------------- choosing environments

    def env_weights(self, envs: Iterable[str]) -> dict[str, float]:
        """Probability of drawing each of `envs`; they sum to 1.

        Uniform unless `variance_weighting`. With it, for each env e let v_e be the mean, over its
        last `variance_window` groups, of the population variance of the group's rewards; an env
        with no group yet gets the largest v of the others, so it is tried. Then

            w_e = (v_e + variance_floor) / sum_f (v_f + variance_floor)

        The floor keeps every env drawable, so a silent env can show that it has woken up.
        Example: rewards [1, 0, 1, 0] -> v = 0.25, [1, 1, 1, 1] -> v = 0; with floor 0.01 the
        weights are 0.26 / 0.27 and 0.01 / 0.27.
        """
        names = list(envs)
        if not names:
            raise ValueError("envs is empty; give at least one environment name")
        if len(set(names)) != len(names):
            raise ValueError(f"envs has duplicate names: {names}")
        if not self.variance_weighting:
            return {name: 1.0 / len(names) for name in names}
        seen = {
            name: sum(history) / len(history) for name in names if (history := self._history(name))
        }
        unseen_value = max(seen.values(), default=0.0)
        scores = {name: seen.get(name, unseen_value) + self.variance_floor for name in names}
        total = sum(scores.values())
        return {name: score / total for name, score in scores.items()}

    def choose_env(self, envs: Sequence[str], rng: random.Random) -> str:
        """Draw the environment of the next problem: uniform, or by `env_weights`."""
        names = list(envs)
        weights = self.env_weights(names)
        if not self.variance_weighting:
            return rng.choice(names)
        return rng.choices(names, weights=[weights[name] for name in names], k=1)[0]

    def _history(self, env: str) -> list[float]:
        record = self._windows.get(env)
        return record.reward_variances if record is not None else []

    # ---------------------------------------------------------------- checkpoint and metrics

    def state_dict(self) -> dict[str, Any]:
        """Windows, counters and variance histories as plain JSON-compatible data."""
        return {
            "version": STATE_VERSION,
            "envs": {name: asdict(record) for name, record in self._windows.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace every window with those in `state`. Hyperparameters stay this object's own
        (a resumed run may change them); histories longer than `variance_window` are trimmed."""
        version = state.get("version")
        if version != STATE_VERSION:
            raise ValueError(f"curriculum state version {version!r}; expected {STATE_VERSION}")
        windows = {}
        for name, fields in state["envs"].items():
            record = EnvWindow(**{**fields, "reward_variances": list(fields["reward_variances"])})
            del record.reward_variances[: -self.variance_window]
            windows[name] = record
        self._windows = windows

    def metrics(self) -> dict[str, float]:
        """`curriculum/<env>/low|high|accuracy` for every env seen.

        accuracy is that of the rollouts counted at `high` so far; before any rollout at the new
        `high` it is the accuracy of the last completed check, and 0.0 before anything counted.
        """
        out: dict[str, float] = {}
        for name, record in self._windows.items():
            if record.attempted > 0:
                accuracy = record.correct / record.attempted
            else:
                accuracy = record.last_accuracy if record.last_accuracy is not None else 0.0
            out[f"curriculum/{name}/low"] = float(record.low)
            out[f"curriculum/{name}/high"] = float(record.high)
            out[f"curriculum/{name}/accuracy"] = float(accuracy)
        return out


def _as_accuracy(value: bool | float) -> float:
    accuracy = float(value)
    if not 0.0 <= accuracy <= 1.0:  # also rejects NaN
        raise ValueError(f"an accuracy must be a bool or a float in [0, 1], got {value!r}")
    return accuracy
