"""Every configuration of rlve, as dataclasses with one docstring under each field.

`RunConfig` is the schema of `python -m rlve.train` (Hydra fills it from `rlve/configs/` and the
command line); its parts: `TrainerConfig`, `InferenceConfig` (vLLM), `RolloutConfig`, `EnvConfig`
(with `CurriculumConfig`), `LoggingConfig`. Each `validate()` raises ValueError naming the field
and its allowed range, so a bad value fails at start, not in the middle of a run.

May import `rlve.sync.placement` and, inside `validate`, `rlve.algorithms` (the tables of losses
and schedules): only there, so that importing this module stays free of torch (environments
import `require`, and verifier workers import environments).
"""

from rlve.config.checks import is_int, require, require_choice
from rlve.config.inference import InferenceConfig
from rlve.config.run import (
    CurriculumConfig,
    EnvConfig,
    LoggingConfig,
    RolloutConfig,
    RunConfig,
)
from rlve.config.trainer import LoraConfig, TrainerConfig

__all__ = [
    "CurriculumConfig",
    "EnvConfig",
    "InferenceConfig",
    "LoggingConfig",
    "LoraConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainerConfig",
    "is_int",
    "require",
    "require_choice",
]
