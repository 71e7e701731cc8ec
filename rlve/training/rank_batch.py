"""One rank's part of an optimizer step's sequences, packed into micro-batches.

In one process that is all of them (`build_train_batch`). Sharded, each rank takes a share of
about equal token count, while the batch keeps the whole step's sequence and token counts (the
losses' denominators), and every rank gets the same number of micro-batches: FSDP gathers each
layer's parameters in every forward and reduces gradients in every backward, so a rank with
less work runs idle micro-batches (two padding tokens, nothing trained) to stay in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace

import torch

from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.train_sequences import TrainSequence
from rlve.distributed import World, split_by_tokens
from rlve.types import MicroBatch, PrefixTree, TrainBatch


def idle_micro_batch(pad_token_id: int, with_sampler_logprobs: bool) -> MicroBatch:
    """A micro-batch with no trained token: its loss and gradient are 0."""
    zeros = torch.zeros((1, 2), dtype=torch.float32)
    return MicroBatch(
        input_ids=torch.full((1, 2), pad_token_id, dtype=torch.long),
        attention_mask=torch.ones((1, 2), dtype=torch.long),
        loss_mask=torch.zeros((1, 2), dtype=torch.bool),
        advantages=zeros,
        sampler_logprobs=zeros.clone() if with_sampler_logprobs else None,
        sequence_index=[],
    )


def build_rank_batch(
    sequences: Sequence[TrainSequence],
    world: World,
    *,
    max_tokens: int,
    pad_token_id: int,
    packing: str = "padded",
    single_row: bool = False,
    share_prefixes: bool = False,
    skip_zero_advantage: bool = False,
) -> TrainBatch:
    """This rank's micro-batches of `sequences`, with the step-wide counts; `packing`,
    `single_row` and `share_prefixes` as `build_train_batch` takes them. With
    `skip_zero_advantage` (a loss without a KL term) sequences whose every advantage is 0 are
    left out of the passes (`moves_the_loss`) but kept in the counts."""
    if not sequences:
        raise ValueError("no sequences to train on")
    layout = {"max_tokens": max_tokens, "pad_token_id": pad_token_id, "packing": packing,
              "single_row": single_row, "share_prefixes": share_prefixes}  # fmt: skip
    counts = {
        "num_sequences": len(sequences),
        "num_loss_tokens": sum(sum(s.loss_mask) for s in sequences),
    }
    if skip_zero_advantage:
        kept = [s for s in sequences if moves_the_loss(s)]
        # with none left, the shortest one keeps the step an optimizer step of zero gradient
        kept = kept or [min(sequences, key=lambda s: len(s.token_ids))]
        counts["skipped_tokens"] = sum(len(s.token_ids) for s in sequences) - sum(
            len(s.token_ids) for s in kept
        )
        sequences = kept
    if not world.sharded:
        return replace(build_train_batch(sequences, **layout), **counts)
    share = split_by_tokens([len(s.token_ids) for s in sequences], world.size)[world.rank]
    mine = [sequences[i] for i in share]
    micro_batches = []
    if mine:
        packed = build_train_batch(mine, **layout)
        micro_batches = packed.micro_batches
    with_sampler = all(s.sampler_logprobs is not None for s in sequences)
    idle = world.max(len(micro_batches)) - len(micro_batches)
    micro_batches += [idle_micro_batch(pad_token_id, with_sampler) for _ in range(idle)]
    return TrainBatch(micro_batches=micro_batches, **counts)


def moves_the_loss(sequence: TrainSequence) -> bool:
    """Whether some trained token of `sequence` has a non-zero advantage: a policy-gradient
    loss term is the advantage times a function of the log-prob, so without one the sequence
    adds exactly 0 to the loss and its gradient."""
    return any(a != 0.0 for a in sequence.advantages())


def batch_on(batch: TrainBatch, device: torch.device | str) -> TrainBatch:
    """`batch` with every tensor of its micro-batches moved to `device` (None fields stay None)."""
    moved = []
    for micro in batch.micro_batches:
        values = {f.name: getattr(micro, f.name) for f in fields(micro)}
        movable = {n: v for n, v in values.items() if isinstance(v, torch.Tensor | PrefixTree)}
        moved.append(replace(micro, **{name: value.to(device) for name, value in movable.items()}))
    return replace(batch, micro_batches=moved)
