import pytest

from rlve.experiments.experiment import RunResult
from rlve.experiments.scaling_plot import (
    by_environment,
    by_size,
    collection_size,
    environment_accuracy,
    held_out_curve,
    plot_by_environment,
    plot_env_scaling,
)


def result(arm: str, seed: int, before: float, during: dict, after: float) -> RunResult:
    return RunResult(
        arm=arm,
        seed=seed,
        before={"held-out accuracy": before, "in-distribution accuracy": 0.0},
        after={"held-out accuracy": after, "in-distribution accuracy": after / 2},
        summary={},
        minutes=1.0,
        settings={},
        during={str(step): {"held-out accuracy": v} for step, v in during.items()},
    )


RESULTS = [
    result("C1", 0, 0.10, {4: 0.15}, 0.20),
    result("C1", 1, 0.10, {4: 0.05}, 0.30),
    result("C4", 0, 0.10, {4: 0.25}, 0.50),
    result("C4", 1, 0.10, {}, 0.40),  # scored only before and after
]


def test_the_arms_are_placed_by_their_number_of_environments():
    assert collection_size("C16") == 16
    with pytest.raises(ValueError, match="'adaptive'"):
        collection_size("adaptive")
    held_out = by_size(RESULTS, "held-out accuracy")
    assert list(held_out) == [1, 4]
    c1 = held_out[1]
    assert c1.mean == pytest.approx(0.25) and (c1.low, c1.high) == (0.2, 0.3)
    assert held_out[4].mean == pytest.approx(0.45) and held_out[4].seeds == 2
    assert by_size(RESULTS, "in-distribution accuracy")[4].mean == pytest.approx(0.225)


def test_the_curve_keeps_the_steps_every_seed_scored_with_after_at_the_last_step():
    c1 = held_out_curve(RESULTS, "C1", last_step=12)
    assert list(c1) == [0, 4, 12]
    assert c1[4].mean == pytest.approx(0.10) and (c1[4].low, c1[4].high) == (0.05, 0.15)
    assert c1[12].mean == pytest.approx(0.25)
    assert list(held_out_curve(RESULTS, "C4", last_step=12)) == [0, 12]  # seed 1 has no step 4
    with pytest.raises(ValueError, match="C16"):
        held_out_curve(RESULTS, "C16", last_step=12)


def test_the_plot_is_written(tmp_path):
    path = plot_env_scaling(RESULTS, 12, tmp_path / "scaling.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def kept(arm: str, seed: int, before: list[float], after: list[float]) -> RunResult:
    run = result(arm, seed, 0.0, {}, 0.0)
    run.outcomes = {"before": {"held-out accuracy": before}, "after": {"held-out accuracy": after}}
    return run


def test_each_held_out_environment_is_its_block_of_problems_averaged_over_seeds():
    assert environment_accuracy([1, 0, 0, 0, 1, 1], 3) == [0.5, 0.0, 1.0]
    with pytest.raises(ValueError, match="5 outcomes do not split into 2"):
        environment_accuracy([1, 0, 0, 0, 1], 2)
    # the last run kept no outcomes: left out
    runs = [kept("C1", 0, [0, 0, 1, 1], [1, 0, 1, 1]), kept("C1", 1, [0, 0, 1, 0], [0, 0, 1, 1]),
            kept("C4", 0, [0, 0, 1, 1], [1, 1, 0, 0]), RESULTS[0]]  # fmt: skip
    table = by_environment(runs, ["a/x", "a/y"])
    assert table["C1"] == [0.25, 1.0] and table["C4"] == [1.0, 0.0]
    assert table["start"] == pytest.approx([0.0, 5 / 6])  # the three runs' before: 1, 0.5, 1


def test_the_bars_are_drawn_when_some_run_kept_outcomes(tmp_path):
    assert plot_by_environment(RESULTS, ["a/x", "a/y"], tmp_path / "none.png") is None
    runs = [kept("C1", 0, [0, 0, 1, 1], [1, 0, 1, 1]), kept("C4", 0, [0, 0, 1, 1], [1, 1, 0, 0])]
    path = plot_by_environment(runs, ["a/x", "a/y"], tmp_path / "bars.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
