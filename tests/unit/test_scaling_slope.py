"""Collection sizes against the smallest and the slope per doubling, by hand."""

import pytest

from rlve.experiments.scaling_paired import T_975
from rlve.experiments.scaling_slope import (
    against_smallest,
    line_slope,
    plot_against_smallest,
    sizes_table,
    slope_per_doubling,
)


def test_a_line_through_three_points_by_hand():
    assert line_slope([0, 2, 6], [0.1, 0.2, 0.4]) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="2 or more distinct x values"):
        line_slope([1, 1], [0.0, 1.0])


# two seeds, four problems a size: C1 right on 1 of 4 in both; C4 on 2; C64 on 2 and 4 of 4
OUTCOMES = {
    0: {1: [1, 0, 0, 0], 4: [1, 1, 0, 0], 64: [1, 1, 0, 0]},
    1: {1: [0, 1, 0, 0], 4: [0, 1, 1, 0], 64: [1, 1, 1, 1]},
}


def test_each_seeds_slope_on_log2_size_then_a_t_interval_over_seeds():
    # seed 0: accuracies 0.25, 0.5, 0.5 at x = log2 size = 0, 2, 6; mean x 8/3, mean y 5/12;
    # sum (x - mx)(y - my) = (-8/3)(-1/6) + (-2/3)(1/12) + (10/3)(1/12) = 2/3, over
    # sum (x - mx)^2 = 56/3 -> 1/28. Seed 1: 0.25, 0.5, 1.0, mean 7/12:
    # (-8/3)(-1/3) + (-2/3)(-1/12) + (10/3)(5/12) = 7/3 -> 1/8
    slope = slope_per_doubling(OUTCOMES)
    seeds = [1 / 28, 1 / 8]
    mean = sum(seeds) / 2
    half = T_975[1] * abs(seeds[0] - seeds[1]) / 2  # the sd of two values is |a - b| / sqrt 2
    assert (slope.mean, slope.count) == (pytest.approx(mean), 2)
    assert (slope.low, slope.high) == (pytest.approx(mean - half), pytest.approx(mean + half))


def test_a_seed_without_every_size_is_left_out_of_the_slope_not_of_the_pairs():
    partial = {**OUTCOMES, 2: {1: [0, 0, 0, 0], 64: [1, 1, 1, 1]}}
    assert slope_per_doubling(partial).count == 2
    compared = against_smallest(partial)
    assert compared[64].count == 3 and compared[4].count == 2
    # C64 - C1 per seed: +0.25, +0.75, +1.0
    assert compared[64].mean == pytest.approx((0.25 + 0.75 + 1.0) / 3)


def test_the_table_says_whether_an_interval_excludes_0():
    table = sizes_table(OUTCOMES)
    assert "| 1 | 2 | 0.250 (0.250-0.250) |  |" in table
    assert "| 64 | 2 | 0.750 (0.500-1.000) | +0.5000 (" in table
    assert "Slope per doubling of the environments, over the 2 seeds that ran all 3 sizes" in table
    assert "includes 0" in table  # two seeds: t with 1 degree of freedom is 12.7


def test_the_plot_is_drawn_from_the_pairs(tmp_path):
    path = plot_against_smallest(OUTCOMES, tmp_path / "sizes.png")
    assert path.stat().st_size > 10_000
    with pytest.raises(ValueError, match="nothing to compare"):
        plot_against_smallest({0: {1: [1, 0]}}, tmp_path / "one.png")
