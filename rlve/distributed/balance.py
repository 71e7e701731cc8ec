"""Splitting a step's sequences across ranks so that each gets a like number of tokens."""

from __future__ import annotations

from collections.abc import Sequence


def split_by_tokens(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """Indices of `lengths` in `parts` shares of about equal total length.

    Longest first, each to the share with the fewest tokens so far (ties: the lower share), then
    each share in its original order; deterministic, so every rank computes the same split.
    Example: lengths [5, 1, 4, 2], 2 parts -> [[0, 1], [2, 3]] (6 and 6 tokens).
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    shares: list[list[int]] = [[] for _ in range(parts)]
    totals = [0] * parts
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        share = min(range(parts), key=lambda p: (totals[p], p))
        shares[share].append(index)
        totals[share] += lengths[index]
    return [sorted(share) for share in shares]
