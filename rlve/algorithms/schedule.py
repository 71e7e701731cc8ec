"""Learning-rate schedules as pure functions of the optimizer step."""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine")


def lr_multiplier(
    step: int, *, schedule: str, warmup_steps: int, max_steps: int, min_lr_ratio: float
) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based): a linear warmup over
    `warmup_steps` ((step + 1) / warmup_steps), then constant, or a cosine decay to
    `min_lr_ratio` at `max_steps` (Loshchilov & Hutter 2017, SGDR eq. 5)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(1, max_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * cosine
