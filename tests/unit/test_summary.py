"""Rollout summaries: the staleness of the weights that sampled a batch."""

import pytest

from rlve.rollout.summary import weight_staleness
from rlve.types import RolloutGroup, Trajectory


def group(*versions: int) -> RolloutGroup:
    rollouts = [Trajectory(prompt=[], completion=[], weight_version=v) for v in versions]
    return RolloutGroup(example_id=0, env_name="toy", trajectories=rollouts)


def test_staleness_counts_steps_behind_the_trainer():
    # trainer at version 5; rollouts sampled by versions 5, 4, 4, 3 -> lags 0, 1, 1, 2
    metrics = weight_staleness([group(5, 4), group(4, 3)], version=5)
    assert metrics == {"sampling/staleness_mean": 1.0, "sampling/staleness_max": 2}


def test_on_policy_batch_has_zero_staleness_and_no_groups_give_no_metrics():
    assert weight_staleness([group(2, 2)], version=2)["sampling/staleness_max"] == 0
    assert weight_staleness([], version=2) == {}


def test_a_rollout_from_newer_weights_than_the_trainer_is_refused():
    with pytest.raises(ValueError, match="weights version 7, but the trainer is at version 5"):
        weight_staleness([group(5, 7)], version=5)
