"""The environment-scaling experiment's power calculation (rlve.experiments.scaling_power), by
hand."""

import pytest

from rlve.experiments.scaling_power import (
    detectable_difference,
    held_out_chances,
    null_pair_variance,
    paired_variances,
    power_rows,
)


def test_detectable_difference_by_hand():
    # (1.959964 + 0.841621) * sqrt((0.32 / 128 + 0) / 3) = 2.801585 * 0.0288675 = 0.080875
    assert detectable_difference(0.32, 128, 3) == pytest.approx(0.080875, abs=1e-6)
    # a run variance of 0.001 a seed: sqrt((0.0025 + 0.001) / 3) = 0.0341565
    assert detectable_difference(0.32, 128, 3, 0.001) == pytest.approx(2.801585 * 0.0341565,
                                                                       abs=1e-6)  # fmt: skip
    # four times the problems halve the sampling part
    ratio = detectable_difference(0.32, 512, 3) / detectable_difference(0.32, 128, 3)
    assert ratio == pytest.approx(0.5)
    with pytest.raises(ValueError, match="got 0 and 3"):
        detectable_difference(0.32, 0, 3)


def test_null_pair_variance_by_hand():
    # 2 * 0.5 * 0.5 = 0.5; 2 * 0.1 * 0.9 = 0.18; problems always or never solved add nothing
    assert null_pair_variance([0.5, 0.1, 0.0, 1.0]) == pytest.approx((0.5 + 0.18) / 4)


def test_paired_variances_by_hand():
    # seed 0: d = [1, 0, 0, -1] (mean 0, variance 2/3); seed 1: d = [1, 1, 0, 0] (mean 0.5,
    # variance 1/3); pooled var_d = 0.5; the seeds' means vary by 0.125, less 0.5 / 4 = 0
    pairs = [([0, 1, 0, 1], [1, 1, 0, 0]), ([0, 0, 1, 1], [1, 1, 1, 1])]
    var_d, var_run = paired_variances(pairs)
    assert var_d == pytest.approx(0.5) and var_run == pytest.approx(0.0)
    # seeds apart by a whole point: means 0 and 1, variance 0.5, less 0 (no spread within)
    var_d, var_run = paired_variances([([0, 0], [0, 0]), ([0, 0], [1, 1])])
    assert var_d == 0 and var_run == pytest.approx(0.5)
    assert paired_variances([([0, 1], [1, 1])]) == (0.5, 0.0)
    with pytest.raises(ValueError, match="2 and 3 outcomes"):
        paired_variances([([0, 1], [1, 1, 0])])


def test_power_rows_from_the_screening_by_hand():
    accuracy = {"a": {"0": 0.5, "1": 0.1, "2": 0.0}, "b": {"0": 0.9}}
    chances = held_out_chances(accuracy, ["a", "b"], (0, 1))
    assert chances == [0.5, 0.1, 0.9, 0.0]
    rows = power_rows(chances, per_cell=[8, 32], seeds=[3])
    # var_d = (0.5 + 0.18 + 0.18 + 0) / 4 = 0.215; 4 cells x 8 problems = 32 a seed
    assert rows[0]["var_d"] == pytest.approx(0.215) and rows[0]["problems"] == 32
    assert rows[0]["detectable"] == pytest.approx(2.801585 * (0.215 / 32 / 3) ** 0.5, abs=1e-6)
    assert rows[1]["detectable"] == pytest.approx(rows[0]["detectable"] / 2)
