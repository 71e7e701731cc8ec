"""A small process that outlives the run's main process by a moment and ends what it started.

vLLM's engine core and workers, the resource tracker, verifier pools and tool servers are
children of the run's main process; when it dies by SIGKILL or the OOM killer, nothing tells
them, and on a GPU such a leftover holds the memory the next run (or the resume) needs. The
watchdog polls its parent; once the parent is gone it ends every process marked with the run's
id (`rlve.reliability.processes`), then removes the run's shared-memory weight files.

    start_watchdog(run_id) -> subprocess.Popen   # in the main process; .terminate() at the end
    python -m rlve.reliability.watchdog OWNER_PID RUN_ID   # what it runs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlve.reliability.processes import RUN_DIR_VAR, RUN_ID_VAR, end_processes, run_processes

POLL_S = 0.2
"""how often the watchdog looks at its parent"""
SWEEPS = 5
"""rounds of ending marked processes (one may start another while the first round runs); the
watchdog stops after two empty rounds in a row, POLL_S apart: a process in the middle of exec
shows its marks in /proc only a moment later"""


def start_watchdog(run_id: str) -> subprocess.Popen:
    """Starts the watchdog of this process's run (unmarked itself, so it never ends itself)."""
    env = {k: v for k, v in os.environ.items() if k not in (RUN_DIR_VAR, RUN_ID_VAR)}
    command = [sys.executable, "-m", "rlve.reliability.watchdog", str(os.getpid()), run_id]
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)


def watch(owner: int, run_id: str) -> list[str]:
    """Waits for `owner` to die, then ends the run's processes; returns what it ended."""
    while os.getppid() == owner:
        time.sleep(POLL_S)
    ended, empty_rounds = [], 0
    for _ in range(SWEEPS):
        left = run_processes(run_id=run_id)
        if left:
            empty_rounds = 0
            end_processes(left)
            ended += [str(p) for p in left]
            continue
        empty_rounds += 1
        if empty_rounds == 2:
            break
        time.sleep(POLL_S)
    for base in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        for leftover in base.glob(f"rlve-weights-{owner}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
    return ended


if __name__ == "__main__":
    owner_pid, watched_run = int(sys.argv[1]), sys.argv[2]
    for line in watch(owner_pid, watched_run):
        print(f"rlve watchdog: the run's main process {owner_pid} died; ended {line}",
              file=sys.stderr)  # fmt: skip
