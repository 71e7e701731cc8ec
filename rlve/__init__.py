"""rlve: reinforcement learning for language models in verifiable, adaptive environments."""

from rlve.envs import list_environments, load_environment
from rlve.evaluate import EvalResult, evaluate

__all__ = ["EvalResult", "evaluate", "list_environments", "load_environment"]
__version__ = "0.1.0"
