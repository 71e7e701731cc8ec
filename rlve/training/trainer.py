"""The torch side of rlve: one optimizer step of RL (GRPO / DAPO / CISPO) or SFT at a time.

`Trainer.train_step(groups)` turns rollout groups into advantages, packs them into micro-batches
by a token budget, accumulates the policy loss over them (token-level losses divide by the whole
step's token count, so accumulation equals one big batch) and steps AdamW. A step whose loss or
gradient is not finite is skipped and counted; `max_bad_steps` in a row raise TrainingDiverged.
Checkpoints resume exactly; `named_weights_for_inference()` feeds the vLLM weight sync.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, replace

import numpy as np
import torch
from torch import Tensor

from rlve.algorithms import LossStats, token_mean
from rlve.algorithms.packing import split_evenly
from rlve.algorithms.train_sequences import TrainSequence, sequences_from_groups
from rlve.config import TrainerConfig
from rlve.distributed import World
from rlve.models import load_tokenizer
from rlve.models.precision import resolve_dtype
from rlve.sync.placement import resolve_device
from rlve.sync.weight_stream import WeightStream
from rlve.training.checkpoint import (
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from rlve.training.export import export_model, merged_named_weights
from rlve.training.flops import ModelShape, step_flops
from rlve.training.guarded_optimizer import GuardedOptimizer
from rlve.training.logprobs import TokenScorer
from rlve.training.micro_loss import micro_batch_loss
from rlve.training.packed_attention import check_packable, separates_sequences, shares_prefixes
from rlve.training.peak import run_peak
from rlve.training.policy import build_policy
from rlve.training.rank_batch import batch_on, build_rank_batch
from rlve.training.step_metrics import Update, step_metrics, with_perf
from rlve.training.teacher import Teacher, build_teacher
from rlve.training.tree_plan import resolved, with_attention_plan
from rlve.types import MicroBatch, RolloutGroup, TrainBatch, Trajectory

logger = logging.getLogger(__name__)

SftExample = Trajectory | tuple[Sequence[int], Sequence[int]]
"""an SFT sequence: a token-exact Trajectory, or a (token_ids, loss_mask) pair"""


class Trainer:
    """Holds the model (full or LoRA), the optimizer and schedule, and the step counter.

    `version` counts train/SFT steps taken: the weights pushed to the sampler after n steps are
    version n, so a trajectory with an older `weight_version` is off-policy.

    Under torchrun (`world.sharded`) every rank holds one, its parameters sharded by FSDP2; each
    step's sequences are split across the ranks by token count, and the token and sequence counts
    of the losses are the whole step's, so N ranks take the same step as one process.
    """

    def __init__(self, config: TrainerConfig, world: World = World()) -> None:
        config.validate()
        device = resolve_device(config.device)
        config = replace(config, device=device, dtype=resolve_dtype(config.dtype, device))
        self.config = config
        self.world = world
        random.seed(config.seed)
        np.random.seed(config.seed)
        torch.manual_seed(config.seed)  # LoRA init and dropout draw from it
        self.device = torch.device(config.device)
        if self.device.type == "cpu" and config.cpu_threads is not None:
            torch.set_num_threads(config.cpu_threads)
        self.tokenizer = load_tokenizer(config.model)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)

        policy = build_policy(config, world)
        self.model, self.causal_lm = policy.model, policy.causal_lm
        self.scorer, self.policy = policy.scorer, policy
        if config.packing == "packed":
            check_packable(self.causal_lm.config)
        model_config = self.causal_lm.config
        self._share_prefixes = (config.packing == "packed" and config.share_prefixes
                                and shares_prefixes(model_config))  # fmt: skip
        """forward each micro-batch through its prefix tree (the attention can read one)"""
        try:
            self.shape: ModelShape | None = ModelShape.of(model_config)
        except AttributeError:  # a config without Llama-style fields: no FLOP count, no MFU
            self.shape = None
        self.peak = run_peak(self.device, config.dtype, config.peak_tflops)  # perf/mfu's
        resolved(config.tree_attention, self.device)  # refuses flex on the CPU at start

        self.teacher: Teacher | None = None
        """scores the sampled tokens for on-policy distillation (trainer.distill)"""
        if config.distill.enabled:
            self.teacher = build_teacher(config, world, self.tokenizer, policy, self._logprobs,
                                         self._build_batch)  # fmt: skip

        self.trainable_parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.guard = GuardedOptimizer(self.trainable_parameters, config)
        self.optimizer, self.scheduler = self.guard.optimizer, self.guard.scheduler
        self.step = 0

    @property
    def version(self) -> int:
        return self.step

    @property
    def skipped_steps(self) -> int:
        """Optimizer steps skipped so far (bad input, a loss or gradient that is not finite)."""
        return self.guard.skipped_steps

    # -----------------------------------------------------------------------------------------
    # RL
    # -----------------------------------------------------------------------------------------

    def train_step(self, groups: Sequence[RolloutGroup]) -> dict[str, float]:
        """One RL step on `groups`: `num_iterations` passes over `mini_batches` parts of them, one
        optimizer step per part; returns the step's metrics.

        Old log-probs (the behaviour policy of the ratio, `old_logprobs`): "sampler" takes the
        sampler's; "recompute" takes a no-grad pass under the weights before the first update
        (skipped when there is a single update: it would equal the detached log-probs). Groups
        with bad input are skipped (`train/skipped_groups`), rollouts a fault spoiled left out
        (`train/faulty_rollouts`); a step with nothing left to train
        is a skipped step like a NaN one (`train/skipped_steps`, cumulative). train/* metrics
        are means over the step's updates; clip fractions and ratios count every update's tokens.
        """
        started = time.perf_counter()
        config = self.config
        sampler_read = config.tis_cap is not None or config.old_logprobs == "sampler"
        grouped = sequences_from_groups(
            groups,
            std_normalize=config.std_normalize,
            needs_sampler_logprobs=sampler_read or self.teacher is not None,  # d_t reads them
            turn_gamma=config.turn_gamma if config.credit == "turn" else None,
            turn_positions=config.turn_baseline == "position",
            advantage=config.advantage,
        )
        metrics = {"train/skipped_groups": float(grouped.skipped_groups),
                   "train/faulty_rollouts": float(grouped.faulty_rollouts)}  # fmt: skip
        if not grouped.sequences:
            if grouped.skipped_groups:  # bad input everywhere: counts towards TrainingDiverged
                self.guard.record_bad_step("no group left to train on", self.step)
            else:  # nothing to learn from (no signal, or only faulty rollouts): not an error
                self.guard.skipped_steps += 1
                logger.info("step %d: no rollout group to train on; skipping the update", self.step)
            self.step += 1
            return {**metrics, "train/skipped_steps": float(self.skipped_steps),
                    "perf/train_s": time.perf_counter() - started}  # fmt: skip

        sequences = grouped.sequences
        if self.teacher is not None:  # the teacher scores before the update moves the weights
            sequences, distill_metrics = self.teacher.distill(sequences)
            metrics.update(distill_metrics)
        skip = config.kl_beta == 0  # a KL term needs every token, advantage or not
        parts = split_evenly(sequences, config.mini_batches)
        batches = [self._build_batch(part, skip_zero_advantage=skip) for part in parts]
        recompute = len(batches) > 1 or config.num_iterations > 1
        # all old log-probs are taken before the first update moves the weights
        for batch in batches:
            if config.old_logprobs == "sampler":
                for micro in batch.micro_batches:
                    micro.old_logprobs = micro.sampler_logprobs
            elif recompute:
                self._fill_logprobs(batch, "old_logprobs", use_reference=False)
            if config.kl_beta > 0:
                self._fill_logprobs(batch, "ref_logprobs", use_reference=True)
        updates = [self._policy_update(b) for _ in range(config.num_iterations) for b in batches]
        self.step += 1
        micros = [m for b in batches for m in b.micro_batches]
        # with old_logprobs=sampler the old log-probs are the sampler's: nothing to compare
        compare = config.old_logprobs == "recompute"
        metrics.update(step_metrics(
            updates,
            sampler=compare and all(m.sampler_logprobs is not None for m in micros),
            tis_mode=config.tis_mode if config.tis_cap is not None else None,
            entropy_selection=config.entropy_quantile < 1.0,
        ))  # fmt: skip
        metrics["train/num_tokens"] = float(sum(b.num_loss_tokens for b in batches))
        idle = sum(not m.sequence_index for m in micros)  # sharded: a rank with less work waits
        metrics["perf/idle_micro_batches"] = self.world.sum([float(idle)])[0]
        metrics["train/skipped_steps"] = float(self.skipped_steps)
        no_grad_passes = int(recompute and config.old_logprobs == "recompute")
        no_grad_passes += int(config.kl_beta > 0) + int(self.teacher is not None)
        flops = self.shape and step_flops(self.shape, micros, config.num_iterations,
                                          no_grad_passes)  # fmt: skip
        return with_perf(metrics, batches, started, config.num_iterations, flops, self.peak)

    def _policy_update(self, batch: TrainBatch) -> Update:
        """One optimizer step on `batch` (accumulated over its micro-batches)."""
        config = self.config
        num_tokens = batch.num_loss_tokens
        forwarded = float(sum(m.num_loss_tokens for m in batch.micro_batches))
        lr = self.guard.lr
        stats: list[LossStats] = []
        kl_sum = 0.0

        def loss_of(logp: Tensor, micro: MicroBatch, entropy: Tensor) -> Tensor:
            nonlocal kl_sum
            loss, micro_stats, micro_kl = micro_batch_loss(config, logp, micro, batch, entropy)
            kl_sum += micro_kl
            if micro.num_loss_tokens:  # an idle micro-batch (sharded) has no statistics
                stats.append(micro_stats)
            return loss

        finite, loss_sum, entropy_sum = self._accumulate(batch, loss_of, config.temperature)
        grad_norm = self.guard.apply(finite, self.step)
        loss_sum, entropy_sum, kl_sum, forwarded = self.world.sum(
            [loss_sum, entropy_sum, kl_sum, forwarded]
        )
        metrics = {
            "train/loss": loss_sum if finite else math.nan,
            "train/grad_norm": grad_norm,
            "train/entropy": entropy_sum / forwarded,  # of the tokens that were forwarded
            "train/lr": lr,
        }
        if config.kl_beta > 0:
            metrics["train/kl"] = kl_sum / num_tokens
        every_rank = [s for rank_stats in self.world.gather(stats) for s in rank_stats]
        return metrics, LossStats.combine(every_rank) if finite else None

    # -----------------------------------------------------------------------------------------
    # SFT
    # -----------------------------------------------------------------------------------------

    def sft_step(self, examples: Sequence[SftExample]) -> dict[str, float]:
        """One optimizer step of cross-entropy on the masked (assistant) tokens, averaged over
        all masked tokens of `examples` (so micro-batching does not change the step).

        Raises:
            ValueError: no examples, a malformed one (named by index), or no masked token at all.
        """
        started = time.perf_counter()
        sequences = []
        for example in examples:
            if isinstance(example, Trajectory):
                example = (example.token_ids, example.loss_mask)
            token_ids, loss_mask = example
            sequences.append(TrainSequence(list(token_ids), list(loss_mask)))
        batch = self._build_batch(sequences)
        num_tokens = batch.num_loss_tokens
        if num_tokens == 0:
            raise ValueError("every token of the SFT batch is masked out; nothing to train on")
        lr = self.guard.lr
        finite, loss_sum, entropy_sum = self._accumulate(
            batch, lambda logp, micro, _: -token_mean(logp, micro.loss_mask, num_tokens), 1.0
        )
        grad_norm = self.guard.apply(finite, self.step)
        loss_sum, entropy_sum = self.world.sum([loss_sum, entropy_sum])
        self.step += 1
        metrics = {
            "train/loss": loss_sum if finite else math.nan,
            "train/grad_norm": grad_norm,
            "train/entropy": entropy_sum / num_tokens,
            "train/lr": lr,
            "train/num_tokens": float(num_tokens),
            "train/skipped_steps": float(self.skipped_steps),
        }
        flops = self.shape and step_flops(self.shape, batch.micro_batches, trained_passes=1)
        return with_perf(metrics, [batch], started, 1, flops, self.peak)

    # -----------------------------------------------------------------------------------------
    # Shared pieces
    # -----------------------------------------------------------------------------------------

    def _accumulate(
        self,
        batch: TrainBatch,
        loss_of: Callable[[Tensor, MicroBatch, Tensor], Tensor],
        temperature: float,
    ) -> tuple[bool, float, float]:
        """Forward and backward each micro-batch of `batch` with the loss
        `loss_of(logp, micro, entropy)`, accumulating gradients: RL and SFT alike. Returns
        (finite on every rank, this rank's summed loss, its summed entropy of the trained
        tokens); one process stops at the first loss that is not finite."""
        loss_sum = entropy_sum = 0.0
        finite = True
        for micro in batch.micro_batches:
            logp, entropy = self._logprobs(self.scorer, micro, temperature)
            loss = loss_of(logp, micro, entropy)
            if not self._backward(loss):
                finite = False
                if not self.world.sharded:  # sharded, every rank runs every backward
                    break
            loss_sum += loss.item()
            entropy_sum += float(entropy[micro.loss_mask].sum())
        return self.world.all(finite), loss_sum, entropy_sum

    def _backward(self, loss: Tensor) -> bool:
        """Backpropagates `loss`; False when it is not finite. Sharded, it backpropagates even
        then (FSDP's gradient reduction is a collective: every rank runs every backward), and
        FSDP averages the ranks' gradients where the step needs their sum: hence the factor."""
        finite = bool(torch.isfinite(loss))
        if finite or self.world.sharded:
            (loss * self.world.size).backward()
        return finite

    def _build_batch(
        self, sequences: Sequence[TrainSequence], skip_zero_advantage: bool = False
    ) -> TrainBatch:
        """This rank's part of `sequences`, packed, on the trainer's device."""
        batch = build_rank_batch(
            sequences,
            self.world,
            max_tokens=self.config.max_tokens_per_microbatch,
            pad_token_id=self.pad_token_id,
            packing=self.config.packing,
            single_row=separates_sequences(self.causal_lm.config),  # one row, no padding
            share_prefixes=self._share_prefixes,
            skip_zero_advantage=skip_zero_advantage,
        )
        batch = with_attention_plan(batch, self.config.tree_attention, self.device)
        return batch_on(batch, self.device)

    def _logprobs(
        self, scorer: TokenScorer, micro: MicroBatch, temperature: float | None = None
    ) -> tuple[Tensor, Tensor]:
        return scorer(
            micro.input_ids,
            micro.attention_mask,
            micro.loss_mask,
            temperature=self.config.temperature if temperature is None else temperature,
            chunk_tokens=self.config.logprob_chunk_tokens,
            position_ids=micro.position_ids,
            prefix_tree=micro.prefix_tree,
        )

    @torch.no_grad()
    def _fill_logprobs(self, batch: TrainBatch, attribute: str, use_reference: bool) -> None:
        """Sets `attribute` of every micro-batch to no-grad log-probs of the current weights, or
        of the reference (`PolicyModels.reference`)."""
        scorer, context = self.policy.reference() if use_reference else (self.scorer, nullcontext())
        with context:
            for micro in batch.micro_batches:
                setattr(micro, attribute, self._logprobs(scorer, micro)[0])

    @torch.no_grad()
    def sequence_logprob(self, token_ids: Sequence[int], loss_mask: Sequence[int]) -> float:
        """Sum of the masked tokens' log-probs at the sampling temperature (no gradient)."""
        batch = self._build_batch([TrainSequence(list(token_ids), list(loss_mask))])
        logp, _ = self._logprobs(self.scorer, batch.micro_batches[0])
        return float(logp.sum())

    # -----------------------------------------------------------------------------------------
    # Checkpoints, export, weights for the sampler
    # -----------------------------------------------------------------------------------------

    def save(self, root: str, extra: dict | None = None) -> str:
        """Checkpoint into `root/step_<step>` (atomic; keeps the newest `keep_checkpoints`; every
        rank calls it). `extra` is stored as is and returned by `resume` (curriculum, data
        position...)."""
        state = {
            "scheduler": self.scheduler.state_dict(),
            "rng": self.world.gather(capture_rng_state()),
            "step": self.step,
            "skipped_steps": self.skipped_steps,
            "bad_steps_in_a_row": self.guard.bad_steps_in_a_row,
            "config": asdict(self.config),
            "extra": extra or {},
        }
        return save_checkpoint(root, self.step, self.model, self.optimizer, state,
                               self.config.keep_checkpoints, self.world)  # fmt: skip

    def resume(self, path: str) -> dict:
        """Restores weights, optimizer, scheduler, rng states and step from a checkpoint made
        by `save` with the same config, on any number of ranks; returns its `extra`."""
        state = load_checkpoint(path, self.model, self.optimizer)
        self.scheduler.load_state_dict(state["scheduler"])
        rng = state["rng"]  # one per rank that saved; a rank the saving run lacked takes rank 0's
        restore_rng_state(rng[self.world.rank] if self.world.rank < len(rng) else rng[0])
        self.step = state["step"]
        self.guard.skipped_steps = state["skipped_steps"]
        self.guard.bad_steps_in_a_row = state["bad_steps_in_a_row"]
        return state["extra"]

    def named_weights_for_inference(self) -> WeightStream:
        """Every tensor vLLM loads, in HF checkpoint names, one at a time (under FSDP every rank
        must read them all): LoRA merged into the base weights, peft prefixes stripped,
        `lm_head.weight` included even when tied to the embedding."""
        return merged_named_weights(self.causal_lm)

    def export(self, path: str) -> str:
        """A merged HF model directory (config, model.safetensors, tokenizer) at `path`,
        loadable by transformers' AutoModelForCausalLM and by vLLM; written by rank 0."""
        weights = self.named_weights_for_inference()
        if not self.world.is_main:
            for _ in weights:  # the other ranks help gather each tensor
                pass
            return path
        return export_model(path, weights, self.causal_lm, self.tokenizer, self.config.model)
