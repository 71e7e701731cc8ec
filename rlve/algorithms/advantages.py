"""Group-relative advantages: each rollout's reward compared with the other rollouts of its prompt.

This replaces a learned value function (GRPO, Shao et al. 2024, DeepSeekMath section 4.1.2).
"""

from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, *, std_normalize: bool, eps: float = 1e-6) -> Tensor:
    """Advantage of every rollout relative to its group.

    A_i = R_i - mean(R_group), and with `std_normalize` A_i / (std(R_group) + eps), the outcome
    supervision advantage of GRPO (Shao et al. 2024, section 4.1.2). Dr. GRPO and CISPO recipes
    turn the std division off because it over-weights groups that are nearly all right or all
    wrong. The std is the sample std (Bessel's correction, as `torch.std`).

    Args:
        rewards: [num_groups, group_size] rewards, one row per prompt.
        std_normalize: divide by the group's std (+ eps).
        eps: keeps the division finite; must be >= 0.

    Returns:
        [num_groups, group_size] advantages in the rewards' floating dtype. A group of one and a
        group whose rewards are all equal get advantage 0 (no relative signal), in both modes.

    Raises:
        ValueError: rewards not 2-D, eps < 0, or a group holding NaN/inf (named by its index).
    """
    if rewards.dim() != 2:
        raise ValueError(
            f"rewards must be [num_groups, group_size], got shape {tuple(rewards.shape)}"
        )
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    finite_groups = torch.isfinite(rewards).all(dim=1)
    if not bool(finite_groups.all()):
        bad = int((~finite_groups).nonzero()[0].item())
        raise ValueError(f"rewards of group {bad} are not finite: {rewards[bad].tolist()}")

    if rewards.shape[1] < 2:
        # The std of one sample is undefined, and a lone rollout has nothing to be compared with.
        return torch.zeros_like(rewards)
    # Float rounding in the mean can leave an all-equal group with tiny nonzero advantages (and
    # then divide them by a tiny std); such a group carries no signal, so it is exactly zero.
    has_signal = rewards.amax(dim=1, keepdim=True) != rewards.amin(dim=1, keepdim=True)
    centered = torch.where(
        has_signal, rewards - rewards.mean(dim=1, keepdim=True), torch.zeros_like(rewards)
    )
    if not std_normalize:
        return centered
    std = rewards.std(dim=1, keepdim=True)
    return torch.where(has_signal, centered / (std + eps), torch.zeros_like(centered))


ADVANTAGES = ("group", "maxrl")
"""how a group's rewards become advantages (TrainerConfig.advantage)"""


def maxrl_advantages(rewards: Tensor) -> Tensor:
    """MaxRL ("Maximum Likelihood Reinforcement Learning", arXiv 2602.02710): for 0/1 rewards,
    A_i = (R_i - p) / p with p the group's success rate, the gradient of log p (maximum
    likelihood of a success) where GRPO's R_i - p is that of p: a prompt solved once in n
    rollouts weighs n times one always solved. A correct sample gets (1 - p) / p, a wrong one -1.

    Args:
        rewards: [num_groups, group_size], each 0 or 1.

    Returns:
        [num_groups, group_size] advantages in the rewards' floating dtype; 0 for a group that
        never succeeded (log p has no gradient there to follow), one that always did, and a
        group of one.

    Raises:
        ValueError: rewards not 2-D, or a group holding a value other than 0 and 1 (named by its
            index and values): the paper's estimator is for binary outcomes and does not extend
            to other values.
    """
    if rewards.dim() != 2:
        raise ValueError(
            f"rewards must be [num_groups, group_size], got shape {tuple(rewards.shape)}"
        )
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    binary = ((rewards == 0) | (rewards == 1)).all(dim=1)
    if not bool(binary.all()):
        bad = int((~binary).nonzero()[0].item())
        raise ValueError(
            f"trainer.advantage=maxrl needs rewards of 0 or 1 (MaxRL's estimator is for binary "
            f"outcomes); group {bad} has {rewards[bad].tolist()}: use an environment whose reward "
            "is binary (no shaping such as the overlong penalty), or trainer.advantage=group"
        )
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    p = rewards.mean(dim=1, keepdim=True)
    return torch.where(p > 0, (rewards - p) / p.clamp(min=1e-12), torch.zeros_like(rewards))
