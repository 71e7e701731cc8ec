"""Rollouts on disk: files written atomically, rollouts as JSON rows and as readable text.

A reader, or a crash mid-write, never sees half a file: everything is written to a sibling `.tmp`
file first and renamed over the target.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlve.types import Message, Trajectory

TOKEN_FIELDS = ("token_ids", "loss_mask", "sampler_logprobs")
"""per-token lists of a Trajectory: what a reader of saved rollouts does not need"""


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write `text` to a sibling `.tmp` file (UTF-8; what UTF-8 cannot hold, a lone surrogate,
    as its escape `\ud800`), then rename it over `path`; returns `path`."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
    tmp.replace(path)
    return path


def trajectory_row(t: Trajectory) -> dict[str, Any]:
    """A rollout as a JSON-able dict (messages, reward, metrics...), without its token lists."""
    row = asdict(t)
    for name in TOKEN_FIELDS:
        row.pop(name)
    row.pop("side_sequences")
    row.pop("teacher_view")
    row["seats"] = [trajectory_row(seat) for seat in t.seats]
    return row


def render_trajectory(t: Trajectory) -> str:
    """A rollout as a reader would like to see it."""
    head = (
        f"=== {t.env_name} example {t.example_id} | reward {t.reward:.3f} | "
        f"stop {t.stop_reason} | turns {t.num_turns} | weights v{t.weight_version}"
    )
    metrics = ", ".join(f"{k}={v:.3g}" for k, v in sorted(t.metrics.items()))
    parts = [head, f"metrics: {metrics}", render_messages(t.prompt[-1:] + t.completion)]
    for number, seat in enumerate(t.seats, start=2):  # self-play: the other players' side
        parts.append(f"=== seat {number} | reward {seat.reward:.3f} | turns {seat.num_turns}")
        parts.append(render_messages(seat.prompt[-1:] + seat.completion))
    return "\n".join(parts)


def render_messages(messages: list[Message]) -> str:
    """Chat messages as text: each one's role on a `--- role` line, then its content."""
    return "\n".join(f"--- {m['role']}\n{m.get('content') or ''}" for m in messages)
