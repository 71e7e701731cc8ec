"""Drawing the problems of each training step from a mixture of environments.

Per problem: choose an environment (uniformly, by configured weights, or by the controller's
variance weights), then an example: the next one of the environment's shuffled dataset, or, for
environments that generate problems on the fly (`make_example(seed, difficulty)`) under an
adaptive curriculum, a fresh problem at a difficulty drawn from the controller's window. The
sampler's whole state (rng, dataset cursors) is checkpointed so a resumed run draws on exactly
where it stopped.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from rlve.curriculum.controller import DifficultyController
from rlve.envs.base import Environment
from rlve.envs.gym.verifiable import EnvironmentDisabled
from rlve.inference.engine import SamplingConfig
from rlve.rollout.runner import GroupJob
from rlve.types import RolloutGroup

log = logging.getLogger(__name__)


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

    def draw(self, count: int) -> list[GroupJob]:
        """The next `count` problems."""
        jobs: list[GroupJob] = []
        while len(jobs) < count:
            name = self._choose_env()
            env = self.envs[name]
            problem_seed = self.rng.randrange(2**31)
            if self.controller is not None and is_adaptive(env):
                difficulty = self.controller.sample(name, self.rng)
                try:
                    example = env.make_example(seed=problem_seed, difficulty=difficulty)
                except EnvironmentDisabled as disabled:
                    self._disable(name, disabled)
                    continue
            else:
                example = self._dataset_example(name)
            jobs.append(GroupJob(env, example, problem_seed, self.sampling.get(name)))
            self.drawn += 1
        return jobs

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
        """Feed finished groups (kept or dropped) to the curriculum controller."""
        if self.controller is None:
            return
        for group in groups:
            env = self.envs[group.env_name]
            if not is_adaptive(env) or group.difficulty is None:
                continue
            self.controller.observe(
                group.env_name,
                int(group.difficulty),
                [env.accuracy(t) for t in group.trajectories],
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
