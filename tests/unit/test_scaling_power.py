"""The environment-scaling experiment's power calculation (rlve.experiments.scaling_power), by
hand."""

import pytest

from rlve.experiments.scaling_paired import T_975
from rlve.experiments.scaling_power import (
    SampleSize,
    detectable_difference,
    held_out_chances,
    null_pair_variance,
    paired_variances,
    power_rows,
    sample_sizes,
    seeds_needed,
    student_t_quantile,
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


def test_the_t_quantile_agrees_with_the_printed_table():
    for df, value in T_975.items():  # scaling_paired's table, three decimals
        assert student_t_quantile(0.975, df) == pytest.approx(value, abs=5e-4)
    assert student_t_quantile(0.8, 4) == pytest.approx(0.941, abs=5e-4)
    assert student_t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)  # the normal's
    assert student_t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-8)
    with pytest.raises(ValueError, match="p=0.2, df=3"):
        student_t_quantile(0.2, 3)


def test_seeds_needed_by_hand():
    # a seed's variance: 0.32 / 128 + 0.001 = 0.0035. Normal: S >= 2.801585^2 * 0.0035 / 0.05^2
    # = 10.99, so 11 (at 10: 2.801585 * sqrt(0.00035) = 0.0524 > 0.05)
    assert seeds_needed(0.05, 0.32, 128, 0.001, t_test=False) == 11
    # t over 13 seeds: (2.1788 + 0.8726) * sqrt(0.0035 / 13) = 0.0501 > 0.05; over 14:
    # (2.1604 + 0.8702) * sqrt(0.0035 / 14) = 0.0479
    assert seeds_needed(0.05, 0.32, 128, 0.001) == 14
    with pytest.raises(ValueError, match="3 seeds do not detect 0.05"):
        seeds_needed(0.05, 0.32, 128, 0.001, most=3)
    with pytest.raises(ValueError, match="effect must be > 0"):
        seeds_needed(0.0, 0.32, 128, 0.001)


def test_sample_sizes_count_the_problems_of_every_cell():
    rows = sample_sizes(0.05, 0.32, 0.001, cells=4, per_cell=[32, 64])
    # 4 cells x 32 = 128 problems a seed: the case above; twice the problems halve var_d / n
    assert rows[0] == SampleSize(per_cell=32, problems=128, seeds=14, seeds_normal=11)
    # normal: 2.801585^2 * (0.32 / 256 + 0.001) / 0.05^2 = 7.06, so 8 seeds
    assert (rows[1].problems, rows[1].seeds_normal) == (256, 8)
