"""A run's loss settings: those left None take the values its loss defines (the loss's
registration, `rlve.algorithms.register_loss(defaults=...)`), so that `trainer.loss=grpo` and
`algorithm=grpo` are the same run; and the explicit choices that depart from the loss's
definition, said when the run starts.

Imports `rlve.algorithms` (torch) only inside its functions, as the rest of `rlve.config` does,
and no config class (they call it from their `validate`: a cycle), hence the `Any`s.
"""

from __future__ import annotations

import logging
from typing import Any

from rlve.config.checks import require

log = logging.getLogger(__name__)

TRAINER_SETTINGS = ("eps_low", "eps_high", "is_cap", "std_normalize")
"""the `trainer.*` fields whose None means "the loss's own" (rlve.algorithms.LOSS_SETTINGS)"""
ROLLOUT_SETTINGS = ("dynamic_sampling",)
"""the `rollout.*` fields whose None means "the loss's own\""""
STD_NORMALIZING = ("grpo", "dapo", "gspo", "gmpo")
"""built-in losses whose definition divides a group's advantages by its reward std"""
SYMMETRIC_CLIP = ("grpo", "dr_grpo")
"""built-in losses whose definition clips the ratio symmetrically"""


def fill_loss_settings(trainer: Any, rollout: Any = None) -> None:
    """In a TrainerConfig (and its run's RolloutConfig), set each loss setting left None to the
    value `trainer.loss` defines (a hyper-parameter the loss does not read stays None). One set
    explicitly that the loss does not read is refused: the run would not use it."""
    from rlve.algorithms import find_loss

    try:
        loss = find_loss(trainer.loss)
    except ValueError as exc:
        raise ValueError(f"trainer.loss: {exc}") from None
    own = loss.settings()
    reads = [name for name in TRAINER_SETTINGS if name in loss.uses]
    for name in TRAINER_SETTINGS:
        value = getattr(trainer, name)
        require(
            value is None or own[name] is not None,
            f"trainer.{name}={value} is not read by trainer.loss={trainer.loss!r} (of "
            f"eps_low, eps_high and is_cap it reads {reads or 'none'}): leave it unset, or "
            "choose a loss that reads it",
        )
        if value is None:
            setattr(trainer, name, own[name])
    for name in ROLLOUT_SETTINGS if rollout is not None else ():
        if getattr(rollout, name) is None:
            setattr(rollout, name, own[name])


def loss_departures(trainer: Any, rollout: Any) -> list[str]:
    """One sentence for each setting of a filled config that departs from its built-in loss's
    definition (a loss of your own is defined by its registered defaults alone: none)."""
    loss, found = trainer.loss, []
    if loss in STD_NORMALIZING and trainer.std_normalize is False:
        found.append(
            f"trainer.std_normalize=False with trainer.loss={loss}: {loss}'s definition divides "
            "a group's advantages by the group's reward std; without it they are Dr. GRPO's "
            "(Liu et al. 2025): a Dr. GRPO-like run"
        )
    if loss == "dr_grpo" and trainer.std_normalize is True:
        found.append(
            "trainer.std_normalize=True with trainer.loss=dr_grpo: Dr. GRPO's definition removes "
            "the division by the group's reward std (one of the two biases it removes); with it "
            "only the length normalisation is Dr. GRPO's"
        )
    if loss in SYMMETRIC_CLIP and trainer.eps_low != trainer.eps_high:
        found.append(
            f"trainer.eps_low={trainer.eps_low}, trainer.eps_high={trainer.eps_high} with "
            f"trainer.loss={loss}: {loss}'s definition clips symmetrically; a higher upper "
            "bound is DAPO's clip-higher (trainer.loss=dapo, which also averages per token)"
        )
    if loss == "dapo" and trainer.eps_high <= trainer.eps_low:
        found.append(
            f"trainer.eps_low={trainer.eps_low}, trainer.eps_high={trainer.eps_high} with "
            "trainer.loss=dapo: DAPO's clip-higher puts eps_high above eps_low (0.2 / 0.28); "
            "without it this is GRPO's clip with a token-level mean"
        )
    if loss == "dapo" and rollout.dynamic_sampling is False:
        found.append(
            "rollout.dynamic_sampling=False with trainer.loss=dapo: DAPO's definition drops the "
            "groups whose rewards are all equal and samples more; without it this is DAPO's loss "
            "without its sampling"
        )
    return found


def warn_about_loss_departures(config: Any) -> list[str]:
    """Log a warning for each of `loss_departures` of a validated RunConfig; returns them."""
    found = loss_departures(config.trainer, config.rollout)
    for sentence in found:
        log.warning("%s", sentence)
    return found
