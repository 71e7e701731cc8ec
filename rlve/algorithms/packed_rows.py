"""The packed micro-batch layout's arithmetic: where sequences go in rows, which sequence a
position belongs to, and how much of a layout is padding.

In packed rows (built by `rlve.algorithms.packing.build_packed_micro_batch`) each token keeps its
position within its own sequence (`position_ids` restart at 0) and the trainer keeps attention
inside each sequence (rlve.training.packed_attention), so a packed row gives every token the
log-prob it gets alone in a padded row, up to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from rlve.types import MicroBatch


def pack_into_rows(lengths: Sequence[int], row_tokens: int) -> list[list[int]]:
    """Indices of `lengths` placed end to end in rows of at most `row_tokens` tokens.

    First-fit decreasing: longest first (ties by index), each sequence goes into the first row
    with room for it, else into a new row; a sequence longer than row_tokens gets a row of its own.
    Example: lengths [3, 5, 2, 5, 4], row_tokens 8 -> [[1, 0], [3, 2], [4]] (5+3, 5+2, 4).
    """
    if row_tokens < 1:
        raise ValueError(f"row_tokens must be >= 1, got {row_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    used: list[int] = []
    for index in order:
        length = lengths[index]
        room = next((r for r, u in enumerate(used) if u + length <= row_tokens), None)
        if room is None:
            rows.append([index])
            used.append(length)
        else:
            rows[room].append(index)
            used[room] += length
    return rows


def sequence_ids(position_ids: Tensor) -> Tensor:
    """[B, T] long: which sequence of the micro-batch each position belongs to, counted from 0
    in row-major order; a sequence starts wherever its position id is 0 (packed rows)."""
    starts = (position_ids == 0).flatten().long()
    return (starts.cumsum(0) - 1).view_as(position_ids)


def padded_fraction(micro_batches: Sequence[MicroBatch]) -> float:
    """Share of the forward positions of `micro_batches` that are padding (attention 0): the
    compute spent on no token. Example: rows of 5 and 3 tokens padded to 5 -> 2 / 10 = 0.2."""
    positions = sum(m.attention_mask.numel() for m in micro_batches)
    real = sum(int(m.attention_mask.sum()) for m in micro_batches)
    return 1.0 - real / positions if positions else 0.0
