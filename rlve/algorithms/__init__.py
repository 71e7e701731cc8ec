"""The RL trainer's math: group advantages, policy losses, KL, dynamic sampling, overlong shaping.

Pure functions on tensors and rollout groups; no model, device or config in here.
"""

from rlve.algorithms.advantages import group_advantages
from rlve.algorithms.dynamic_sampling import FilterResult, filter_groups
from rlve.algorithms.kl import kl_penalty
from rlve.algorithms.losses import LOSSES, LossStats, policy_loss, token_mean
from rlve.algorithms.overlong import overlong_penalty

__all__ = [
    "LOSSES",
    "FilterResult",
    "LossStats",
    "filter_groups",
    "group_advantages",
    "kl_penalty",
    "overlong_penalty",
    "policy_loss",
    "token_mean",
]
