"""Checks on the inputs of `policy_loss`: hyperparameters, [B, T] shapes and the token count,
each failing with a message that names the bad value."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

TisMode = Literal["truncate", "mask"]
TIS_MODES: tuple[str, ...] = ("truncate", "mask")


def check_hyperparameters(
    eps_low: float | None,
    eps_high: float | None,
    is_cap: float | None,
    tis_cap: float | None,
    tis_mode: str,
    num_tokens: int | None,
) -> None:
    """The loss hyperparameters' ranges, for `policy_loss` and for `TrainerConfig.validate`
    (None: one the loss does not read)."""
    if eps_low is not None and not 0.0 <= eps_low < 1.0:
        raise ValueError(f"eps_low must be in [0, 1), got {eps_low}")
    if eps_high is not None and eps_high < 0.0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high}")
    if is_cap is not None and is_cap <= 0.0:
        raise ValueError(f"is_cap must be > 0, got {is_cap}")
    if tis_mode not in TIS_MODES:
        raise ValueError(f"tis_mode must be one of {list(TIS_MODES)}, got {tis_mode!r}")
    if tis_cap is not None and tis_cap <= 1.0:
        raise ValueError(f"tis_cap must be None or > 1 (tis_mode={tis_mode!r}), got {tis_cap}")
    if num_tokens is not None and num_tokens <= 0:
        raise ValueError(f"num_tokens must be > 0 when given, got {num_tokens}")


def check_shapes(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    sampler_logp: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Checks [B, T] shapes; returns the mask as bool and the advantages broadcast to [B, T]."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {tuple(logp.shape)}")
    shape = tuple(logp.shape)
    named = {"old_logp": old_logp, "mask": mask}
    if sampler_logp is not None:
        named["sampler_logp"] = sampler_logp
    for name, tensor in named.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, logp has {shape}")
    if tuple(advantages.shape) == shape[:1]:
        advantages = advantages.unsqueeze(1).expand(shape)
    elif tuple(advantages.shape) != shape:
        raise ValueError(
            f"advantages must be [B] = {shape[:1]} or [B, T] = {shape}, "
            f"got {tuple(advantages.shape)}"
        )
    if mask.dtype != torch.bool:
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("mask must hold only 0 and 1")
        mask = mask != 0
    return mask, advantages.to(logp.dtype)


def check_token_count(mask: Tensor, num_tokens: int | None) -> None:
    count = int(mask.sum().item())
    if num_tokens is None and count == 0:
        raise ValueError("all tokens are masked out and num_tokens is None; skip this batch")
    if num_tokens is not None and num_tokens < count:
        raise ValueError(
            f"num_tokens={num_tokens} is smaller than this batch's {count} masked tokens; "
            "it must count the masked tokens of the whole optimizer step"
        )


def masked_log_ratio(logp: Tensor, base_logp: Tensor, mask: Tensor) -> Tensor:
    """logp - base_logp on masked tokens, 0 elsewhere: padding can hold any log-prob, and an
    exp() overflow there would turn into NaN once multiplied by a zero mask."""
    return torch.where(mask, logp - base_logp, torch.zeros_like(logp))
