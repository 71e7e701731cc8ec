"""The reasoning-gym tasks that have a curriculum, as verifiable environments.

Difficulty d is the curriculum's global level (`set_global_level(d)`: every attribute at level d,
or at its top level when it has fewer). The problem is item 0 of the task's dataset built from
that level's configuration with `seed`. reasoning-gym scores an answer in [0, 1]; we map it to
the RLVE convention: reward = 2 * score - 1, accuracy = score >= 1.0, and an output without an
answer is a format failure (-1), the same reward as a score of 0.

Some scorers evaluate the answer: `sympy.parse_expr` (SYMPY_PARSED) or plain `eval` with
Python's builtins (EVAL_PARSED). Their answers are screened first; a refused one is a format
failure.
"""

from __future__ import annotations

import ast
import decimal
import functools
from dataclasses import asdict, fields
from enum import Enum
from typing import Any

from rlve.envs.gym.expression_screen import UnsafeExpression, screen_expression
from rlve.envs.gym.verifiable import Problem, Verdict, VerifiableEnv, json_copy

PREFIX = "reasoning-gym/"

SYMPY_PARSED = frozenset(
    {"simple_integration", "intermediate_integration", "polynomial_multiplication", "puzzle24",
     "countdown"}
)  # fmt: skip
"""tasks whose scorer runs `sympy.parse_expr` (which calls `eval`) on the answer"""

SCREEN_MAX_LENGTH = 20_000
"""longest answer let through to sympy (polynomial_multiplication's answers pass 3,700 chars
at level 3); the pool's time limit bounds what parsing a long one costs"""

EVAL_PARSED = frozenset({"string_insertion", "spiral_matrix", "binary_matrix", "n_queens"})
"""tasks whose scorer runs Python's `eval` on the answer (to read a list or a matrix)"""


def screen_python_literal(answer: str) -> str:
    """Let through a Python literal (whose `eval` does exactly what `ast.literal_eval` does) or
    text that cannot call anything (no parentheses, no dunders); UnsafeExpression otherwise."""
    try:
        ast.literal_eval(answer)
        return answer
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if "(" in answer or "__" in answer:
        raise UnsafeExpression("not a Python literal, and it could call a function")
    return answer


def task_names() -> list[str]:
    """Every reasoning-gym task with a curriculum."""
    from reasoning_gym.factory import CURRICULA

    return sorted(CURRICULA)


def _config(task: str, level: int, seed: int):
    from reasoning_gym.factory import create_curriculum

    curriculum = create_curriculum(task)
    curriculum.set_global_level(level)
    return curriculum.generate_configuration({"seed": seed, "size": 1})


@functools.lru_cache(maxsize=256)
def _dataset(task: str, level: int, seed: int):
    from reasoning_gym.factory import create_dataset

    config = _config(task, level, seed)
    # The configuration's own fields, passed back in: create_dataset builds and validates it.
    return create_dataset(task, **{f.name: getattr(config, f.name) for f in fields(config)})


def _plain(value: Any) -> Any:
    """A JSON-able copy for the record (tuples become lists, anything odd its repr)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, Enum):  # task-type enums: their value, not the class
        return _plain(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


class ReasoningGymEnv(VerifiableEnv):
    """One reasoning-gym task, by name (e.g. "basic_arithmetic")."""

    def __init__(self, task: str):
        if task not in task_names():
            raise ValueError(f"reasoning-gym has no task with a curriculum named {task!r}")
        self.task = task
        self.name = PREFIX + task

    def generate(self, seed: int, difficulty: int) -> Problem:
        # Some tasks set the global decimal precision; a fresh context per call keeps one
        # task's setting from changing another's problems (or its own regeneration).
        with decimal.localcontext(decimal.Context()):
            dataset = _dataset(self.task, difficulty, seed)
            entry = dataset[0]
        data = {
            "task": self.task,
            "level": difficulty,
            "seed": seed,
            # Scored from this copy when JSON keeps it intact, else regenerated exactly.
            "entry": json_copy(entry),
        }
        parameters = _plain(asdict(dataset.config))
        answer = entry.get("answer")
        return Problem(entry["question"], data, parameters, None if answer is None else str(answer))

    def check(self, problem: Problem, answer: str) -> Verdict:
        try:
            if self.task in SYMPY_PARSED:
                answer = screen_expression(answer, max_length=SCREEN_MAX_LENGTH)
            elif self.task in EVAL_PARSED:
                answer = screen_python_literal(answer)
        except UnsafeExpression as error:
            return self.format_failure(f"refused before eval: {error}")
        data = problem.data
        with decimal.localcontext(decimal.Context()):
            dataset = _dataset(self.task, data["level"], data["seed"])
            entry = data["entry"] if data.get("entry") is not None else dataset[0]
            score = float(dataset.score_answer(answer, entry))
        return self.verdict(2.0 * score - 1.0)
