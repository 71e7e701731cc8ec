"""Rollout groups -> checked training sequences -> micro-batches packed by a token budget.

Two layouts, rows x row length within the budget either way. "padded": sequences sorted longest
first and packed greedily, one per right-padded row. "packed": sequences end to end in rows
(rlve.algorithms.packed_rows), position ids restarting at 0 at each, so little or no position is
padding. A sequence longer than the budget gets a micro-batch of its own (and a warning):
refusing it would stop an RL run over one long rollout, and the budget is a throughput knob, not
a hard limit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from rlve.algorithms import group_advantages
from rlve.algorithms.packed_rows import pack_into_rows
from rlve.algorithms.prefix_tree import build_prefix_tree, pack_by_new_tokens
from rlve.algorithms.turn_credit import token_advantages, turn_advantages, turn_returns
from rlve.types import (
    MicroBatch,
    RolloutGroup,
    SideSequence,
    TrainBatch,
    Trajectory,
    seat_rosters,
)

logger = logging.getLogger(__name__)

PACKINGS = ("padded", "packed")
"""micro-batch layouts: one right-padded sequence per row, or sequences end to end in rows"""


@dataclass(frozen=True)
class TrainSequence:
    """One sequence to train on: token ids, which of them to train, and its advantage."""

    token_ids: list[int]
    loss_mask: list[int]
    """1 on trained tokens; never 1 on the first token (nothing predicts it)"""
    advantage: float = 0.0
    sampler_logprobs: list[float] | None = None
    """the sampler's log-prob of every token (0.0 off the mask), or None"""
    token_advantages: list[float] | None = None
    """one advantage per token (per-turn credit: each turn's own); None: `advantage` on every
    trained token"""

    def advantages(self) -> list[float]:
        """The advantage of every token, 0.0 off the loss mask."""
        own = self.token_advantages or [self.advantage] * len(self.loss_mask)
        return [a if m else 0.0 for a, m in zip(own, self.loss_mask, strict=True)]


@dataclass(frozen=True)
class GroupSequences:
    """What `sequences_from_groups` made of a list of groups."""

    sequences: list[TrainSequence]
    skipped_groups: int
    """groups left out because of bad input (each one logged with its reason)"""
    faulty_rollouts: int = 0
    """rollouts left out because a fault spoiled them (counted under faults/* already)"""


def check_sequence(token_ids: Sequence[int], loss_mask: Sequence[int]) -> str | None:
    """Why a (token_ids, loss_mask) pair cannot be trained on, or None when it can."""
    if not token_ids:
        return "no token ids (a text-only engine cannot train)"
    if len(loss_mask) != len(token_ids):
        return f"loss_mask has {len(loss_mask)} entries for {len(token_ids)} tokens"
    if any(m not in (0, 1) for m in loss_mask):
        return "loss_mask holds values other than 0 and 1"
    if loss_mask[0]:
        return "loss_mask is 1 on the first token, which no earlier token predicts"
    return None


def _trajectory_problem(trajectory: Trajectory, needs_sampler_logprobs: bool) -> str | None:
    if not math.isfinite(trajectory.reward):
        return f"reward is {trajectory.reward}"
    for index, side in enumerate(trajectory.side_sequences):
        problem = _sequence_problem(side, needs_sampler_logprobs)
        if problem:
            return f"side call {index}: {problem}"
    for index, seat in enumerate(trajectory.seats):
        problem = _trajectory_problem(seat, needs_sampler_logprobs) if seat.token_ids else None
        if problem:  # a seat that never played has no tokens, and nothing to train
            return f"seat {index + 1}: {problem}"
    return _sequence_problem(trajectory, needs_sampler_logprobs)


def _sequence_problem(
    trajectory: Trajectory | SideSequence, needs_sampler_logprobs: bool
) -> str | None:
    """What is wrong with the token fields of a Trajectory or SideSequence, or None."""
    problem = check_sequence(trajectory.token_ids, trajectory.loss_mask)
    if problem:
        return problem
    logprobs = trajectory.sampler_logprobs
    if not logprobs:
        return (
            "no sampler log-probs (tis_cap and old_logprobs=sampler need them)"
            if needs_sampler_logprobs
            else None
        )
    if len(logprobs) != len(trajectory.token_ids):
        return f"{len(logprobs)} sampler log-probs for {len(trajectory.token_ids)} tokens"
    if not all(
        math.isfinite(lp) for lp, m in zip(logprobs, trajectory.loss_mask, strict=True) if m
    ):
        return "a sampler log-prob of a sampled token is not finite"
    return None


def _group_problem(group: RolloutGroup, needs_sampler_logprobs: bool) -> str | None:
    """What is wrong with the clean rollouts of a group that has some."""
    if not group.trajectories:
        return "the group is empty"
    for index, trajectory in enumerate(group.trajectories):
        if trajectory.fault is not None:
            continue
        problem = _trajectory_problem(trajectory, needs_sampler_logprobs)
        if problem:
            return f"trajectory {index}: {problem}"
    if all(t.num_sampled_tokens == 0 for t in group.clean):
        return "no trajectory has a sampled token"
    return None


def sequences_from_groups(
    groups: Sequence[RolloutGroup], *, std_normalize: bool, needs_sampler_logprobs: bool = False,
    turn_gamma: float | None = None, turn_positions: bool = False,
) -> GroupSequences:  # fmt: skip
    """Checks each group, computes its advantages (`group_advantages` of the clean rollouts'
    `trained_reward`) and returns one `TrainSequence` per clean trajectory with sampled tokens,
    and one per side call it carries (with the trajectory's advantage). With `turn_gamma`, each
    turn of a trajectory gets its own advantage instead (rlve.algorithms.turn_credit, discount
    `turn_gamma`; with `turn_positions` compared with the turns after the same conversation);
    side calls keep the whole-episode one. Self-play seats are compared with the same seat of
    the group's other games, on their own rewards.

    Rollouts a fault spoiled are left out, of the loss and of their group's baseline: an engine
    error or a timeout says nothing about the model. A group with bad input (empty, non-finite
    reward or sampler log-prob, mismatched lengths, no sampled token at all) is skipped, logged
    and counted. A trajectory without sampled tokens still counts in its group's mean reward but
    is not trained on (it has no token to learn on).
    """
    sequences: list[TrainSequence] = []
    skipped = faulty = 0
    for group in groups:
        clean = group.clean
        faulty += len(group.trajectories) - len(clean)
        if group.trajectories and not clean:
            continue
        problem = _group_problem(group, needs_sampler_logprobs)
        if problem:
            logger.warning(
                "skipping group (example %s, %s): %s", group.example_id, group.env_name, problem
            )
            skipped += 1
            continue
        for rollouts in [clean, *seat_rosters(clean)]:
            sequences += _roster_sequences(rollouts, std_normalize, turn_gamma, turn_positions)
    return GroupSequences(sequences=sequences, skipped_groups=skipped, faulty_rollouts=faulty)


def _roster_sequences(
    rollouts: list[Trajectory], std_normalize: bool, turn_gamma: float | None, positions: bool
) -> list[TrainSequence]:
    """The sequences of rollouts compared with each other (a group's games, or one seat of
    them), each with its group-relative advantage (per turn with `turn_gamma`)."""
    rewards = torch.tensor([[t.trained_reward for t in rollouts]], dtype=torch.float64)
    advantages = group_advantages(rewards, std_normalize=std_normalize)[0].tolist()
    per_token = [None] * len(rollouts)
    if turn_gamma is not None:
        per_token = _turn_token_advantages(rollouts, turn_gamma, std_normalize, positions)
    sequences = []
    for trajectory, advantage, tokens in zip(rollouts, advantages, per_token, strict=True):
        parts = [trajectory, *trajectory.side_sequences]  # side calls share the advantage
        for part in parts:
            if sum(part.loss_mask) == 0:
                continue
            sequences.append(
                TrainSequence(
                    token_ids=list(part.token_ids),
                    loss_mask=list(part.loss_mask),
                    advantage=float(advantage),
                    sampler_logprobs=list(part.sampler_logprobs) or None,
                    token_advantages=tokens if part is trajectory else None,
                )
            )
    return sequences


def _turn_token_advantages(
    clean: list[Trajectory], gamma: float, std_normalize: bool, positions: bool
) -> list[list[float]]:
    """Each trajectory's per-token advantages from its turns' returns (rlve.algorithms.
    turn_credit); the rubric's reward is the episode's, its turn rewards say when it was
    earned. With `positions` a turn's position is the token ids before it."""
    returns = []
    for t in clean:
        earned = t.turn_rewards or [0.0] * len(t.turn_spans)
        if len(earned) != len(t.turn_spans):
            raise ValueError(f"a trajectory of {t.env_name} has {len(t.turn_spans)} sampled turns "
                             f"but {len(earned)} turn rewards")  # fmt: skip
        returns.append(turn_returns(earned, t.trained_reward, gamma))
    keys = None
    if positions:
        keys = [[tuple(t.token_ids[:start]) for start, _ in t.turn_spans] for t in clean]
    per_turn = turn_advantages(returns, std_normalize=std_normalize, positions=keys)
    return [
        token_advantages(len(t.token_ids), t.turn_spans, advantages)
        for t, advantages in zip(clean, per_turn, strict=True)
    ]


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
