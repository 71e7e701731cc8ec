"""Training sequences (rlve.algorithms.train_sequences) -> micro-batches by a token budget.

Two layouts, rows x row length within the budget either way. "padded": sequences sorted longest
first and packed greedily, one per right-padded row. "packed": sequences end to end in rows
(rlve.algorithms.packed_rows), position ids restarting at 0 at each, so little or no position is
padding. A sequence longer than the budget gets a micro-batch of its own (and a warning):
refusing it would stop an RL run over one long rollout, and the budget is a throughput knob, not
a hard limit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from rlve.algorithms.packed_rows import pack_into_rows
from rlve.algorithms.prefix_tree import build_prefix_tree, pack_by_new_tokens
from rlve.algorithms.train_sequences import TrainSequence, check_sequence
from rlve.types import MicroBatch, TrainBatch

logger = logging.getLogger(__name__)

PACKINGS = ("padded", "packed")
"""micro-batch layouts: one right-padded sequence per row, or sequences end to end in rows"""


def split_evenly(sequences: Sequence[TrainSequence], parts: int) -> list[list[TrainSequence]]:
    """`sequences` in order, cut into min(parts, len) runs whose sizes differ by at most one:
    the mini-batches of a train step. Example: 5 sequences, 2 parts -> sizes [2, 3]."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    n = len(sequences)
    count = min(parts, n)
    return [list(sequences[i * n // count : (i + 1) * n // count]) for i in range(count)]


def warn_oversized(length: int, max_tokens: int) -> None:
    logger.warning(
        "a sequence of %d tokens exceeds max_tokens_per_microbatch=%d; it gets a micro-batch of "
        "its own",
        length,
        max_tokens,
    )


def pack_by_token_budget(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of `lengths` grouped into micro-batches whose rows x longest row <= max_tokens.

    Longest first (ties by index, so the packing is deterministic); each micro-batch starts with
    its longest sequence, which fixes its padded length, and takes the next ones while
    (rows + 1) x that length fits. A sequence longer than max_tokens gets its own micro-batch.
    Example: lengths [3, 5, 2, 5], max_tokens 10 -> [[1, 3], [0, 2]] (5+5 padded = 10; 3+3 = 6).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for index in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(index)
            continue
        if lengths[index] > max_tokens:
            warn_oversized(lengths[index], max_tokens)
        batches.append([index])
    return batches


def _padded_rows(rows: list[list[float]], width: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([row + [0] * (width - len(row)) for row in rows], dtype=dtype)


def build_micro_batch(
    sequences: Sequence[TrainSequence], indices: list[int], pad_token_id: int
) -> MicroBatch:
    """Right-pads the sequences at `indices` into one `MicroBatch` ([B, T] tensors)."""
    chosen = [sequences[i] for i in indices]
    width = max(len(s.token_ids) for s in chosen)
    input_ids = torch.full((len(chosen), width), pad_token_id, dtype=torch.long)
    for row, sequence in enumerate(chosen):
        input_ids[row, : len(sequence.token_ids)] = torch.tensor(sequence.token_ids)
    attention = _padded_rows([[1] * len(s.token_ids) for s in chosen], width, torch.long)
    loss_mask = _padded_rows([list(s.loss_mask) for s in chosen], width, torch.long).bool()
    advantages = _padded_rows([s.advantages() for s in chosen], width, torch.float32)
    sampler = None
    if all(s.sampler_logprobs is not None for s in chosen):
        sampler = _padded_rows([list(s.sampler_logprobs) for s in chosen], width, torch.float32)
        sampler = torch.where(loss_mask, sampler, torch.zeros_like(sampler))
    return MicroBatch(
        input_ids=input_ids,
        attention_mask=attention,
        loss_mask=loss_mask,
        advantages=advantages,
        sampler_logprobs=sampler,
        sequence_index=list(indices),
    )


def _row_lists(
    sequences: Sequence[TrainSequence], row: list[int], width: int, pad_token_id: int
) -> dict[str, list]:
    """One row's values, padded to `width`. Padding continues the row's last sequence (its
    position ids keep counting, loss mask 0): causal attention keeps it out of every real
    token's view, as in the padded layout."""
    chosen = [sequences[i] for i in row]
    used = sum(len(s.token_ids) for s in chosen)
    pad = width - used
    last = len(chosen[-1].token_ids)
    return {
        "input_ids": [t for s in chosen for t in s.token_ids] + [pad_token_id] * pad,
        "attention_mask": [1] * used + [0] * pad,
        "position_ids": [p for s in chosen for p in range(len(s.token_ids))]
        + list(range(last, last + pad)),
        "loss_mask": [m for s in chosen for m in s.loss_mask] + [0] * pad,
        "advantages": [a for s in chosen for a in s.advantages()] + [0.0] * pad,
        "sampler_logprobs": None
        if any(s.sampler_logprobs is None for s in chosen)
        else [
            lp if m else 0.0
            for s in chosen
            for lp, m in zip(s.sampler_logprobs, s.loss_mask, strict=True)
        ]
        + [0.0] * pad,
    }


def build_packed_micro_batch(
    sequences: Sequence[TrainSequence], rows: list[list[int]], pad_token_id: int
) -> MicroBatch:
    """One `MicroBatch` of `rows` (each a list of indices into `sequences`, placed end to end),
    rows right-padded to the longest; [R, T] tensors with `position_ids` set."""
    width = max(sum(len(sequences[i].token_ids) for i in row) for row in rows)
    lists = [_row_lists(sequences, row, width, pad_token_id) for row in rows]

    def stacked(name: str, dtype: torch.dtype) -> Tensor:
        return torch.tensor([row[name] for row in lists], dtype=dtype)

    with_sampler = all(row["sampler_logprobs"] is not None for row in lists)
    return MicroBatch(
        input_ids=stacked("input_ids", torch.long),
        attention_mask=stacked("attention_mask", torch.long),
        loss_mask=stacked("loss_mask", torch.bool),
        advantages=stacked("advantages", torch.float32),
        sampler_logprobs=stacked("sampler_logprobs", torch.float32) if with_sampler else None,
        sequence_index=[i for row in rows for i in row],
        position_ids=stacked("position_ids", torch.long),
    )


def shared_prefix_micro_batch(
    sequences: Sequence[TrainSequence], indices: list[int], pad_token_id: int
) -> MicroBatch:
    """The sequences at `indices` end to end in one row, with the prefix tree it is forwarded
    through (its `node_index` aligned with the row)."""
    micro = build_packed_micro_batch(sequences, [indices], pad_token_id)
    micro.prefix_tree = build_prefix_tree([sequences[i].token_ids for i in indices])
    return micro


def build_train_batch(
    sequences: Sequence[TrainSequence],
    *,
    max_tokens: int,
    pad_token_id: int,
    packing: str = "padded",
    single_row: bool = False,
    share_prefixes: bool = False,
) -> TrainBatch:
    """All sequences of one optimizer step in micro-batches of the `packing` layout.

    "padded": `pack_by_token_budget`, one right-padded sequence per row. "packed": sequences end
    to end in rows (`pack_into_rows`). With `single_row` (attention that finds the sequences
    from position ids: flash attention, rlve's SEQUENCE_SDPA) rows hold up to max_tokens, one
    row per micro-batch, never padded. Otherwise a dense block-diagonal mask costs the row length
    squared, so rows are no longer than the longest sequence (nor max_tokens), no row costs more
    attention than the padded layout's widest, and rows are grouped like padded sequences
    (`pack_by_token_budget` over the row lengths), padded at their ends only.

    With `share_prefixes` (packed, single row: attention that reads a prefix tree) each
    micro-batch also carries the prefix tree of its sequences, taken in lexicographic order, and
    holds up to max_tokens tree nodes (`pack_by_new_tokens`): the distinct tokens it forwards.
    """
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {list(PACKINGS)}, got {packing!r}")
    if not sequences:
        raise ValueError("no sequences to train on")
    for index, sequence in enumerate(sequences):
        problem = check_sequence(sequence.token_ids, sequence.loss_mask)
        if problem:
            raise ValueError(f"sequence {index}: {problem}")
    lengths = [len(s.token_ids) for s in sequences]
    if share_prefixes:
        if packing != "packed" or not single_row:
            raise ValueError("share_prefixes needs packing='packed' with single_row")
        for length in lengths:
            if length > max_tokens:
                warn_oversized(length, max_tokens)
        micro_batches = [
            shared_prefix_micro_batch(sequences, indices, pad_token_id)
            for indices in pack_by_new_tokens([s.token_ids for s in sequences], max_tokens)
        ]
    elif packing == "padded":
        batches = pack_by_token_budget(lengths, max_tokens)
        micro_batches = [build_micro_batch(sequences, indices, pad_token_id) for indices in batches]
    else:
        rows = pack_into_rows(lengths, max_tokens if single_row else min(max_tokens, max(lengths)))
        if single_row:
            for length in lengths:
                if length > max_tokens:
                    warn_oversized(length, max_tokens)
            groups = [[r] for r in range(len(rows))]
        else:
            row_lengths = [sum(lengths[i] for i in row) for row in rows]
            groups = pack_by_token_budget(row_lengths, max_tokens)
        micro_batches = [
            build_packed_micro_batch(sequences, [rows[r] for r in group], pad_token_id)
            for group in groups
        ]
    return TrainBatch(
        micro_batches=micro_batches,
        num_sequences=len(sequences),
        num_loss_tokens=sum(sum(s.loss_mask) for s in sequences),
    )
