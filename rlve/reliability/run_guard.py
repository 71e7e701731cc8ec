"""One run per output directory, and nothing of it left behind however it ends.

`run_guard(run_dir)` wraps a run's main process:
- it takes an exclusive lock on `run_dir/.rlve.lock` (released by the kernel when the process
  dies, however it dies), so a second run on the same directory stops at once, naming the first;
- it ends leftovers of an earlier run of this directory (processes whose main process died
  without its watchdog, e.g. when the whole machine ran out of memory), saying what they were;
- it marks the processes started inside it and starts the watchdog that ends them if the main
  process dies (`rlve.reliability.watchdog`).
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlve.reliability.processes import end_processes, marked_run, run_processes
from rlve.reliability.watchdog import start_watchdog

log = logging.getLogger(__name__)

LOCK_FILE = ".rlve.lock"


class RunDirInUse(RuntimeError):
    """Another live run holds the output directory."""


@contextmanager
def run_guard(run_dir: str | Path) -> Iterator[None]:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with _locked(run_dir / LOCK_FILE):
        end_leftovers(run_dir)
        with marked_run(run_dir) as run_id:
            watchdog = start_watchdog(run_id)
            try:
                yield
            finally:
                watchdog.terminate()
                watchdog.wait()


def end_leftovers(run_dir: Path) -> None:
    """Ends processes an earlier run of `run_dir` left, with a warning naming each."""
    leftovers = run_processes(run_dir=run_dir)
    if not leftovers:
        return
    names = "; ".join(str(p) for p in leftovers)
    log.warning("%d processes of an earlier run of %s were still running; ending them: %s",
                len(leftovers), run_dir, names)  # fmt: skip
    end_processes(leftovers)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunDirInUse(
                f"{path.parent} is in use by another live run (pid {holder}); wait for it to "
                "end or choose another output_dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()
