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

from rlve.algorithms.packing import TrainSequence, build_train_batch
from rlve.distributed import World, split_by_tokens
from rlve.types import MicroBatch, TrainBatch


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
) -> TrainBatch:
    """This rank's micro-batches of `sequences`, with the step-wide counts; `packing` and
    `single_row` as `build_train_batch` takes them."""
    layout = {"max_tokens": max_tokens, "pad_token_id": pad_token_id, "packing": packing,
              "single_row": single_row}  # fmt: skip
    if not world.sharded:
        return build_train_batch(sequences, **layout)
    if not sequences:
        raise ValueError("no sequences to train on")
    share = split_by_tokens([len(s.token_ids) for s in sequences], world.size)[world.rank]
    mine = [sequences[i] for i in share]
    micro_batches = []
    if mine:
        packed = build_train_batch(mine, **layout)
        micro_batches = packed.micro_batches
    with_sampler = all(s.sampler_logprobs is not None for s in sequences)
    idle = world.max(len(micro_batches)) - len(micro_batches)
    micro_batches += [idle_micro_batch(pad_token_id, with_sampler) for _ in range(idle)]
    return TrainBatch(
        micro_batches=micro_batches,
        num_sequences=len(sequences),
        num_loss_tokens=sum(sum(s.loss_mask) for s in sequences),
    )


def batch_on(batch: TrainBatch, device: torch.device | str) -> TrainBatch:
    """`batch` with every tensor of its micro-batches moved to `device` (None fields stay None)."""
    moved = []
    for micro in batch.micro_batches:
        values = {f.name: getattr(micro, f.name) for f in fields(micro)}
        moved.append(replace(micro, **{name: value.to(device) for name, value in values.items()
                                        if isinstance(value, torch.Tensor)}))  # fmt: skip
    return replace(batch, micro_batches=moved)
