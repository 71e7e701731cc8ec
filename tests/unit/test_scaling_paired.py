"""Two environment-scaling arms compared problem by problem (rlve.experiments.scaling_paired), by
hand."""

import pytest

from rlve.experiments.experiment import RunResult
from rlve.experiments.scaling_paired import (
    across_seeds,
    held_out_outcomes,
    paired_table,
    seed_difference,
)


def test_seed_difference_by_hand():
    # d = [1, 0, 0, 1]: mean 0.5, variance 1/3; half width 1.959964 * sqrt(1/12) = 0.565793
    diff = seed_difference([0, 1, 0, 0], [1, 1, 0, 1])
    assert diff.mean == pytest.approx(0.5) and diff.count == 4
    assert (diff.low, diff.high) == pytest.approx((0.5 - 0.565793, 0.5 + 0.565793), abs=1e-6)
    with pytest.raises(ValueError, match="3 and 2 outcomes"):
        seed_difference([0, 1, 0], [1, 1])


def test_across_seeds_is_a_t_interval_over_the_seeds_means():
    seeds = [seed_difference(a, b) for a, b in
             (([0, 0], [1, 0]), ([0, 0], [0, 0]), ([0, 0], [1, 1]))]  # fmt: skip
    # means 0.5, 0, 1: mean 0.5, sd 0.5; half width 4.303 * 0.5 / sqrt(3) = 1.242169
    total = across_seeds(seeds)
    assert total.mean == pytest.approx(0.5) and total.count == 3
    assert total.high - total.mean == pytest.approx(1.242169, abs=1e-6)
    one = across_seeds(seeds[:1])
    assert one.low == one.high == one.mean == pytest.approx(0.5)


def result(arm, seed, before, after):
    return RunResult(arm, seed, {}, {}, {}, 1.0, {},
                     outcomes={"before": {"held-out accuracy": before},
                               "after": {"held-out accuracy": after}})  # fmt: skip


def test_the_table_pairs_the_first_arm_with_the_last_seed_by_seed():
    # seed 1 lacks C64: left out
    results = [result("C1", 0, [0, 0, 1, 0], [0, 1, 1, 0]),
               result("C64", 0, [0, 0, 1, 0], [1, 1, 1, 0]),
               result("C1", 1, [0, 0, 0, 0], [0, 0, 0, 0])]  # fmt: skip
    outcomes = held_out_outcomes(results, "C1", "C64", "held-out accuracy")
    assert list(outcomes) == [0]
    table = paired_table(outcomes, "C1", "C64").splitlines()
    # C1 0.25 -> 0.5, C64 0.25 -> 0.75: after, d = [1, 0, 0, 0], mean +0.25; gains +0.5 - +0.25
    assert table[2].startswith("| 0 | 0.250 | 0.500 | 0.250 | 0.750 | +0.250 (")
    assert table[2].endswith("| +0.250 |")
    assert table[3].startswith("| mean of 1 | | | | | +0.250 (+0.250 to +0.250")
