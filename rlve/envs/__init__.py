"""Environments: the API (single-turn, multi-turn, tools), parsers, rubrics, the registry, and
the environments themselves (tic-tac-toe, reverse-text, double-check, calculator, and the
verifiable families under `gym/`), and those of other frameworks (`verifiers_env/`: verifiers
environments; `openenv/`: OpenEnv servers).

May import `rlve.curriculum` (stratified draws), `rlve.config` (argument checks) and
`rlve.types`; nothing here imports torch, so verifier workers start fast.
"""

from rlve.envs.base import Environment, MultiTurnEnv, SingleTurnEnv, State, build_dataset, stop
from rlve.envs.parsers import Parser, ThinkParser, XMLParser, extract_boxed
from rlve.envs.registry import (
    EnvironmentSource,
    expand_env_names,
    list_environments,
    load_environment,
    register_source,
)
from rlve.envs.rubric import Rubric
from rlve.envs.tools import StatefulToolEnv, ToolEnv, tool_schema

__all__ = [
    "Environment",
    "EnvironmentSource",
    "MultiTurnEnv",
    "Parser",
    "Rubric",
    "SingleTurnEnv",
    "State",
    "StatefulToolEnv",
    "ThinkParser",
    "ToolEnv",
    "XMLParser",
    "build_dataset",
    "expand_env_names",
    "extract_boxed",
    "list_environments",
    "load_environment",
    "register_source",
    "stop",
    "tool_schema",
]
