"""Rollout groups -> checked training sequences, each token with its advantage.

`sequences_from_groups` checks every group (bad input is skipped and counted, never trained on),
leaves out the rollouts a fault spoiled, and gives each clean trajectory (and each side call it
carries) one `TrainSequence`: its tokens, its loss mask, and its advantage, per episode or per
turn (assigned in rlve.algorithms.credit). rlve.algorithms.packing lays them out in
micro-batches.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rlve.algorithms.credit import assign_credit
from rlve.types import RolloutGroup, SideSequence, Trajectory, seat_rosters

logger = logging.getLogger(__name__)


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
    teacher_token_ids: list[int] | None = None
    """what a distillation teacher with a privileged view reads (Trajectory.teacher_view); None:
    it reads `token_ids`"""
    teacher_loss_mask: list[int] | None = None
    """1 on the sampled ids inside `teacher_token_ids`"""

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
    turn_gamma: float | None = None, turn_positions: bool = False, advantage: str = "group",
) -> GroupSequences:  # fmt: skip
    """Checks each group, assigns its credit (`assign_credit` of its clean rollouts: one
    advantage per episode, or per turn with `turn_gamma`) and returns one `TrainSequence` per
    clean trajectory with sampled tokens, and one per side call it carries (with the
    trajectory's whole-episode advantage). `advantage`: "group" (`group_advantages`) or
    "maxrl" (`maxrl_advantages`, which refuses a reward other than 0 and 1 with ValueError).
    Self-play seats are compared with the same seat of the group's other games, on their own
    rewards.

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
            sequences += _roster_sequences(rollouts, std_normalize, turn_gamma, turn_positions,
                                           advantage)  # fmt: skip
    return GroupSequences(sequences=sequences, skipped_groups=skipped, faulty_rollouts=faulty)


def _roster_sequences(
    rollouts: list[Trajectory], std_normalize: bool, turn_gamma: float | None, positions: bool,
    advantage: str,
) -> list[TrainSequence]:  # fmt: skip
    """The sequences of rollouts compared with each other (a group's games, or one seat of
    them), each with its credit (rlve.algorithms.credit); side calls share their trajectory's
    whole-episode advantage."""
    credits = assign_credit(rollouts, std_normalize=std_normalize, turn_gamma=turn_gamma,
                            turn_positions=positions, advantage=advantage)  # fmt: skip
    sequences = []
    for trajectory, credit in zip(rollouts, credits, strict=True):
        for part in [trajectory, *trajectory.side_sequences]:
            if sum(part.loss_mask) == 0:
                continue
            sequences.append(
                TrainSequence(
                    token_ids=list(part.token_ids),
                    loss_mask=list(part.loss_mask),
                    advantage=credit.advantage,
                    sampler_logprobs=list(part.sampler_logprobs) or None,
                    token_advantages=credit.token_advantages if part is trajectory else None,
                    **_teacher_fields(part),
                )
            )
    return sequences


def _teacher_fields(part: Trajectory | SideSequence) -> dict:
    """A trajectory's privileged teacher view as TrainSequence fields (none for a side call)."""
    view = part.teacher_view if isinstance(part, Trajectory) else None
    if view is None:
        return {}
    return {"teacher_token_ids": list(view.token_ids), "teacher_loss_mask": list(view.loss_mask)}
