"""Stratified per-example probabilities: bucket i % num_groups, uniform inside the bucket."""

import random

import pytest

from rlve.curriculum import stratified_probabilities


class MidpointRng:
    """uniform(a, b) always returns the middle, so every value is its bucket's centre."""

    def uniform(self, a: float, b: float) -> float:
        return (a + b) / 2


def test_values_are_bucket_centres_with_a_midpoint_rng():
    # [0.2, 0.7] in 5 buckets: step 0.1, centres 0.25, 0.35, ..., 0.65; example 5 wraps to 0.
    values = stratified_probabilities(6, 0.2, 0.7, 5, MidpointRng())
    assert values == pytest.approx([0.25, 0.35, 0.45, 0.55, 0.65, 0.25])


def test_matches_the_formula_with_a_seeded_rng():
    values = stratified_probabilities(10, 0.0, 0.25, 4, random.Random(7))
    rng = random.Random(7)
    step = 0.25 / 4
    expected = [0.0 + (i % 4) * step + rng.uniform(0.0, step) for i in range(10)]
    assert values == expected
    for i, value in enumerate(values):
        bucket = i % 4
        assert bucket * step <= value <= (bucket + 1) * step


def test_every_run_of_num_groups_examples_spans_the_range():
    # The tic-tac-toe recipe: batch 256 games, 8 rollouts each -> 32 groups over [0.2, 0.7].
    values = stratified_probabilities(64, 0.2, 0.7, 32, random.Random(0))
    step = 0.5 / 32
    for start in (0, 32):
        buckets = sorted(int((v - 0.2) / step) for v in values[start : start + 32])
        assert buckets == list(range(32))


def test_degenerate_ranges():
    assert stratified_probabilities(3, 0.4, 0.4, 2, random.Random(0)) == [0.4, 0.4, 0.4]
    assert stratified_probabilities(0, 0.0, 1.0, 4, random.Random(0)) == []
    single = stratified_probabilities(50, 0.0, 1.0, 1, random.Random(0))
    assert all(0.0 <= v <= 1.0 for v in single)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((4, -0.1, 0.5, 2), "low must be in"),
        ((4, 0.1, 1.5, 2), "high must be in"),
        ((4, 0.6, 0.5, 2), "low must be <= high"),
        ((4, 0.1, 0.5, 0), "num_groups"),
        ((-1, 0.1, 0.5, 2), "num_examples"),
    ],
)
def test_bad_arguments_are_named(args, message):
    with pytest.raises(ValueError, match=message):
        stratified_probabilities(*args, random.Random(0))
