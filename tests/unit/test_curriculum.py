"""The RLVE difficulty window on hand-written accuracy streams.

Most tests use tau_num = 4 and tau_acc = 0.75, so a check fires after four rollouts at `high`
and raises `high` when at least three of them were correct.
"""

import json
import random

import pytest

from rlve.curriculum import DifficultyController

T, F = True, False


def small_controller(**kwargs) -> DifficultyController:
    return DifficultyController(tau_acc=0.75, tau_num=4, d_delta=4, **kwargs)


def raise_once(controller: DifficultyController, env: str) -> None:
    """Four correct rollouts at the current top level: exactly one raise."""
    controller.observe(env, controller.window(env)[1], [T, T, T, T])


def test_windows_step_exactly_as_the_algorithm_says():
    c = small_controller()
    assert c.window("sort") == (0, 0)
    c.observe("sort", 0, [T, T, T])  # 3 attempted < 4: no check yet
    assert c.window("sort") == (0, 0)
    assert (c.env_window("sort").correct, c.env_window("sort").attempted) == (3, 3)
    c.observe("sort", 0, [F])  # 4 attempted, 3/4 = 0.75 >= 0.75: high 0 -> 1
    assert c.window("sort") == (0, 1)
    assert (c.env_window("sort").correct, c.env_window("sort").attempted) == (0, 0)
    c.observe("sort", 1, [T, T, T, T])  # 4/4 at high 1: high -> 2; low = max(0, 2-4+1) = 0
    assert c.window("sort") == (0, 2)
    assert c.window("other") == (0, 0)  # each environment has its own window


def test_rollouts_below_high_are_not_counted():
    c = small_controller()
    raise_once(c, "sort")
    assert c.window("sort") == (0, 1)
    c.observe("sort", 0, [T, T, T, T, T, T, T, T])  # difficulty 0 < high 1: ignored
    assert c.window("sort") == (0, 1)
    assert c.env_window("sort").attempted == 0
    c.observe("sort", 1, [T, T])
    assert c.env_window("sort").attempted == 2


def test_width_is_capped_at_d_delta():
    c = small_controller()
    windows = []
    for _ in range(6):
        raise_once(c, "sort")
        windows.append(c.window("sort"))
    # high 1..6; low = max(low, high - 4 + 1) starts moving once high reaches 4.
    assert windows == [(0, 1), (0, 2), (0, 3), (1, 4), (2, 5), (3, 6)]


def test_no_raise_below_tau_acc_and_counts_reset_after_the_check():
    c = small_controller()
    c.observe("sort", 0, [T, T, F, F])  # 2/4 = 0.5 < 0.75
    assert c.window("sort") == (0, 0)
    assert c.env_window("sort").attempted == 0
    assert c.env_window("sort").last_accuracy == 0.5
    # Had the two failures above been kept, this would be 5/8 = 0.625 and no raise.
    c.observe("sort", 0, [T, T, T, F])  # 3/4 = 0.75
    assert c.window("sort") == (0, 1)


def test_check_fires_at_the_end_of_the_call_and_counts_the_whole_group():
    c = small_controller()
    # A group of 6 with tau_num 4: 4/6 = 0.667 < 0.75. A check after the first four would
    # have seen 4/4 and raised.
    c.observe("sort", 0, [T, T, T, T, F, F])
    assert c.window("sort") == (0, 0)
    assert c.env_window("sort").last_accuracy == pytest.approx(4 / 6)
    # The reverse: the first four alone are 2/4, the whole group of 8 is 6/8 = 0.75.
    c.observe("sort", 0, [F, F, T, T, T, T, T, T])
    assert c.window("sort") == (0, 1)


def test_float_accuracies_add_their_value():
    c = small_controller()
    c.observe("sort", 0, [1.0, 0.5, 1.0, 0.5])  # 3.0 / 4 = 0.75
    assert c.window("sort") == (0, 1)
    with pytest.raises(ValueError, match="accuracy"):
        c.observe("sort", 1, [1.5])


def test_sample_is_uniform_over_the_window():
    c = small_controller()
    for _ in range(6):
        raise_once(c, "sort")
    rng = random.Random(0)
    draws = [c.sample("sort", rng) for _ in range(400)]
    assert set(draws) == {3, 4, 5, 6}
    assert all(80 <= draws.count(d) <= 120 for d in (3, 4, 5, 6))  # 100 expected each


def test_state_round_trips_and_restored_controller_continues_identically():
    stream = [
        ("a", [T, T, T, T]),
        ("b", [T, F, T, F]),
        ("a", [T, T, T]),
        ("b", [T, T, T, T, T]),
        ("a", [F, T, T, T]),
        ("a", [T, T, T, T]),
        ("b", [0.5, 1.0, 1.0, 1.0]),
        ("a", [F, F, T, T]),
    ]
    original = small_controller(lower_floor=0.5, variance_weighting=True, variance_window=3)
    for env, accuracies in stream[:4]:
        original.observe(env, original.window(env)[1], accuracies)
    state = original.state_dict()
    assert json.loads(json.dumps(state)) == state  # plain JSON data
    assert state["envs"]["a"]["attempted"] == 3  # counters are part of the state
    restored = small_controller(lower_floor=0.5, variance_weighting=True, variance_window=3)
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert restored.state_dict() == state
    for env, accuracies in stream[4:]:
        for controller in (original, restored):
            low, high = controller.window(env)
            controller.observe(env, low if env == "b" else high, accuracies)
        assert restored.window(env) == original.window(env)
        assert restored.state_dict() == original.state_dict()
    assert restored.env_weights(["a", "b"]) == original.env_weights(["a", "b"])


def test_lower_floor_lowers_the_window():
    c = small_controller(lower_floor=0.5)
    for _ in range(4):
        raise_once(c, "sort")
    assert c.window("sort") == (1, 4)
    c.observe("sort", 1, [T, T, F, F])  # 2/4 = 0.5, not below 0.5: low stays, counts reset
    assert c.window("sort") == (1, 4)
    assert c.env_window("sort").low_attempted == 0
    c.observe("sort", 1, [F, F, F, T])  # 1/4 = 0.25 < 0.5: low 1 -> 0
    assert c.window("sort") == (0, 4)
    c.observe("sort", 0, [F, F, F, F])  # low is already 0: it goes no lower
    assert c.window("sort") == (0, 4)
    raise_once(c, "sort")  # high 5, low = max(0, 5 - 4 + 1) = 2
    assert c.window("sort") == (2, 5)


def test_without_lower_floor_low_never_goes_down():
    c = small_controller()
    for _ in range(4):
        raise_once(c, "sort")
    c.observe("sort", 1, [F, F, F, F])
    assert c.window("sort") == (1, 4)


def test_variance_weights_favour_the_high_variance_env():
    c = small_controller(variance_weighting=True, variance_floor=0.01)
    c.observe("mixed", 0, [T, F, T, F])  # rewards 1, 0, 1, 0: variance 0.25
    c.observe("solved", 0, [T, T, T, T])  # variance 0
    weights = c.env_weights(["mixed", "solved"])
    assert weights["mixed"] == pytest.approx(0.26 / 0.27)
    assert weights["solved"] == pytest.approx(0.01 / 0.27)
    # An env with no history borrows the largest variance seen, so it gets tried.
    weights = c.env_weights(["mixed", "solved", "new"])
    assert weights == pytest.approx(
        {"mixed": 0.26 / 0.53, "solved": 0.01 / 0.53, "new": 0.26 / 0.53}
    )
    rng = random.Random(0)
    draws = [c.choose_env(["mixed", "solved"], rng) for _ in range(1000)]
    assert draws.count("mixed") > 900  # 963 expected


def test_variance_uses_rewards_when_given_and_keeps_only_the_window():
    c = small_controller(variance_weighting=True, variance_window=2)
    c.observe("a", 0, [T, F], rewards=[1.0, -1.0])  # variance 1.0 (accuracies alone: 0.25)
    assert c.env_window("a").reward_variances == [1.0]
    c.observe("a", 0, [T, T], rewards=[0.5, 0.5])
    c.observe("a", 0, [T, F], rewards=[1.0, 0.0])
    assert c.env_window("a").reward_variances == [0.0, 0.25]  # the oldest fell out
    with pytest.raises(ValueError, match="rewards"):
        c.observe("a", 0, [T, F], rewards=[1.0])


def test_weights_are_uniform_when_variance_weighting_is_off():
    c = small_controller()
    c.observe("mixed", 0, [T, F, T, F])
    assert c.env_weights(["mixed", "solved", "new"]) == pytest.approx(
        {"mixed": 1 / 3, "solved": 1 / 3, "new": 1 / 3}
    )


def test_metrics_report_window_and_accuracy():
    c = small_controller()
    c.observe("sort", 0, [T, F])  # counting at high 0: 1/2
    assert c.metrics() == {
        "curriculum/sort/low": 0.0,
        "curriculum/sort/high": 0.0,
        "curriculum/sort/accuracy": 0.5,
    }
    c.observe("sort", 0, [T, T])  # check: 3/4, raise; no rollouts at high 1 yet
    assert c.metrics()["curriculum/sort/high"] == 1.0
    assert c.metrics()["curriculum/sort/accuracy"] == 0.75  # the last completed check


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tau_acc": 0.0}, "tau_acc"),
        ({"tau_acc": 1.5}, "tau_acc"),
        ({"tau_num": 0}, "tau_num"),
        ({"d_delta": 0}, "d_delta"),
        ({"lower_floor": 1.0}, "lower_floor"),
        ({"variance_window": 0}, "variance_window"),
    ],
)
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        DifficultyController(**kwargs)
