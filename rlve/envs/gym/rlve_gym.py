"""The 400 RLVE-Gym environments (package `rlve-gym`, module `Gym`) as verifiable environments.

Difficulty d is the environment's parameter controller after d calls of `update()`; the problem's
parameters are drawn from that level's `get_parameter_list()` with `random.Random(seed)`, and
`env.generator(seed, parameter)` fills in the rest. The verifier is upstream's own (`verifier`
returns reward in [-1, 1], accuracy against the problem's passing threshold, format_score).
Gym is imported on first use: listing names or unpickling an adapter does not import it.
"""

from __future__ import annotations

import copy
import functools
import random
from typing import Any

from rlve.envs.gym.expression_screen import UnsafeExpression, screen_expression
from rlve.envs.gym.verifiable import (
    GenerationFailed,
    Problem,
    Verdict,
    VerifiableEnv,
    json_copy,
)

PREFIX = "rlve-gym/"

SYMPY_PARSED = frozenset({"Differentiate", "Integral"})
"""environments whose verifier runs `sympy.sympify` on the answer (which calls `eval`): their
answers are screened with `screen_expression` first. (Countdown's `eval` is guarded upstream by
a digits-and-operators regex; its cost, e.g. 9**9**9, is bounded by the pool's time limit.)
The screen's length limit is upstream's own for these two (10,000 characters)."""

GENERATION_TIMEOUT_S = 10
"""upstream's own generation time limit (a thread timeout inside `generator`)"""


@functools.cache
def _gym_tables() -> tuple[dict[str, type], dict[str, type]]:
    from Gym.environments import identifier2environment
    from Gym.parameter_controllers import identifier2controller

    return identifier2environment, identifier2controller


def identifiers() -> list[str]:
    """Every RLVE-Gym identifier that has both an environment and a parameter controller."""
    environments, controllers = _gym_tables()
    return sorted(set(environments) & set(controllers))


@functools.lru_cache(maxsize=4096)
def _parameter_list(identifier: str, difficulty: int) -> tuple[dict[str, Any], ...]:
    controller = _gym_tables()[1][identifier]()
    for _ in range(difficulty):
        controller.update()
    return tuple(copy.deepcopy(controller.get_parameter_list()))


class RlveGymEnv(VerifiableEnv):
    """One RLVE-Gym environment, by identifier (e.g. "Sorting")."""

    def __init__(self, identifier: str):
        if identifier not in _gym_tables()[0]:
            raise ValueError(f"RLVE-Gym has no environment {identifier!r}")
        self.identifier = identifier
        self.name = PREFIX + identifier

    def parameter(self, seed: int, difficulty: int) -> dict[str, Any]:
        """The initial parameters of the problem (before the generator adds its own)."""
        choices = _parameter_list(self.identifier, difficulty)
        if not choices:
            raise GenerationFailed(f"{self.name} has no parameters at difficulty {difficulty}")
        return copy.deepcopy(random.Random(seed).choice(choices))

    def _generated(self, seed: int, parameter: dict[str, Any]):
        gym_env = _gym_tables()[0][self.identifier]()
        if not gym_env.generator(seed, parameter, timeout_second=GENERATION_TIMEOUT_S):
            raise GenerationFailed(f"{self.name} generator failed for seed {seed}")
        return gym_env

    def generate(self, seed: int, difficulty: int) -> Problem:
        parameter = self.parameter(seed, difficulty)
        gym_env = self._generated(seed, parameter)
        prompt = gym_env.prompt_generator()
        config = gym_env.get_config()
        reference = config["parameter"].get("reference_answer")
        data = {
            "identifier": self.identifier,
            "seed": seed,
            "parameter": parameter,
            # The verifier uses the generated config when JSON keeps it intact; otherwise it
            # regenerates from (seed, parameter), which upstream makes deterministic.
            "config": json_copy(config),
        }
        parameters = json_copy(parameter)
        if parameters is None:
            parameters = {"repr": repr(parameter)}
        return Problem(prompt, data, parameters, None if reference is None else str(reference))

    def check(self, problem: Problem, answer: str) -> Verdict:
        if self.identifier in SYMPY_PARSED:
            try:
                answer = screen_expression(answer, max_length=10_000)
            except UnsafeExpression as error:
                return self.format_failure(f"refused before sympy: {error}")
        data = problem.data
        if data.get("config") is not None:
            gym_env = _gym_tables()[0][self.identifier]()
            gym_env.set_config(copy.deepcopy(data["config"]))
        else:
            gym_env = self._generated(data["seed"], copy.deepcopy(data["parameter"]))
        # Upstream extracts the answer itself, from the last pair of its answer markers.
        opening, closing = gym_env.answer_markers
        result = gym_env.verifier(f"{opening}{answer}{closing}")
        return Verdict(
            reward=float(result["reward"]),
            accuracy=bool(result["accuracy"]),
            format_ok=bool(result["format_score"]),
        )
