"""Finding environments by name: built-in ones, installed packages, and whole families.

`load_environment("tictactoe", max_turns=8)` imports the environment's module and calls its
`load_environment(**kwargs)`. Installed packages register theirs under the entry point group
`rlve.environments` (`name = "package.module:load_environment"`). Families of generated
environments (e.g. `rlve-gym/<Identifier>`) plug in as sources that list and load many names.
Environments written for other frameworks load through a scheme: `verifiers:MODULE`, and the
built-in `openenv` (an OpenEnv server given by its URL). An environment of your own needs no
install: `my_pkg.games:load_environment` names the function that builds it, imported from
sys.path (which holds the current directory under `python -m`).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from rlve.envs.base import Environment
from rlve.envs.gym.sources import gym_families

ENTRY_POINT_GROUP = "rlve.environments"

BUILTIN: dict[str, str] = {
    "tictactoe": "rlve.envs.tictactoe:load_environment",
    "agent": "rlve.envs.agent:load_environment",
    "reverse_text": "rlve.envs.reverse_text:load_environment",
    "double_check": "rlve.envs.double_check:load_environment",
    "running_sum": "rlve.envs.running_sum:load_environment",
    "vowels": "rlve.envs.vowels:load_environment",
    "calculator": "rlve.envs.calculator:load_environment",
    "mcp/notes": "rlve.envs.mcp.notes:load_environment",
    "wiki_search": "rlve.envs.wiki:load_environment",
    "python_repl/ledger": "rlve.envs.repl.ledger:load_environment",
    "openenv": "rlve.envs.openenv:load_environment",
}

SCHEMES: dict[str, str] = {
    "verifiers:": "rlve.envs.verifiers_env:load_verifiers_environment",
}
"""name prefixes of environments that come from other frameworks: `verifiers:MODULE` loads
MODULE's verifiers environment; the whole name goes to the loader"""


@dataclass(frozen=True)
class EnvironmentSource:
    """A family of environments whose names share a prefix, e.g. `rlve-gym/`."""

    prefix: str
    names: Callable[[], Iterable[str]]
    """all the names of the family, prefix included"""
    load: Callable[..., Environment]
    """load(name, **kwargs) for one name of the family"""


_SOURCES: list[EnvironmentSource] = []


def register_source(source: EnvironmentSource) -> None:
    """Make a family of environments loadable by name (replaces one with the same prefix)."""
    _SOURCES[:] = [s for s in _SOURCES if s.prefix != source.prefix]
    _SOURCES.append(source)


def _installed() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def list_environments() -> list[str]:
    """Every environment name `load_environment` accepts."""
    names = set(BUILTIN) | set(_installed())
    for source in _SOURCES:
        names.update(source.names())
    return sorted(names)


def _import(target: str) -> Callable[..., Environment]:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr or "load_environment")


def _check_kwargs(name: str, loader: Callable, kwargs: dict) -> None:
    params = inspect.signature(loader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise TypeError(
            f"environment {name!r} has no argument(s) {unknown}; its arguments are {sorted(params)}"
        )


def is_module_path(name: str) -> bool:
    """Whether `name` is the `module:function` form (not a scheme such as `verifiers:`)."""
    return ":" in name and not name.startswith(tuple(SCHEMES))


def _from_module(name: str) -> Callable[..., Environment]:
    """The function `module:function` names; ValueError names what is wrong with it."""
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute or ":" in attribute:
        raise ValueError(
            f"environment {name!r}: an environment of your own is named "
            "'package.module:function', e.g. 'my_pkg.games:load_environment'"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not f"{module_name}.".startswith(f"{exc.name}."):
            raise  # the module was found, and an import inside it failed: its own error says what
        top = module_name.split(".")[0]
        raise ValueError(
            f"environment {name!r}: no module {exc.name!r} on sys.path. Make it importable: run "
            f"from the folder that holds {top}.py or {top}/ (`python -m rlve.train` puts the "
            "current directory on sys.path), add that folder to PYTHONPATH, or `pip install -e` "
            "the package that holds it"
        ) from exc
    if not hasattr(module, attribute):
        raise ValueError(
            f"environment {name!r}: module {module_name!r} ({module.__file__}) has no "
            f"attribute {attribute!r}"
        )
    fn = getattr(module, attribute)
    if not callable(fn):
        raise ValueError(
            f"environment {name!r}: {module_name}.{attribute} is a {type(fn).__name__}, not a "
            "function that returns an Environment"
        )
    return fn


def _loader(name: str) -> Callable[..., Environment]:
    for scheme, target in SCHEMES.items():
        if name.startswith(scheme):
            return functools.partial(_import(target), name)
    for source in _SOURCES:
        if name.startswith(source.prefix):
            return functools.partial(source.load, name)
    if name in BUILTIN:
        return _import(BUILTIN[name])
    installed = _installed()
    if name in installed:
        return installed[name].load()  # type: ignore[attr-defined]
    if is_module_path(name):
        return _from_module(name)
    known = list_environments()
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    hint = f"; did you mean {close}?" if close else ""
    raise ValueError(
        f"unknown environment {name!r}{hint} ({len(known)} known: see list_environments(); "
        "or 'package.module:function' for one of your own)"
    )


def load_environment(name: str, **kwargs) -> Environment:
    """The environment called `name` (a known name, or `package.module:function`), built with
    `kwargs`; unknown names list the close matches."""
    loader = _loader(name)
    if not isinstance(loader, functools.partial):
        _check_kwargs(name, loader, kwargs)
    env = loader(**kwargs)
    if not isinstance(env, Environment):
        raise TypeError(f"the loader of {name!r} returned {type(env).__name__}, not an Environment")
    env.name = name
    return env


def expand_env_names(patterns: Iterable[str]) -> list[str]:
    """Environment names matching each pattern (fnmatch globs such as `rlve-gym/Sort*`, or
    exact names), in pattern order without repeats. ValueError names a pattern that matches
    nothing."""
    known = list_environments()
    found: list[str] = []
    for pattern in patterns:
        if pattern.startswith(tuple(SCHEMES)) or is_module_path(pattern):  # never listed
            matches = [pattern]
        else:
            matches = (
                fnmatch.filter(known, pattern)
                if _is_glob(pattern)
                else [pattern] * (pattern in known)
            )
        if not matches:
            close = difflib.get_close_matches(pattern, known, n=5, cutoff=0.6)
            hint = f"; close names: {close}" if close else ""
            raise ValueError(f"environment pattern {pattern!r} matches no environment{hint}")
        found.extend(m for m in matches if m not in found)
    return found


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


for _prefix, _names, _load in gym_families():  # rlve-gym/, reasoning-gym/, rlve/
    register_source(EnvironmentSource(_prefix, _names, _load))
