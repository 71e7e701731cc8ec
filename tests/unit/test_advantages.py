"""Group advantages and credit on rewards whose means and stds can be checked by hand."""

import math

import pytest
import torch

from rlve.algorithms import group_advantages
from rlve.algorithms.credit import assign_credit
from rlve.types import Trajectory


def test_centered_and_std_normalized_by_hand():
    # Rewards [1, 0, 0, 1]: mean 0.5; Bessel std = sqrt((4 * 0.25) / 3) = sqrt(1/3) = 0.57735;
    # 0.5 / 0.57735 = 0.8660.
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    centered = group_advantages(rewards, std_normalize=False)
    normalized = group_advantages(rewards, std_normalize=True, eps=0.0)
    torch.testing.assert_close(centered, torch.tensor([[0.5, -0.5, -0.5, 0.5]]))
    half_sqrt3 = math.sqrt(3) / 2  # 0.8660
    torch.testing.assert_close(
        normalized, torch.tensor([[half_sqrt3, -half_sqrt3, -half_sqrt3, half_sqrt3]])
    )


def test_eps_is_added_to_the_std():
    # 0.5 / (sqrt(1/3) + 0.1) = 0.5 / 0.67735 = 0.73817
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    advantages = group_advantages(rewards, std_normalize=True, eps=0.1)
    assert advantages[0, 0].item() == pytest.approx(0.5 / (math.sqrt(1 / 3) + 0.1), abs=1e-12)


def test_groups_are_independent():
    # Group 0: [2, 4] -> mean 3 -> [-1, 1]; group 1: [0, 10] -> mean 5 -> [-5, 5].
    rewards = torch.tensor([[2.0, 4.0], [0.0, 10.0]])
    advantages = group_advantages(rewards, std_normalize=False)
    torch.testing.assert_close(advantages, torch.tensor([[-1.0, 1.0], [-5.0, 5.0]]))
    # With std: both groups have std = |a - b| / sqrt(2), so both become [-1/sqrt2, 1/sqrt2].
    normalized = group_advantages(rewards, std_normalize=True, eps=0.0)
    r = 1 / math.sqrt(2)
    torch.testing.assert_close(normalized, torch.tensor([[-r, r], [-r, r]]))


@pytest.mark.parametrize("std_normalize", [False, True])
def test_group_of_one_gets_zero(std_normalize):
    advantages = group_advantages(torch.tensor([[0.7], [1.0]]), std_normalize=std_normalize)
    assert advantages.tolist() == [[0.0], [0.0]]


@pytest.mark.parametrize("std_normalize", [False, True])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_all_equal_group_gets_exact_zero(std_normalize, eps):
    # 0.1 is not exact in binary, so a naive mean could leave ~1e-17 residues; the result is 0.
    rewards = torch.tensor([[0.1, 0.1, 0.1], [1.0, 0.0, 0.5]])
    advantages = group_advantages(rewards, std_normalize=std_normalize, eps=eps)
    assert advantages[0].tolist() == [0.0, 0.0, 0.0]
    assert advantages[1, 0].item() == pytest.approx(0.5 if not std_normalize else 1.0, abs=1e-5)


def test_integer_rewards_become_float():
    advantages = group_advantages(torch.tensor([[1, 0]]), std_normalize=False)
    assert advantages.dtype == torch.get_default_dtype()
    assert advantages.tolist() == [[0.5, -0.5]]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_reward_names_the_group(bad):
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [bad, 1.0]])
    with pytest.raises(ValueError, match="group 2"):
        group_advantages(rewards, std_normalize=True)


def test_rejects_wrong_rank_and_negative_eps():
    with pytest.raises(ValueError, match="num_groups, group_size"):
        group_advantages(torch.zeros(4), std_normalize=False)
    with pytest.raises(ValueError, match="eps"):
        group_advantages(torch.zeros(1, 2), std_normalize=True, eps=-1.0)


def test_lr_schedule_by_hand():
    from rlve.algorithms.schedule import lr_multiplier

    cosine = dict(schedule="cosine", warmup_steps=4, max_steps=14, min_lr_ratio=0.1)
    # warmup: (step + 1) / 4
    assert [lr_multiplier(s, **cosine) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    # cosine over the 10 steps after warmup: halfway (step 9) gives 0.1 + 0.9 * 0.5 = 0.55
    assert lr_multiplier(9, **cosine) == pytest.approx(0.55)
    assert lr_multiplier(14, **cosine) == pytest.approx(0.1)
    assert lr_multiplier(99, **cosine) == pytest.approx(0.1)
    constant = dict(schedule="constant", warmup_steps=0, max_steps=10, min_lr_ratio=0.0)
    assert lr_multiplier(7, **constant) == 1.0
    with pytest.raises(ValueError, match="schedule must be one of"):
        lr_multiplier(0, schedule="linear", warmup_steps=0, max_steps=1, min_lr_ratio=0.0)


def _episode(reward: float, turn_rewards: list[float] | None = None) -> Trajectory:
    """Seven tokens: a two-token prompt, turn one at 2-3, a reply at 4, turn two at 5-6."""
    return Trajectory(prompt=[], completion=[], token_ids=[1, 2, 3, 4, 5, 6, 7],
                      loss_mask=[0, 0, 1, 1, 0, 1, 1], turn_spans=[(2, 4), (5, 7)],
                      reward=reward, turn_rewards=turn_rewards or [])  # fmt: skip


def test_whole_episode_credit_is_the_reward_against_the_roster_mean():
    credits = assign_credit([_episode(1.0), _episode(0.0)], std_normalize=False)
    assert [c.advantage for c in credits] == [0.5, -0.5]
    assert [c.token_advantages for c in credits] == [None, None]


def test_per_turn_credit_puts_each_turn_s_return_against_the_other_rollouts_turns():
    # gamma 0: a turn's return is what it earned; what the turns do not claim (the reward minus
    # their sum) is earned at the last turn. Returns: rollout 0 (0.2, 1.0 - 0.2 = 0.8), rollout 1
    # (-0.2, 0.0 + 0.2 = 0.2); turn means 0.0 and 0.5, so turn advantages (0.2, 0.3), (-0.2, -0.3).
    rollouts = [_episode(1.0, [0.2, 0.0]), _episode(0.0, [-0.2, 0.0])]
    credits = assign_credit(rollouts, std_normalize=False, turn_gamma=0.0)
    assert [c.advantage for c in credits] == [0.5, -0.5]
    assert credits[0].token_advantages == pytest.approx([0, 0, 0.2, 0.2, 0, 0.3, 0.3])
    assert credits[1].token_advantages == pytest.approx([0, 0, -0.2, -0.2, 0, -0.3, -0.3])
