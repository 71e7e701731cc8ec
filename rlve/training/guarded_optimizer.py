"""AdamW with its learning-rate schedule and a guard against bad steps.

Gradients are clipped and applied only when the loss and the gradient norm are finite; a step
that is not is dropped and counted, and `max_bad_steps` of them in a row raise TrainingDiverged.
"""

from __future__ import annotations

import functools
import logging
import math

import torch

from rlve.algorithms import lr_multiplier
from rlve.config import TrainerConfig
from rlve.distributed.fsdp import full
from rlve.reliability.kill_points import kill_point

logger = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """`max_bad_steps` optimizer steps in a row were skipped; keep the last good checkpoint."""


class GuardedOptimizer:
    """AdamW over `parameters`, the schedule of `config.lr_schedule`, and the bad-step count."""

    def __init__(self, parameters: list[torch.nn.Parameter], config: TrainerConfig) -> None:
        self.parameters = parameters
        self.max_grad_norm = config.max_grad_norm or math.inf
        self.max_bad_steps = config.max_bad_steps
        self.optimizer = torch.optim.AdamW(
            parameters,
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        schedule = functools.partial(
            lr_multiplier,
            schedule=config.lr_schedule,
            warmup_steps=config.warmup_steps,
            max_steps=config.max_steps * config.num_iterations * config.mini_batches,
            min_lr_ratio=config.min_lr_ratio,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)
        self.skipped_steps = 0
        self.bad_steps_in_a_row = 0

    @property
    def lr(self) -> float:
        """The learning rate the next update uses."""
        return self.scheduler.get_last_lr()[0]

    def apply(self, loss_is_finite: bool, step: int) -> float:
        """Clips and applies the accumulated gradients of trainer step `step`, or drops them when
        the loss or the gradient norm is not finite. Returns the pre-clip gradient norm (NaN
        when skipped)."""
        grad_norm = math.nan
        if loss_is_finite:
            norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.max_grad_norm)
            grad_norm = float(full(norm))  # sharded: the norm over every rank's shards
        if not math.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            reason = "gradient norm is not finite" if loss_is_finite else "loss is not finite"
            self.record_bad_step(reason, step)
            return grad_norm
        kill_point("optimizer_step", step + 1)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.bad_steps_in_a_row = 0
        return grad_norm

    def record_bad_step(self, reason: str, step: int) -> None:
        """Counts a skipped step; raises TrainingDiverged at `max_bad_steps` in a row."""
        self.skipped_steps += 1
        self.bad_steps_in_a_row += 1
        logger.warning("skipping optimizer step at step %d: %s", step, reason)
        if self.bad_steps_in_a_row >= self.max_bad_steps:
            raise TrainingDiverged(
                f"{self.bad_steps_in_a_row} steps in a row skipped (last: {reason}); "
                "resume from the last good checkpoint"
            )
