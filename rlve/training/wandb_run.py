"""Opening a W&B run: the one place RL training (job_type "rl"), the SFT warm-up ("sft") and
evaluations ("eval") start theirs, so all three land in one project the same way.

Runs are offline by default: everything goes under `<dir>/wandb/offline-run-*`, and
`wandb sync <dir>/wandb/offline-run-*` uploads it later.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlve.config.run import WANDB_MODES

if TYPE_CHECKING:  # wandb is imported only when a run is started
    from wandb.sdk.wandb_run import Run

WANDB_ID_FILE = "wandb_id.txt"
"""the file in the run directory that keeps the W&B run id (a resumed run continues it)"""


def start_wandb_run(
    run_dir: str | Path,
    mode: str,
    project: str,
    name: str,
    job_type: str,
    config: dict[str, Any],
    tags: Sequence[str] = (),
    resume: bool = False,
) -> Run | None:
    """A W&B run writing under `run_dir/wandb`, or None when `mode` is "disabled".

    `mode`: "offline", "online" or "disabled"; `resume`: continue the run whose id
    `run_dir/wandb_id.txt` holds (a new id is written otherwise).
    """
    if mode not in WANDB_MODES:
        raise ValueError(f"wandb mode must be one of {', '.join(WANDB_MODES)}, got {mode!r}")
    if mode == "disabled":
        return None
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # wandb.init replaces sys.exit and sys.excepthook for good (to record the exit code); in a
    # process that goes on after the run (a library call, a test session) a replaced sys.exit is
    # no longer picklable by reference, so both are put back
    exit_function, excepthook = sys.exit, sys.excepthook
    try:
        return wandb.init(
            project=project,
            name=name,
            job_type=job_type,
            tags=list(tags),
            config=config,
            dir=str(run_dir),
            mode=mode,
            resume="allow" if resume else None,
            id=wandb_id(run_dir, resume),
        )
    finally:
        sys.exit, sys.excepthook = exit_function, excepthook


def wandb_id(run_dir: Path, resume: bool) -> str:
    """The W&B run id, kept in the run directory so a resumed run continues the same W&B run."""
    path = run_dir / WANDB_ID_FILE
    if resume and path.exists():
        return path.read_text().strip()
    run_id = uuid.uuid4().hex[:12]
    path.write_text(run_id)
    return run_id
