"""DAPO's batch-side pieces: dynamic sampling of rollout groups and overlong reward shaping."""

import pytest

from rlve.algorithms import filter_groups, overlong_penalty, turn_overlong_penalties
from rlve.types import RolloutGroup, Trajectory


def group(example_id: int, rewards: list[float]) -> RolloutGroup:
    trajectories = [Trajectory(prompt=[], completion=[], reward=r) for r in rewards]
    return RolloutGroup(example_id=example_id, env_name="toy", trajectories=trajectories)


def test_only_groups_with_different_rewards_are_kept():
    # [1, 1, 1] and [0.5, 0.5] have no group-relative signal; [0, 1, 0] does -> 1 of 3 kept.
    groups = [group(0, [1, 1, 1]), group(1, [0, 1, 0]), group(2, [0.5, 0.5])]
    result = filter_groups(groups)
    assert [g.example_id for g in result.kept] == [1]
    assert [g.example_id for g in result.dropped] == [0, 2]
    assert len(result.dropped) == 2
    assert result.effective_prompt_ratio == pytest.approx(1 / 3)


def test_single_rollout_group_is_dropped_and_all_kept_gives_ratio_one():
    assert len(filter_groups([group(0, [1.0])]).dropped) == 1
    result = filter_groups([group(0, [0, 1]), group(1, [0.2, 0.1])])
    assert (len(result.kept), result.effective_prompt_ratio) == (2, 1.0)


def test_no_groups_gives_ratio_zero():
    result = filter_groups([])
    assert (result.kept, result.dropped, result.effective_prompt_ratio) == ([], [], 0.0)


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (0, 0.0),
        (80, 0.0),  # safe zone ends at max_len - buffer_len = 100 - 20 = 80
        (85, -0.25),  # 5 / 20
        (90, -0.5),  # 10 / 20
        (100, -1.0),  # 20 / 20
        (120, -1.0),  # 40 / 20, capped at 1
    ],
)
def test_overlong_penalty_ramps_over_the_buffer(length, expected):
    assert overlong_penalty(length, max_len=100, buffer_len=20) == expected


def test_overlong_buffer_may_span_the_whole_length():
    assert overlong_penalty(50, max_len=100, buffer_len=100) == -0.5


@pytest.mark.parametrize("buffer_len", [0, -5, 101])
def test_overlong_rejects_buffer_outside_range(buffer_len):
    with pytest.raises(
        ValueError, match=rf"buffer_len must be in \(0, max_len=100\], got {buffer_len}"
    ):
        overlong_penalty(90, max_len=100, buffer_len=buffer_len)


def test_overlong_rejects_negative_length():
    with pytest.raises(ValueError, match="length must be >= 0, got -1"):
        overlong_penalty(-1, max_len=100, buffer_len=20)


def test_each_turn_pays_its_own_overlong_penalty():
    # limit 48, buffer 16: the safe zone ends at 32 tokens; 40 is half-way (-0.5), 50 past (-1)
    spans = [(10, 40), (50, 90), (100, 150)]  # 30, 40 and 50 tokens
    assert turn_overlong_penalties(spans, max_len=48, buffer_len=16) == [0.0, -0.5, -1.0]
    assert turn_overlong_penalties([], max_len=48, buffer_len=16) == []
