"""Policy losses by name: rlve's own and a user's, each with how it aggregates and what it reads.

A loss is a function `(logp, old_logp, advantages, mask, token_weight, **hyper-parameters) ->
LossTerms` (all [B, T]; see `rlve.algorithms.losses.policy_loss` for their meaning) registered
with `@register_loss`, which says
- its `aggregation`: "token" (a sum over trained tokens divided by the step's count, so the
  micro-batches of a step add up to one big batch) or "sequence" (a mean over this call's
  sequences: the trainer weights each micro-batch by its share of the step's sequences);
- the hyper-parameters it `uses`, of `eps_low`, `eps_high`, `is_cap`, `num_tokens`,
  `sequence_ids` and `length_norm`: it is given those and no others.

`trainer.loss` names a registered loss ("cispo") or a function by import path
("my_package.losses:my_loss"), which must itself be decorated (tests/unit/test_loss_registry.py
runs this example as a module of its own):

    import torch

    from rlve.algorithms import LossTerms, register_loss, token_mean

    @register_loss(aggregation="token", uses=("num_tokens",))
    def reinforce(logp, old_logp, advantages, mask, token_weight, *, num_tokens):
        loss = token_mean(-advantages * logp * token_weight, mask, num_tokens)
        return LossTerms(loss, torch.zeros_like(mask), torch.zeros_like(mask))
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

AGGREGATIONS = ("token", "sequence")
HYPERPARAMETERS = ("eps_low", "eps_high", "is_cap", "num_tokens", "sequence_ids", "length_norm")
"""what `policy_loss` can give a loss beyond the five tensors every loss takes"""


@dataclass(frozen=True)
class LossTerms:
    """A loss function's scalar and where its clip (or cap) was active, bool [B, T] each."""

    loss: Tensor
    clipped_low: Tensor
    clipped_high: Tensor


@dataclass(frozen=True)
class Loss:
    """A registered loss: its function, its aggregation and the hyper-parameters it reads."""

    name: str
    fn: Callable[..., LossTerms]
    aggregation: str
    uses: tuple[str, ...]

    def __call__(self, logp, old_logp, advantages, mask, token_weight, **available) -> LossTerms:
        """The loss, given only the hyper-parameters it uses of the `available` ones."""
        chosen = {name: available[name] for name in self.uses}
        return self.fn(logp, old_logp, advantages, mask, token_weight, **chosen)


LOSSES: dict[str, Loss] = {}
"""name -> registered loss; `trainer.loss` picks one by these names"""


def register_loss(
    name: str | None = None, *, aggregation: str, uses: tuple[str, ...] = ()
) -> Callable[[Callable[..., LossTerms]], Callable[..., LossTerms]]:
    """Register the decorated loss as `trainer.loss=<name>` (with no name, only by its import
    path); the function is returned unchanged, with its `Loss` as `rlve_loss`."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {list(AGGREGATIONS)}, got {aggregation!r}")
    unknown = sorted(set(uses) - set(HYPERPARAMETERS))
    if unknown:
        raise ValueError(f"a loss can use {list(HYPERPARAMETERS)}; {unknown} are not among them")

    def decorate(fn: Callable[..., LossTerms]) -> Callable[..., LossTerms]:
        parameters = inspect.signature(fn).parameters
        missing = [u for u in uses if u not in parameters]
        if missing:
            raise ValueError(f"loss {fn.__qualname__} says it uses {missing}, but takes no such "
                             "argument")  # fmt: skip
        loss = Loss(name or f"{fn.__module__}:{fn.__qualname__}", fn, aggregation, tuple(uses))
        if name is not None:
            if name in LOSSES and LOSSES[name].fn is not fn:
                raise ValueError(f"a loss named {name!r} is registered already")
            LOSSES[name] = loss
        fn.rlve_loss = loss
        return fn

    return decorate


def find_loss(name: str) -> Loss:
    """The loss registered as `name`, or the decorated function at the import path
    `package.module:function` (its module imported here)."""
    if name in LOSSES:
        return LOSSES[name]
    module, colon, attribute = name.partition(":")
    if not colon:
        raise ValueError(
            f"unknown loss {name!r}: use one of {sorted(LOSSES)} or an import path "
            "'package.module:function' to a loss decorated with @register_loss"
        )
    try:
        fn = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"loss {name!r} cannot be imported: {exc}") from exc
    loss = getattr(fn, "rlve_loss", None)
    if not isinstance(loss, Loss):
        raise ValueError(
            f"loss {name!r} is not decorated with @register_loss(aggregation=..., uses=...): "
            "rlve needs to know how it aggregates and which hyper-parameters it reads"
        )
    return loss
