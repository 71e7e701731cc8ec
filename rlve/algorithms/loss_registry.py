"""Policy losses by name: rlve's own and a user's, each with how it aggregates and what it reads.

A loss is a function `(logp, old_logp, advantages, mask, token_weight, **hyper-parameters) ->
LossTerms` (all [B, T]; see `rlve.algorithms.losses.policy_loss` for their meaning) registered
with `@register_loss`, which says
- its `aggregation`: "token" (a sum over trained tokens divided by the step's count, so the
  micro-batches of a step add up to one big batch) or "sequence" (a mean over this call's
  sequences: the trainer weights each micro-batch by its share of the step's sequences);
- the hyper-parameters it `uses`, of `eps_low`, `eps_high`, `is_cap`, `num_tokens`,
  `sequence_ids` and `length_norm`: it is given those and no others;
- its `defaults`: the values its definition gives the settings of `LOSS_SETTINGS` (GRPO's
  symmetric clip 0.2 and std-normalised advantages, DAPO's clip-higher and dynamic sampling...).
  A run's config leaves those settings None, "the loss's own", and takes them from here, so
  `trainer.loss=grpo` alone is GRPO as its paper has it.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torch import Tensor

AGGREGATIONS = ("token", "sequence")
HYPERPARAMETERS = ("eps_low", "eps_high", "is_cap", "num_tokens", "sequence_ids", "length_norm")
"""what `policy_loss` can give a loss beyond the five tensors every loss takes"""
LOSS_SETTINGS: dict[str, float | bool] = {
    "eps_low": 0.2,
    "eps_high": 0.28,
    "is_cap": 5.0,
    "std_normalize": False,
    "dynamic_sampling": False,
}
"""the settings a loss's definition may fix (`trainer.eps_low`, `eps_high`, `is_cap`,
`std_normalize`, `rollout.dynamic_sampling`), with what a loss gets that fixes none of them"""


@dataclass(frozen=True)
class LossTerms:
    """A loss function's scalar and where its clip (or cap) was active, bool [B, T] each."""

    loss: Tensor
    clipped_low: Tensor
    clipped_high: Tensor


@dataclass(frozen=True)
class Loss:
    """A registered loss: its function, its aggregation, the hyper-parameters it reads and the
    settings its definition fixes."""

    name: str
    fn: Callable[..., LossTerms]
    aggregation: str
    uses: tuple[str, ...]
    defaults: Mapping[str, float | bool] = field(default_factory=dict)

    def settings(self) -> dict[str, float | bool | None]:
        """Every setting of LOSS_SETTINGS as this loss defines it (its `defaults`, else the
        generic value); None for a hyper-parameter it does not read."""
        return {
            name: None
            if name in HYPERPARAMETERS and name not in self.uses
            else self.defaults.get(name, generic)
            for name, generic in LOSS_SETTINGS.items()
        }

    def __call__(self, logp, old_logp, advantages, mask, token_weight, **available) -> LossTerms:
        """The loss, given only the hyper-parameters it uses of the `available` ones."""
        chosen = {name: available[name] for name in self.uses}
        return self.fn(logp, old_logp, advantages, mask, token_weight, **chosen)


LOSSES: dict[str, Loss] = {}
"""name -> registered loss; `trainer.loss` picks one by these names"""


def register_loss(
    name: str | None = None,
    *,
    aggregation: str,
    uses: tuple[str, ...] = (),
    defaults: Mapping[str, float | bool] | None = None,
) -> Callable[[Callable[..., LossTerms]], Callable[..., LossTerms]]:
    """Register the decorated loss as `trainer.loss=<name>` (with no name, only by its import
    path); the function is returned unchanged, with its `Loss` as `rlve_loss`. `defaults`: the
    values its definition gives settings of LOSS_SETTINGS (the others keep the generic ones)."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {list(AGGREGATIONS)}, got {aggregation!r}")
    unknown = sorted(set(uses) - set(HYPERPARAMETERS))
    if unknown:
        raise ValueError(f"a loss can use {list(HYPERPARAMETERS)}; {unknown} are not among them")
    defaults = dict(defaults or {})
    unknown = sorted(set(defaults) - set(LOSS_SETTINGS))
    if unknown:
        raise ValueError(f"a loss's defaults are of {list(LOSS_SETTINGS)}; {unknown} are not")
    unread = sorted(d for d in defaults if d in HYPERPARAMETERS and d not in uses)
    if unread:
        raise ValueError(f"defaults {unread} are for hyper-parameters the loss does not use "
                         f"(uses={tuple(uses)})")  # fmt: skip

    def decorate(fn: Callable[..., LossTerms]) -> Callable[..., LossTerms]:
        parameters = inspect.signature(fn).parameters
        missing = [u for u in uses if u not in parameters]
        if missing:
            raise ValueError(f"loss {fn.__qualname__} says it uses {missing}, but takes no such "
                             "argument")  # fmt: skip
        loss = Loss(name or f"{fn.__module__}:{fn.__qualname__}", fn, aggregation, tuple(uses),
                    defaults)  # fmt: skip
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
