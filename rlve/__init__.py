"""rlve: reinforcement learning for language models in verifiable, adaptive environments.

The public API: `load_environment`, `list_environments`, `evaluate` (with its `EvalResult`) and
`ScriptedEngine`. Training runs start from `python -m rlve.train`.
"""

from rlve.envs import list_environments, load_environment
from rlve.evaluation import EvalResult, evaluate
from rlve.inference.scripted import ScriptedEngine

__all__ = ["EvalResult", "ScriptedEngine", "evaluate", "list_environments", "load_environment"]
__version__ = "0.1.0"
