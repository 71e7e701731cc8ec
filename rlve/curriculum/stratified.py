"""Stratified draws of a per-example parameter, so that every batch spans its whole range.

Tic-tac-toe draws each example's opponent `random_move_prob` this way: with `num_groups` equal
buckets over [low, high], consecutive examples land in consecutive buckets, so any run of
`num_groups` examples covers the range evenly instead of clustering by chance.
"""

from __future__ import annotations

import math
import random

from rlve.config import is_int


def stratified_probabilities(
    num_examples: int, low: float, high: float, num_groups: int, rng: random.Random
) -> list[float]:
    """One value in [low, high] per example.

    Example i falls in bucket b = i % num_groups and gets low + b * step + uniform(0, step),
    with step = (high - low) / num_groups. Rounding can never push a value above `high`.
    Use num_groups = batch_size // rollouts_per_example so each batch spans the range.
    """
    if not is_int(num_examples) or num_examples < 0:
        raise ValueError(f"num_examples must be an integer >= 0, got {num_examples!r}")
    if not is_int(num_groups) or num_groups < 1:
        raise ValueError(f"num_groups must be an integer >= 1, got {num_groups!r}")
    if not (math.isfinite(low) and 0.0 <= low <= 1.0):
        raise ValueError(f"low must be in [0, 1], got {low!r}")
    if not (math.isfinite(high) and 0.0 <= high <= 1.0):
        raise ValueError(f"high must be in [0, 1], got {high!r}")
    if low > high:
        raise ValueError(f"low must be <= high, got low={low!r} and high={high!r}")
    step = (high - low) / num_groups
    return [
        min(high, low + (i % num_groups) * step + rng.uniform(0.0, step))
        for i in range(num_examples)
    ]
