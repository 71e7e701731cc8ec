"""Rollout summaries: rewards of the clean rollouts, and how far behind the trainer the weights
that sampled a batch were."""

import pytest

from rlve.rollout.summary import staleness, summarize, weight_lag, within_lag
from rlve.types import Fault, RolloutGroup, Trajectory


def group(*versions: int) -> RolloutGroup:
    rollouts = [Trajectory(prompt=[], completion=[], weight_version=v) for v in versions]
    return RolloutGroup(example_id=0, env_name="toy", trajectories=rollouts)


def test_weight_lag_counts_steps_behind_the_trainer():
    # trainer at version 5; rollouts sampled by versions 5, 4, 4, 3 -> lags 0, 1, 1, 2
    metrics = weight_lag([group(5, 4), group(4, 3)], version=5)
    assert metrics == {
        "sampling/weight_lag_min": 0,
        "sampling/weight_lag_mean": 1.0,
        "sampling/weight_lag_max": 2,
    }


def test_on_policy_batch_has_zero_lag_and_no_groups_give_no_metrics():
    assert weight_lag([group(2, 2)], version=2)["sampling/weight_lag_max"] == 0
    assert weight_lag([], version=2) == {}


def test_a_rollout_from_newer_weights_than_the_trainer_is_refused():
    with pytest.raises(ValueError, match="weights version 7, but the trainer is at version 5"):
        weight_lag([group(5, 7)], version=5)


def test_groups_older_than_the_allowed_lag_are_dropped_and_counted():
    # trainer at version 5, async_level 1: lag 0 and 1 pass, a group with one lag-2 rollout goes
    fresh, one_behind, too_old = group(5, 5), group(4, 4), group(4, 3)
    kept, dropped = within_lag([fresh, too_old, one_behind], version=5, max_lag=1)
    assert (kept, dropped) == ([fresh, one_behind], 1)
    assert within_lag([one_behind], version=5, max_lag=0) == ([], 1)


def test_staleness_counts_versions_per_rollout_and_the_oldest_token_s_lag():
    """Trainer at version 6, max_staleness 2: rollouts whose turns were sampled by versions
    (4, 5), (6), (3, 4, 5) and (5, 5): spans 2, 1, 3, 1; oldest-token lags 2, 0, 3, 1. The third
    is beyond 2, so its group (2 rollouts) is dropped."""

    def rollout(*versions):
        return Trajectory(prompt=[], completion=[], weight_version=min(versions),
                          turn_versions=list(versions))  # fmt: skip

    kept = RolloutGroup(0, "toy", [rollout(4, 5), rollout(6)])
    dropped = RolloutGroup(1, "toy", [rollout(3, 4, 5), rollout(5, 5)])
    assert staleness([kept, dropped], version=6, max_staleness=2) == {
        "async/version_span_mean": 7 / 4,
        "async/version_span_max": 3,
        "async/staleness_0": 0.25,
        "async/staleness_1": 0.25,
        "async/staleness_2": 0.25,
        "async/staleness_over": 0.25,
        "async/dropped_rollouts": 2.0,
    }
    assert within_lag([kept, dropped], version=6, max_lag=2) == ([kept], 1)


def test_rewards_are_the_clean_rollouts_and_stop_reasons_count_every_rollout():
    # rewards 1.0 and 0.0 clean, -0.1 from an episode ended by an engine error: mean 0.5, not 0.3
    ends = ((1.0, "env_done"), (0.0, "env_done"), (-0.1, "engine_error"))
    rollouts = [Trajectory(prompt=[], completion=[], reward=r, stop_reason=s) for r, s in ends]
    rollouts[2].fault = Fault("engine_error", "request failed")
    summary = summarize([RolloutGroup(0, "toy", rollouts)])
    assert (summary["reward/mean"], summary["reward/min"]) == (0.5, 0.0)
    assert summary["stop/engine_error"] == pytest.approx(1 / 3)


def test_the_mean_length_s_standard_error_takes_the_groups_as_units():
    def answers(*lengths):
        rollouts = [Trajectory(prompt=[], completion=[], token_ids=[1] * (n + 1),
                               loss_mask=[0] + [1] * n) for n in lengths]  # fmt: skip
        return RolloutGroup(example_id=0, env_name="toy", trajectories=rollouts)

    # group means 9, 9, 9 and 90: sample sd 40.5 over sqrt(4) groups
    groups = [answers(8, 10), answers(9, 9), answers(9), answers(90, 90)]
    assert summarize(groups)["completion/len_mean_se"] == pytest.approx(20.25)
    assert "completion/len_mean_se" not in summarize(groups[:1])  # one group: no spread
