"""rlve: reinforcement learning for language models in verifiable, adaptive environments.

The public API: `load_environment`, `list_environments`, `evaluate` (with its `EvalResult`) and
`ScriptedEngine`. Training runs start from `python -m rlve.train`.

The names are imported on first use, so that small helper processes (the run's watchdog) can
import `rlve.*` modules without loading the environments and torch.
"""

from importlib import import_module

_PUBLIC = {
    "EvalResult": "rlve.evaluation",
    "ScriptedEngine": "rlve.inference.scripted",
    "evaluate": "rlve.evaluation",
    "list_environments": "rlve.envs",
    "load_environment": "rlve.envs",
}

__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'rlve' has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name]), name)
