"""The teacher of on-policy distillation: its log-prob of every token the student sampled.

The teacher reads each sequence as the student played it, or as the environment's privileged
view shows it (`TrainSequence.teacher_token_ids`), and scores exactly the student's sampled ids
at temperature 1, with no gradient: held here, through the trainer's own packing and scorer
(prefix tree included), or on a server (`trainer.distill.teacher_server`). `Teacher.distill`
turns the scores into per-token advantages (rlve.algorithms.distill).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from rlve.algorithms.distill import DistillStats, distilled_sequence
from rlve.algorithms.packed_rows import sequence_ids
from rlve.algorithms.train_sequences import TrainSequence
from rlve.config import InferenceConfig, TrainerConfig
from rlve.config.distill import OWN_TEACHERS, DistillConfig
from rlve.distributed import World
from rlve.models import load_tokenizer
from rlve.training.logprobs import TokenScorer
from rlve.training.policy import PolicyModels, frozen_scorer
from rlve.types import MicroBatch, TrainBatch

logger = logging.getLogger(__name__)

BuildBatch = Callable[[Sequence[TrainSequence]], TrainBatch]
"""packs sequences into micro-batches on the trainer's device (Trainer._build_batch)"""
ScoreWith = Callable[[TokenScorer, MicroBatch, float], tuple[Tensor, Tensor]]
"""(log-probs, entropies) of a micro-batch under a scorer at a temperature (Trainer._logprobs)"""
ScoreMicroBatch = Callable[[MicroBatch], Tensor]
"""[B, T] log-probs of a micro-batch's tokens under the teacher at temperature 1 (no grad)"""
SequenceScorer = Callable[[Sequence[TrainSequence]], list[list[float]]]
"""the teacher's log-prob of each masked token of each sequence it reads, in order"""


def check_same_tokenizer(student, teacher, teacher_name: str) -> None:
    """Raise ValueError naming the first token id whose token differs between the two
    tokenizers (or the sizes): the teacher must score the student's ids as the same text."""
    ours, theirs = student.get_vocab(), teacher.get_vocab()
    by_id = {i: t for t, i in ours.items()}
    their_by_id = {i: t for t, i in theirs.items()}
    for token_id in range(max(len(by_id), len(their_by_id))):
        mine, other = by_id.get(token_id), their_by_id.get(token_id)
        if mine != other:
            raise ValueError(
                f"trainer.distill.teacher={teacher_name!r} has another tokenizer than the "
                f"student: token id {token_id} is {mine!r} for the student and {other!r} for the "
                "teacher; a teacher must score the student's own token ids"
            )


def teacher_sequences(sequences: Sequence[TrainSequence]) -> list[TrainSequence]:
    """What the teacher reads of each sequence: its privileged view, else the sequence itself,
    with the sampled tokens as the loss mask. Raises ValueError where a view's sampled ids are
    not the student's (a view must hold them exactly, in order)."""
    read = []
    for index, sequence in enumerate(sequences):
        if sequence.teacher_token_ids is None:
            read.append(TrainSequence(sequence.token_ids, sequence.loss_mask))
            continue
        ids, mask = sequence.teacher_token_ids, sequence.teacher_loss_mask or []
        theirs = [t for t, m in zip(ids, mask, strict=True) if m]
        ours = [t for t, m in zip(sequence.token_ids, sequence.loss_mask, strict=True) if m]
        if theirs != ours:
            raise ValueError(
                f"sequence {index}: the teacher's view holds other sampled ids than the student's "
                f"({len(theirs)} against {len(ours)} tokens)"
            )
        read.append(TrainSequence(ids, mask))
    return read


def sampled_logprobs(batch: TrainBatch, logps: Sequence[Tensor]) -> dict[int, list[float]]:
    """Each sequence's log-probs of its masked tokens, by its index in the list the batch was
    built from. A micro-batch's masked tokens, read row by row, come sequence after sequence in
    its `sequence_index` order (padded: a row each; packed: their places in the rows)."""
    out: dict[int, list[float]] = {}
    for micro, logp in zip(batch.micro_batches, logps, strict=True):
        flat = logp[micro.loss_mask].tolist()
        if micro.position_ids is None:  # padded: a sequence a row
            counts = micro.loss_mask.sum(dim=1).tolist()
        else:  # packed: each sequence's masked tokens, found by their position ids
            ids = sequence_ids(micro.position_ids)[micro.loss_mask]
            counts = torch.bincount(ids, minlength=len(micro.sequence_index)).tolist()
        start = 0
        for index, count in zip(micro.sequence_index, counts, strict=True):
            out[index] = flat[start : start + count]
            start += count
    return out


@dataclass
class ScoreCheck:
    """The start-up check: the same ids scored twice agree within the dtype's tolerance."""

    max_difference: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_difference <= self.tolerance


def repeat_tolerance(dtype: str, logps: Sequence[float]) -> float:
    """How far two scorings of the same ids may differ: 4 units in the last place of the compute
    dtype at the largest log-prob's magnitude (a reduction taken in another order rounds
    differently, e.g. on a GPU's atomics; the same kernels on a CPU agree exactly)."""
    eps = torch.finfo(torch.bfloat16 if dtype == "bfloat16" else torch.float32).eps
    return 4 * eps * max([1.0, *(abs(x) for x in logps)])


def local_scorer(build_batch: BuildBatch, score: ScoreMicroBatch) -> SequenceScorer:
    """Scores sequences with a model held here, through the trainer's packing and prefix tree."""

    @torch.no_grad()
    def scored(read: Sequence[TrainSequence]) -> list[list[float]]:
        batch = build_batch(read)
        by_index = sampled_logprobs(batch, [score(micro) for micro in batch.micro_batches])
        return [by_index[i] for i in range(len(read))]

    return scored


def server_scorer(engine) -> SequenceScorer:
    """Scores sequences on a server: `engine.many_prompt_logprobs` (a RemoteVLLMEngine's: the
    `prompt_logprobs` of each sequence, all in flight at once)."""

    def scored(read: Sequence[TrainSequence]) -> list[list[float]]:
        every = engine.many_prompt_logprobs([list(s.token_ids) for s in read])
        # every[i][t - 1] is the log-prob of token t: the first token has none (and no mask)
        return [[lp for lp, m in zip(lps, s.loss_mask[1:], strict=True) if m]
                for lps, s in zip(every, read, strict=True)]  # fmt: skip

    return scored


class Teacher:
    """Scores the student's sampled tokens and adds them to the advantages (trainer.distill)."""

    def __init__(self, config: DistillConfig, dtype: str, score: SequenceScorer) -> None:
        self.config = config
        self.dtype = dtype
        self.score = score
        self.check: ScoreCheck | None = None
        """the start-up check, taken on the first step's sequences"""

    def logprobs(self, sequences: Sequence[TrainSequence]) -> list[list[float]]:
        """The teacher's log-prob of each sampled token of each sequence, in order. The first
        call scores them twice and logs how far the two agree (`check`)."""
        read = teacher_sequences(sequences)
        scores = self.score(read)
        if self.check is None:
            again = self.score(read)
            flat = [x for s in scores for x in s]
            difference = max((abs(a - b) for s, t in zip(scores, again, strict=True)
                              for a, b in zip(s, t, strict=True)), default=0.0)  # fmt: skip
            self.check = ScoreCheck(difference, repeat_tolerance(self.dtype, flat))
            log = logger.info if self.check.passed else logger.warning
            verdict = "" if self.check.passed else ": the teacher's scores are not repeatable"
            log("teacher %r: the same ids scored twice differ by at most %.3g (tolerance %.3g)%s",
                self.config.teacher, difference, self.check.tolerance, verdict)  # fmt: skip
        return scores

    def distill(self, sequences: Sequence[TrainSequence]) -> tuple[list[TrainSequence], dict]:
        """`sequences` with the teacher's signal in their advantages, and `distill/*` metrics."""
        stats = DistillStats()
        c = self.config
        distilled = [
            distilled_sequence(s, teacher, coef=c.coef, reward_weight=c.reward_weight,
                               clip_low=c.clip_low, clip_high=c.clip_high, stats=stats)
            for s, teacher in zip(sequences, self.logprobs(sequences), strict=True)
        ]  # fmt: skip
        metrics = stats.metrics()
        metrics["distill/repeat_difference"] = self.check.max_difference  # set by `logprobs`
        return distilled, metrics


def build_teacher(
    config: TrainerConfig, world: World, tokenizer, policy: PolicyModels,
    logprobs: ScoreWith, build_batch: BuildBatch,
) -> Teacher:  # fmt: skip
    """The trainer's distillation teacher: the live policy ("self"), the starting weights
    ("initial": the reference, `PolicyModels.reference`), or another model with the student's
    tokenizer, loaded frozen beside the policy or scored on `teacher_server`."""
    name = config.distill.teacher
    if world.sharded:
        raise ValueError("trainer.distill under torchrun (sharded) is not built: run the "
                         "distillation in one process (one GPU, or the CPU)")  # fmt: skip
    if name not in OWN_TEACHERS:
        check_same_tokenizer(tokenizer, load_tokenizer(name), name)
    if config.distill.teacher_server is not None:
        from rlve.inference.remote_engine import RemoteVLLMEngine

        engine = RemoteVLLMEngine([config.distill.teacher_server], tokenizer, InferenceConfig())
        logger.info("distillation teacher: %s on %s", name, config.distill.teacher_server)
        return Teacher(config.distill, config.dtype, server_scorer(engine))
    held: TokenScorer | None = None  # "initial": the reference, which LoRA reads adapter off
    if name == "self":
        held = policy.scorer
    elif name != "initial":
        held = frozen_scorer(name, config)

    def score(micro: MicroBatch) -> Tensor:
        scorer, context = policy.reference() if held is None else (held, nullcontext())
        with context:
            return logprobs(scorer, micro, 1.0)[0]

    logger.info("distillation teacher: %s", name)
    return Teacher(config.distill, config.dtype, local_scorer(build_batch, score))
