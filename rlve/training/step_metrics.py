"""The metrics of one RL train step, from the optimizer updates it took.

A train step takes `num_iterations x mini_batches` updates. Per-update numbers (loss, gradient
norm, entropy, lr, KL) are averaged over them; clip fractions and ratios are counted over every
update's tokens, so a clip that acts only in later mini-batches still shows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rlve.algorithms import LossStats
from rlve.algorithms.packed_rows import padded_fraction
from rlve.training.peak import Peak
from rlve.types import TrainBatch

Update = tuple[dict[str, float], LossStats | None]
"""one optimizer update: its per-update metrics, and its loss stats (None: a non-finite loss)"""


def step_metrics(
    updates: Sequence[Update], sampler: bool, tis_mode: str | None = None,
    entropy_selection: bool = False,
) -> dict[str, float]:  # fmt: skip
    """train/* metrics of the step; with `sampler`, the trainer-vs-sampler sampling/* ones too
    (with a correction on, `tis_mode`: also the share of tokens it masked, or truncated); with
    `entropy_selection`, the share of tokens that kept their advantage. An update with a
    non-finite loss counts in the means (they become NaN) but not in the token statistics,
    and the sampling/* metrics are left out of such a step."""
    if not updates:
        raise ValueError("a train step has at least one update")
    metrics = {k: sum(m[k] for m, _ in updates) / len(updates) for k in updates[0][0]}
    stats = LossStats.combine([s for _, s in updates if s is not None])
    metrics.update({
        "train/clip_frac": stats.clip_frac_low + stats.clip_frac_high,
        "train/clip_frac_low": stats.clip_frac_low,
        "train/clip_frac_high": stats.clip_frac_high,
        "train/ratio_mean": stats.ratio_mean,
        "train/ratio_min": stats.ratio_min,
        "train/ratio_max": stats.ratio_max,
        "train/sequence_ratio_min": stats.sequence_ratio_min,
        "train/sequence_ratio_max": stats.sequence_ratio_max,
    })  # fmt: skip
    if entropy_selection:
        metrics["train/entropy_kept_frac"] = stats.entropy_kept_frac
    if sampler and all(s is not None for _, s in updates):
        metrics["sampling/logprob_diff_mean"] = stats.logprob_diff_mean
        metrics["sampling/logprob_diff_max"] = stats.logprob_diff_max
        metrics["sampling/is_ratio_mean"] = stats.is_ratio_mean
        metrics["sampling/is_ratio_max"] = stats.is_ratio_max
        if tis_mode == "mask":
            metrics["sampling/tis_masked_frac"] = stats.tis_masked_frac
        elif tis_mode == "truncate":
            metrics["sampling/tis_truncated_frac"] = stats.tis_truncated_frac
        if tis_mode is not None:
            metrics["sampling/tis_sequence_frac"] = stats.tis_sequence_frac
    return metrics


def with_perf(
    metrics: dict[str, float], batches: Sequence[TrainBatch], started: float, passes: int,
    flops: float | None, peak: Peak | None,
) -> dict[str, float]:  # fmt: skip
    """`metrics` plus perf/train_s (since `started`, a perf_counter time), the tokens per
    second of `passes` forward/backward passes over `batches` (padding excluded),
    perf/padded_frac, the share of their forward positions that were padding, and the step's
    `flops` (rlve.training.flops) as perf/train_flops, perf/train_tflops (achieved) and, with a
    known peak, perf/mfu (achieved / peak), perf/peak_tflops and perf/peak_threads (0: not
    measured); none of them without a count (None). The peak is read after the step's time is
    taken: a read may measure it again (rlve.training.peak)."""
    elapsed = time.perf_counter() - started
    micros = [m for b in batches for m in b.micro_batches]
    unshared = sum(int(m.attention_mask.sum()) for m in micros)
    tokens = unshared * passes
    if flops is not None:
        achieved = flops / elapsed / 1e12
        metrics = {**metrics, "perf/train_flops": flops, "perf/train_tflops": achieved}
        if peak is not None and (peak_tflops := peak.read()):
            metrics["perf/mfu"] = achieved / peak_tflops
            metrics["perf/peak_tflops"] = peak_tflops
            metrics["perf/peak_threads"] = float(peak.threads)
    return {**metrics, "perf/train_s": elapsed, "perf/train_tokens_per_s": tokens / elapsed,
            "perf/padded_frac": padded_fraction(micros),
            # one pass: positions the decoder ran on; the sequences' tokens it would have run on
            # without prefix sharing; tokens of sequences left out (no advantage, no KL)
            "perf/forward_tokens": float(sum(b.forward_tokens for b in batches)),
            "perf/unshared_tokens": float(unshared),
            "perf/skipped_tokens": float(sum(b.skipped_tokens for b in batches))}  # fmt: skip
