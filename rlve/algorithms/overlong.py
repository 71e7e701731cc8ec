"""DAPO overlong reward shaping: a soft length penalty near the generation limit.

Truncated answers would otherwise be punished like wrong ones, which is noisy; the penalty ramps
from 0 to -1 over the last `buffer_len` tokens instead (Yu et al. 2025, section 3.4).
"""

from __future__ import annotations


def overlong_penalty(length: int, max_len: int, buffer_len: int) -> float:
    """-min(max(length - (max_len - buffer_len), 0) / buffer_len, 1), added to the reward.

    0 inside the safe zone (length <= max_len - buffer_len), linear down to -1 at max_len,
    and -1 beyond it.

    Raises:
        ValueError: buffer_len not in (0, max_len], or a negative length.
    """
    if not 0 < buffer_len <= max_len:
        raise ValueError(f"buffer_len must be in (0, max_len={max_len}], got {buffer_len}")
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    exceed = length - (max_len - buffer_len)
    if exceed <= 0:
        return 0.0
    return -min(exceed / buffer_len, 1.0)


def turn_overlong_penalties(
    turn_spans: list[tuple[int, int]], max_len: int, buffer_len: int
) -> list[float]:
    """`overlong_penalty` of each turn's length (a span's end - start), in turn order.

    Example: spans of 30 and 50 tokens, max_len 48, buffer 16 -> [0.0, -1.0]."""
    return [overlong_penalty(end - start, max_len, buffer_len) for start, end in turn_spans]
