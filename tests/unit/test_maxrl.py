"""MaxRL's advantage (rlve/algorithms/advantages.py, `trainer.advantage=maxrl`): (R - p) / p for
0/1 rewards, on groups a reader can compute by hand."""

import pytest
import torch

from rlve.algorithms.advantages import group_advantages, maxrl_advantages
from rlve.algorithms.credit import assign_credit
from rlve.types import Trajectory


def test_one_success_in_four_by_hand():
    # p = 1/4: the success gets (1 - 1/4) / (1/4) = 3, each failure (0 - 1/4) / (1/4) = -1
    advantages = maxrl_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    assert advantages.tolist() == [[3.0, -1.0, -1.0, -1.0]]


@pytest.mark.parametrize("successes", [1, 2, 3, 4, 5, 6, 7])
def test_a_group_with_success_rate_p_weighs_its_successes_1_over_p_times_grpo_s(successes):
    rewards = torch.tensor([[1.0] * successes + [0.0] * (8 - successes)], dtype=torch.float64)
    p = successes / 8
    maxrl = maxrl_advantages(rewards)[0]
    grpo = group_advantages(rewards, std_normalize=False)[0]  # R - p
    assert maxrl[0].item() == pytest.approx(grpo[0].item() / p, rel=1e-12)  # (1 - p) / p
    assert maxrl[-1].item() == pytest.approx(-1.0, rel=1e-12)  # every failure: -1


def test_groups_that_never_or_always_succeed_and_groups_of_one_give_nothing():
    rewards = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert maxrl_advantages(rewards).tolist() == [[0.0] * 3, [0.0] * 3]
    assert maxrl_advantages(torch.tensor([[1.0]])).tolist() == [[0.0]]


def test_a_reward_other_than_0_and_1_is_refused_naming_the_group_and_the_way_out():
    with pytest.raises(ValueError, match=r"group 1 has \[0.5, 1.0\].*trainer.advantage=group"):
        maxrl_advantages(torch.tensor([[0.0, 1.0], [0.5, 1.0]]))


def test_credit_with_maxrl_is_per_episode_only():
    rollouts = [Trajectory(prompt=[], completion=[], reward=r) for r in (1.0, 0.0)]
    credits = assign_credit(rollouts, std_normalize=True, advantage="maxrl")
    assert [c.advantage for c in credits] == [1.0, -1.0]  # p = 1/2, std_normalize not read
    with pytest.raises(ValueError, match="trainer.credit=turn"):
        assign_credit(rollouts, std_normalize=False, turn_gamma=1.0, advantage="maxrl")


def test_the_config_names_the_choice_and_refuses_it_with_per_turn_credit():
    from rlve.train import load_run_config

    assert load_run_config(["trainer.advantage=maxrl"]).trainer.advantage == "maxrl"
    with pytest.raises(ValueError, match="set trainer.credit=episode"):
        load_run_config(["trainer.advantage=maxrl", "trainer.credit=turn"])
    with pytest.raises(ValueError, match=r"trainer.advantage must be one of \['group', 'maxrl'\]"):
        load_run_config(["trainer.advantage=max_rl"])
