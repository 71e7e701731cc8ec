"""The verifiable environment families, by name, for the registry.

Three families: `rlve-gym/<Identifier>` (400), `reasoning-gym/<task>` (the tasks with a
curriculum) and our own `rlve/<name>`. `load_environment("rlve-gym/Sorting", difficulties=[0,
1])` builds a `VerifiableSingleTurnEnv`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from typing import Any

from rlve.envs.gym.verifiable import VerifiableEnv


@functools.cache
def _rlve_gym_names() -> list[str]:
    from rlve.envs.gym.rlve_gym import PREFIX, identifiers

    return [PREFIX + identifier for identifier in identifiers()]


@functools.cache
def _reasoning_gym_names() -> list[str]:
    from rlve.envs.gym.reasoning_gym import PREFIX, task_names

    return [PREFIX + task for task in task_names()]


@functools.cache
def _builtin_names() -> list[str]:
    from rlve.envs.gym.builtin import BUILTIN_ENVS

    return sorted(BUILTIN_ENVS)


def verifiable_env(name: str) -> VerifiableEnv:
    """The verifiable environment called `name` (any family); ValueError with close matches."""
    if name.startswith("rlve-gym/"):
        from rlve.envs.gym.rlve_gym import RlveGymEnv

        family, make = _rlve_gym_names, lambda: RlveGymEnv(name.removeprefix("rlve-gym/"))
    elif name.startswith("reasoning-gym/"):
        from rlve.envs.gym.reasoning_gym import ReasoningGymEnv

        family, make = _reasoning_gym_names, lambda: ReasoningGymEnv(name.split("/", 1)[1])
    else:
        from rlve.envs.gym.builtin import BUILTIN_ENVS

        family, make = _builtin_names, lambda: BUILTIN_ENVS[name]()
    known = family()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
        raise ValueError(f"unknown verifiable environment {name!r}; did you mean {close}?")
    return make()


def _loader(name: str, **kwargs):
    from rlve.envs.gym.wrapper import VerifiableSingleTurnEnv

    return VerifiableSingleTurnEnv(verifiable_env(name), **kwargs)


def gym_families() -> list[tuple[str, Callable[[], Iterable[str]], Callable[..., Any]]]:
    """(prefix, names, load) of each family; `rlve.envs.registry` registers them as sources."""
    return [
        ("rlve-gym/", _rlve_gym_names, _loader),
        ("reasoning-gym/", _reasoning_gym_names, _loader),
        ("rlve/", _builtin_names, _loader),
    ]
