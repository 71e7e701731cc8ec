"""Rollouts for a reader: which of a step's rollouts to show, and each as one row of a W&B table.

The same rollouts go to `samples/step_<n>.txt` and to the run's `rollouts` table: the best and the
worst of the first groups, where a broken reward or a collapsed policy shows first. Cell text is
bounded, so one runaway completion cannot make the table unreadable (or huge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlve.rollout.records import render_messages
from rlve.types import RolloutGroup, Trajectory

if TYPE_CHECKING:  # wandb is imported only when a table is built
    import wandb

ROLLOUT_TABLE = "rollouts"
"""the key the table is logged under (the dashboard's table panel shows this key)"""
CELL_CHARS = 4000
"""most characters of text in one cell: a longer text keeps its start and its end"""


def pick_rollouts(groups: Sequence[RolloutGroup], count: int) -> list[Trajectory]:
    """The best and the worst rollout (by task reward) of each of the first groups, `count` in
    all; a group of one rollout gives that one."""
    picked: list[Trajectory] = []
    for group in groups:
        if len(picked) >= count:
            break
        ranked = sorted(group.trajectories, key=lambda t: t.reward)
        picked += [ranked[-1], ranked[0]] if len(ranked) > 1 else ranked
    return picked[: max(count, 0)]


def clip_text(text: str, limit: int = CELL_CHARS) -> str:
    """`text` when it has at most `limit` characters; otherwise its start and its end around a
    marker that says how many characters were cut (the result has about `limit` characters)."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {cut} characters cut ...]\n{text[len(text) - keep :]}"


def prompt_text(t: Trajectory) -> str:
    """What the model was asked: the prompt's last user message, or the whole prompt rendered
    when it has no user message."""
    users = [m for m in t.prompt if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else render_messages(t.prompt)


def rollout_columns(rollouts: Sequence[Trajectory], with_step: bool = True) -> list[str]:
    """The table's columns: one per reward function score (`reward/*` metrics) the rollouts
    have, between the reward and the stop reason."""
    scores = sorted({k for t in rollouts for k in t.metrics if k.startswith("reward/")})
    head = ["step"] if with_step else []
    return [*head, "environment", "difficulty", "prompt", "completion", "reward", *scores,
            "stop_reason"]  # fmt: skip


def rollout_rows(rollouts: Sequence[Trajectory], step: int | None = None) -> list[list[Any]]:
    """One row per rollout in the order of `rollout_columns(rollouts, step is not None)`; a score a
    rollout lacks is None."""
    scores = [c for c in rollout_columns(rollouts) if c.startswith("reward/")]
    rows = []
    for t in rollouts:
        row = [] if step is None else [step]
        row += [t.env_name, t.difficulty, clip_text(prompt_text(t)),
                clip_text(render_messages(t.completion)), t.reward]  # fmt: skip
        row += [t.metrics.get(name) for name in scores]
        rows.append([*row, t.stop_reason])
    return rows


def rollout_table(rollouts: Sequence[Trajectory], step: int | None = None) -> wandb.Table:
    """The rollouts as a `wandb.Table` (with a step column when `step` is given)."""
    import wandb

    columns = rollout_columns(rollouts, with_step=step is not None)
    return wandb.Table(columns=columns, data=rollout_rows(rollouts, step))
