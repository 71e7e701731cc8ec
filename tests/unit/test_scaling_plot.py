import pytest

from rlve.experiments.experiment import RunResult
from rlve.experiments.scaling_plot import (
    by_size,
    collection_size,
    held_out_curve,
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
