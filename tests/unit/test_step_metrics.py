"""A train step's metrics from its updates: means, token-weighted clip fractions and ratios."""

import math

import pytest

from rlve.algorithms import LossStats
from rlve.training.step_metrics import step_metrics


def stats(tokens: int, clip_high: float, ratio_max: float) -> LossStats:
    return LossStats(0.0, clip_high, 1.0, 1.0, 0.0, 0.0, 0.0, num_tokens=tokens,
                     ratio_mean=1.0, ratio_min=1.0, ratio_max=ratio_max)  # fmt: skip


def test_means_of_updates_and_clip_fraction_over_all_tokens():
    # update 1: 10 tokens, nothing clipped (its ratio is 1); update 2: 30 tokens, 20% clipped
    updates = [
        ({"train/loss": 1.0, "train/lr": 1e-3}, stats(10, 0.0, 1.0)),
        ({"train/loss": 3.0, "train/lr": 1e-3}, stats(30, 0.2, 1.6)),
    ]
    metrics = step_metrics(updates, sampler=False, tis_masked=False)
    assert metrics["train/loss"] == 2.0
    assert metrics["train/clip_frac_high"] == pytest.approx(0.15)  # 0.2 * 30 / 40
    assert metrics["train/ratio_max"] == 1.6
    assert "sampling/is_ratio_mean" not in metrics


def test_a_non_finite_update_is_in_the_means_but_not_in_the_token_stats():
    updates = [
        ({"train/loss": 1.0}, stats(10, 0.5, 1.2)),
        ({"train/loss": math.nan}, None),
    ]
    metrics = step_metrics(updates, sampler=True, tis_masked=False)
    assert math.isnan(metrics["train/loss"])
    assert metrics["train/clip_frac_high"] == 0.5
    assert "sampling/is_ratio_mean" not in metrics  # left out of a step with a NaN update


def test_sampler_metrics_when_asked():
    metrics = step_metrics([({}, stats(4, 0.0, 1.0))], sampler=True, tis_masked=True)
    assert metrics["sampling/is_ratio_mean"] == 1.0 and metrics["sampling/tis_masked_frac"] == 0.0
