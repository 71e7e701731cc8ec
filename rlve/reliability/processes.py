"""Finding the processes a run started, wherever they were re-parented, and ending them.

A run marks itself by two environment variables before it starts anything; every process it
starts (vLLM's engine core and workers, the multiprocessing resource tracker, verifier pools,
tool servers, REPL workers) inherits them. /proc/<pid>/environ shows a process's environment as
it was at its start, so the marks are found on the children but never on the process that set
them after its own start (a test process that calls `train()` is not its own leftover).
Linux only: elsewhere nothing is found.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RUN_DIR_VAR = "RLVE_RUN_DIR"
"""absolute path of the run directory, on every process of the run"""
RUN_ID_VAR = "RLVE_RUN_ID"
"""one id per start of a run (a resume gets a new one), on every process of the run"""


@dataclass(frozen=True)
class RunProcess:
    pid: int
    command: str
    """the command line, shortened"""
    run_id: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


@contextmanager
def marked_run(run_dir: str | Path) -> Iterator[str]:
    """Sets the marks for the processes started inside the block; yields the run id."""
    run_id = uuid.uuid4().hex
    saved = {name: os.environ.get(name) for name in (RUN_DIR_VAR, RUN_ID_VAR)}
    os.environ[RUN_DIR_VAR] = str(Path(run_dir).resolve())
    os.environ[RUN_ID_VAR] = run_id
    try:
        yield run_id
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_processes(run_dir: str | Path | None = None, run_id: str | None = None) -> list[RunProcess]:
    """Live processes marked with this run directory and/or run id (this process excluded)."""
    wanted_dir = str(Path(run_dir).resolve()) if run_dir is not None else None
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        marks = _marks(entry)
        if marks is None:
            continue
        if wanted_dir is not None and marks.get(RUN_DIR_VAR) != wanted_dir:
            continue
        if run_id is not None and marks.get(RUN_ID_VAR) != run_id:
            continue
        found.append(RunProcess(int(entry.name), _command(entry), marks.get(RUN_ID_VAR, "")))
    return sorted(found, key=lambda p: p.pid)


def _marks(entry: Path) -> dict[str, str] | None:
    try:
        raw = (entry / "environ").read_bytes()
        if b"RLVE_RUN_" not in raw or _is_zombie(entry):
            return None
    except OSError:  # gone, or another user's process
        return None
    marks = {}
    for item in raw.split(b"\0"):
        name, _, value = item.partition(b"=")
        if name in (RUN_DIR_VAR.encode(), RUN_ID_VAR.encode()):
            marks[name.decode()] = value.decode(errors="replace")
    return marks or None


def _is_zombie(entry: Path) -> bool:
    stat = (entry / "stat").read_text()
    return stat[stat.rindex(")") + 2] == "Z"


def _command(entry: Path, width: int = 100) -> str:
    try:
        parts = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(p.decode(errors="replace") for p in parts if p)
    return text if len(text) <= width else text[: width - 3] + "..."


def end_processes(processes: list[RunProcess], grace_s: float = 3.0) -> list[RunProcess]:
    """SIGTERM, then SIGKILL whatever is still there after `grace_s`; returns those that needed
    SIGKILL. vLLM shuts its workers down on SIGTERM; the resource tracker ignores it and is
    killed."""
    for process in processes:
        _signal(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = processes
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p.pid)]
    for process in alive:
        _signal(process.pid, signal.SIGKILL)
    return alive


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    entry = Path(f"/proc/{pid}")
    try:
        return not _is_zombie(entry)
    except OSError:
        return False
