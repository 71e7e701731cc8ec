"""A train step's metrics from its updates: means, token-weighted clip fractions and ratios;
and the perf/* metrics of its micro-batches."""

import math
import time

import pytest

from rlve.algorithms import LossStats
from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.train_sequences import TrainSequence
from rlve.training.step_metrics import step_metrics, with_perf


def stats(tokens: int, clip_high: float, ratio_max: float) -> LossStats:
    return LossStats(0.0, clip_high, 1.0, 1.0, 0.0, 0.0, 0.0, num_tokens=tokens,
                     ratio_mean=1.0, ratio_min=1.0, ratio_max=ratio_max)  # fmt: skip


def test_means_of_updates_and_clip_fraction_over_all_tokens():
    # update 1: 10 tokens, nothing clipped (its ratio is 1); update 2: 30 tokens, 20% clipped
    updates = [
        ({"train/loss": 1.0, "train/lr": 1e-3}, stats(10, 0.0, 1.0)),
        ({"train/loss": 3.0, "train/lr": 1e-3}, stats(30, 0.2, 1.6)),
    ]
    metrics = step_metrics(updates, sampler=False)
    assert metrics["train/loss"] == 2.0
    assert metrics["train/clip_frac_high"] == pytest.approx(0.15)  # 0.2 * 30 / 40
    assert metrics["train/ratio_max"] == 1.6
    assert "sampling/is_ratio_mean" not in metrics


def test_a_non_finite_update_is_in_the_means_but_not_in_the_token_stats():
    updates = [
        ({"train/loss": 1.0}, stats(10, 0.5, 1.2)),
        ({"train/loss": math.nan}, None),
    ]
    metrics = step_metrics(updates, sampler=True)
    assert math.isnan(metrics["train/loss"])
    assert metrics["train/clip_frac_high"] == 0.5
    assert "sampling/is_ratio_mean" not in metrics  # left out of a step with a NaN update


def test_sampler_metrics_when_asked():
    metrics = step_metrics([({}, stats(4, 0.0, 1.0))], sampler=True, tis_mode="mask")
    assert metrics["sampling/is_ratio_mean"] == 1.0 and metrics["sampling/tis_masked_frac"] == 0.0
    metrics = step_metrics([({}, stats(4, 0.0, 1.0))], sampler=True, tis_mode="truncate")
    assert metrics["sampling/tis_truncated_frac"] == 0.0
    assert "sampling/tis_masked_frac" not in metrics


def test_perf_metrics_count_real_tokens_and_the_padded_share():
    # rows of 5 and 3 tokens padded to 5 (2 of 10 positions padding), two passes: 16 tokens
    sequences = [TrainSequence([1] * 5, [0, 1, 1, 1, 1]), TrainSequence([1] * 3, [0, 1, 1])]
    padded = build_train_batch(sequences, max_tokens=100, pad_token_id=0)
    packed = build_train_batch(sequences, max_tokens=100, pad_token_id=0, packing="packed")
    started = time.perf_counter() - 2.0  # a step that took at least 2 s
    metrics = with_perf({"train/loss": 1.0}, [padded], started, 2, flops=0.0, peak=None)
    assert metrics["perf/padded_frac"] == pytest.approx(0.2)
    assert metrics["perf/train_tokens_per_s"] == pytest.approx(16 / metrics["perf/train_s"])
    # packed: rows of up to 5 tokens, [5] and [3] padded to 5 -> the same 2 of 10 here; with a
    # third sequence of 2 tokens, [3 + 2] fills the second row and nothing is padding
    assert with_perf({}, [packed], started, 1, 0.0, None)["perf/padded_frac"] == pytest.approx(0.2)
    sequences.append(TrainSequence([1, 1], [0, 1]))
    packed = build_train_batch(sequences, max_tokens=100, pad_token_id=0, packing="packed")
    assert with_perf({}, [packed], started, 1, 0.0, None)["perf/padded_frac"] == 0.0
