"""The RL trainer's math: group advantages, policy losses, KL, dynamic sampling, overlong shaping,
learning-rate schedules, and packing rollouts into micro-batches.

Pure functions on tensors and rollout groups, testable on a CPU: no model, device or config in
here. May import `rlve.types` and nothing else of rlve.
"""

from rlve.algorithms.advantages import group_advantages
from rlve.algorithms.dppo import dppo_outside  # and registers "dppo_tv", "dppo_kl"
from rlve.algorithms.dynamic_sampling import FilterResult, filter_groups
from rlve.algorithms.kl import kl_penalty
from rlve.algorithms.loss_inputs import TIS_MODES, check_hyperparameters
from rlve.algorithms.loss_registry import LOSSES, LossTerms, find_loss, register_loss
from rlve.algorithms.losses import LossStats, policy_loss, token_mean
from rlve.algorithms.overlong import overlong_penalty, turn_overlong_penalties
from rlve.algorithms.schedule import SCHEDULES, lr_multiplier
from rlve.algorithms.sequence_losses import sequence_means  # and registers "gspo", "gmpo"

__all__ = [
    "LOSSES",
    "SCHEDULES",
    "TIS_MODES",
    "FilterResult",
    "LossStats",
    "LossTerms",
    "check_hyperparameters",
    "dppo_outside",
    "filter_groups",
    "find_loss",
    "group_advantages",
    "kl_penalty",
    "lr_multiplier",
    "overlong_penalty",
    "turn_overlong_penalties",
    "policy_loss",
    "register_loss",
    "sequence_means",
    "token_mean",
]
