"""One sink for a run's metrics: metrics.jsonl always, W&B when enabled, a console progress line.

Each step's metrics go out in one namespace (`reward/`, `train/`, `sampling/`, `perf/`...). A few
rollouts per step are written as readable text under `samples/`, and every few steps as a W&B
table, because looking at what the model actually did is the fastest way to find a broken reward
or a collapsed policy.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlve.config import LoggingConfig
from rlve.rollout.records import render_trajectory, write_text_atomically
from rlve.training.rollout_table import ROLLOUT_TABLE, pick_rollouts, rollout_table
from rlve.training.wandb_run import start_wandb_run
from rlve.types import RolloutGroup


def _jsonable(value: float) -> float | None:
    return value if math.isfinite(value) else None


class MetricsLogger:
    """Writes every step's metrics to metrics.jsonl, W&B and the console."""

    def __init__(
        self,
        run_dir: str | Path,
        config: LoggingConfig,
        resolved_config: dict[str, Any],
        run_name: str,
        max_steps: int,
        resume_step: int | None = None,
    ):
        """`resume_step`: the step a resumed run continues from; what the file holds beyond it
        (logged before the crash, after the checkpoint) is dropped, and so are its samples."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.max_steps = max_steps
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.samples_dir = self.run_dir / "samples"
        if resume_step is not None:
            rewind(self.run_dir, resume_step)
        self._file = self.metrics_path.open("a" if resume_step is not None else "w")
        self._started = time.time()
        self._first_step: int | None = None
        self._wandb = start_wandb_run(self.run_dir, config.wandb_mode, config.project, run_name,
                                      "rl", resolved_config, config.tags,
                                      resume=resume_step is not None)  # fmt: skip

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record one step; the line in metrics.jsonl is flushed before this returns."""
        row = {"step": step, "time": round(time.time() - self._started, 3)}
        row.update({k: _jsonable(float(v)) for k, v in sorted(metrics.items())})
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)
        if self.config.console_every and step % self.config.console_every == 0:
            print(self._progress_line(step, metrics), file=sys.stderr, flush=True)

    def alert(self, title: str, text: str) -> None:
        """Something a person should look at now: a console line and, with W&B, an alert
        (Slack or e-mail, as the user's W&B settings say)."""
        print(f"WARNING {title}: {text}", file=sys.stderr, flush=True)
        if self._wandb is not None:
            self._wandb.alert(title=title, text=text, level="WARN")

    def _progress_line(self, step: int, m: dict[str, float]) -> str:
        if self._first_step is None:
            self._first_step, self._first_time = step, time.time()
        since_first = step - self._first_step  # steps finished after the first line's
        if since_first:
            per_step = (time.time() - self._first_time) / since_first
        else:
            per_step = m.get("perf/step_s", 0)
        eta = max(self.max_steps - step, 0) * per_step
        parts = [f"step {step}/{self.max_steps}", f"reward {m.get('reward/mean', 0):.3f}"]
        if "game/win" in m:
            parts.append(f"win/draw {m['game/win']:.2f}/{m.get('game/draw', 0):.2f}")
        parts += [
            f"loss {m['train/loss']:.4f}" if "train/loss" in m else "no update (no signal)",
            f"{m.get('perf/rollout_tokens_per_s', 0):.0f} tok/s",
            f"{m.get('perf/step_s', 0):.1f} s/step",
            f"ETA {eta / 60:.1f} min",
        ]
        return " | ".join(parts)

    def save_samples(self, step: int, groups: Sequence[RolloutGroup]) -> Path | None:
        """Show a few rollouts of this step: the best and the worst of the first groups, as text
        in samples/step_<n>.txt (returned), and every `rollout_table_every` steps as W&B's
        `rollouts` table."""
        every = self.config.rollout_table_every
        if self._wandb is not None and every and step % every == 0 and groups:
            picked = pick_rollouts(groups, self.config.rollout_table_rows)
            self._wandb.log({ROLLOUT_TABLE: rollout_table(picked, step)}, step=step)
        count = self.config.samples_per_step
        if count <= 0 or not groups:
            return None
        self.samples_dir.mkdir(exist_ok=True)
        text = "\n\n".join(render_trajectory(t) for t in pick_rollouts(groups, count)) + "\n"
        return write_text_atomically(self.samples_dir / f"step_{step:06d}.txt", text)

    def close(self) -> None:
        self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def rewind(run_dir: Path, step: int) -> None:
    """Drops metrics.jsonl's rows (and a row cut off by the crash) and the samples of steps after
    `step`; the file is replaced atomically."""
    path = run_dir / "metrics.jsonl"
    if path.exists():
        kept = []
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # the last line of a process killed while writing it
                continue
            if row.get("step", math.inf) <= step:
                kept.append(line + "\n")
        write_text_atomically(path, "".join(kept))
    for sample in (run_dir / "samples").glob("step_*.txt"):
        if int(sample.stem.removeprefix("step_")) > step:
            sample.unlink()
