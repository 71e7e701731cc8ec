"""Drawing the problems of each training step from a mixture of environments.

Per problem: choose an environment (uniformly, by configured weights, or by the controller's
variance weights), then an example: the next one of the environment's shuffled dataset, or, for
environments that generate problems on the fly (`make_example(seed, difficulty)`) under an
adaptive curriculum, a fresh problem at a difficulty drawn from the controller's window. A
generator that raises or runs past its time limit costs one draw: the failure is kept as a
`generator_error` fault and the next draw replaces the problem. The sampler's whole state (rng,
dataset cursors) is checkpointed so a resumed run draws on exactly where it stopped.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from rlve.curriculum.controller import DifficultyController
from rlve.envs.base import Environment
from rlve.envs.gym.verifiable import EnvironmentDisabled, call_with_timeout
from rlve.inference.engine import SamplingConfig
from rlve.rollout.runner import GroupJob
from rlve.types import Example, Fault, RolloutGroup

log = logging.getLogger(__name__)

MAX_FAILED_DRAWS = 20
"""generator failures in a row after which drawing stops with an error (nothing generates)"""


def is_adaptive(env: Environment) -> bool:
    """Whether the environment generates problems at a chosen difficulty."""
    return callable(getattr(env, "make_example", None))


class ProblemSampler:
    """An endless, resumable stream of `GroupJob`s over a mixture of environments."""

    def __init__(
        self,
        envs: Mapping[str, Environment],
        weights: Mapping[str, float] | None = None,
        controller: DifficultyController | None = None,
        sampling: Mapping[str, SamplingConfig] | None = None,
        seed: int = 0,
    ):
        if not envs:
            raise ValueError("the mixture needs at least one environment")
        self.envs = dict(envs)
        self.names = sorted(self.envs)
        self.weights = [float((weights or {}).get(n, 1.0)) for n in self.names]
        self.controller = controller
        self.sampling = dict(sampling or {})
        self.seed = seed
        self.rng = random.Random(seed)
        self.cursor = {name: 0 for name in self.names}
        self.drawn = 0
        self.disabled: list[str] = []
        self.generator_faults: list[Fault] = []
        """generators' failures since the last `take_generator_faults()`"""

    def _choose_env(self) -> str:
        if self.controller is not None and self.controller.variance_weighting:
            return self.controller.choose_env(self.names, self.rng)
        return self.rng.choices(self.names, weights=self.weights)[0]

    def _dataset_example(self, name: str):
        env = self.envs[name]
        position = self.cursor[name]
        self.cursor[name] += 1
        epoch, index = divmod(position, len(env))
        # A fresh shuffle per epoch, derived from the seed: the order never needs storing.
        order = list(range(len(env)))
        random.Random(f"{self.seed}-{name}-{epoch}").shuffle(order)
        return env.example(order[index])

    def draw(self, count: int, time_limit_s: float | None = None) -> list[GroupJob]:
        """The next `count` problems. A generator that raises, or runs past `time_limit_s`, is
        replaced by the next draw; the replacement comes from the same rng, so a resumed run
        draws it too. A generator past its limit is left running in a daemon thread (Python
        cannot stop a thread); its problem, if it ever comes, is dropped."""
        jobs: list[GroupJob] = []
        failed = 0
        while len(jobs) < count:
            name = self._choose_env()
            env = self.envs[name]
            problem_seed = self.rng.randrange(2**31)
            if self.controller is not None and is_adaptive(env):
                difficulty = self.controller.sample(name, self.rng)
                try:
                    example = _generate(env, problem_seed, difficulty, time_limit_s)
                except EnvironmentDisabled as disabled:
                    self._disable(name, disabled)
                    continue
                except Exception as error:  # one bad problem must not stop the run
                    failed += 1
                    self._generator_failed(name, problem_seed, difficulty, error, failed)
                    continue
            else:
                example = self._dataset_example(name)
            jobs.append(GroupJob(env, example, problem_seed, self.sampling.get(name)))
            self.drawn += 1
            failed = 0
        return jobs

    def _generator_failed(
        self, name: str, seed: int, difficulty: int, error: Exception, in_a_row: int
    ) -> None:
        message = f"{name} (seed {seed}, difficulty {difficulty}): {type(error).__name__}: {error}"
        log.warning("problem generator failed, drawing another problem: %s", message)
        self.generator_faults.append(Fault("generator_error", message))
        if in_a_row >= MAX_FAILED_DRAWS:
            raise RuntimeError(f"{in_a_row} problem generators failed in a row; last: {message}")

    def take_generator_faults(self) -> list[Fault]:
        """The generators' failures since the last call (for the step's metrics)."""
        faults, self.generator_faults = self.generator_faults, []
        return faults

    def _disable(self, name: str, reason: Exception) -> None:
        """Drop an environment whose generator keeps failing; the run goes on without it."""
        log.warning("disabling environment %s for this run: %s", name, reason)
        self._drop(name)
        if not self.names:
            raise RuntimeError(f"every environment of the mixture is disabled (last: {reason})")

    def _drop(self, name: str) -> None:
        index = self.names.index(name)
        del self.names[index], self.weights[index]
        self.disabled.append(name)

    def observe(self, groups: Sequence[RolloutGroup]) -> None:
        """Feed finished groups (kept or dropped) to the curriculum controller: their clean
        rollouts only (a timeout or an engine error is not a wrong answer)."""
        if self.controller is None:
            return
        for group in groups:
            env = self.envs[group.env_name]
            if not is_adaptive(env) or group.difficulty is None or not group.clean:
                continue
            self.controller.observe(
                group.env_name,
                int(group.difficulty),
                [env.accuracy(t) for t in group.clean],
                rewards=group.rewards,
            )

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "rng": [version, list(internal), gauss],
            "cursor": dict(self.cursor),
            "drawn": self.drawn,
            "disabled": list(self.disabled),
            "controller": self.controller.state_dict() if self.controller else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.cursor.update(state["cursor"])
        self.drawn = state["drawn"]
        for name in state.get("disabled", []):
            if name in self.names:
                self._drop(name)
        if self.controller is not None and state.get("controller") is not None:
            self.controller.load_state_dict(state["controller"])


def _generate(env: Environment, seed: int, difficulty: int, time_limit_s: float | None) -> Example:
    make = partial(env.make_example, seed=seed, difficulty=difficulty)
    return make() if time_limit_s is None else call_with_timeout(make, time_limit_s)
