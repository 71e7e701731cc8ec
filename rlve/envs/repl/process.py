"""The parent's side of a REPL worker: start it, run cells under limits, answer its `llm`
calls, and kill it (with anything it started) when the episode ends.

The worker is `python -I worker.py` in a new session (its own process group), with the
parent-death signal set, so it ends when the episode closes it, when a cell breaches a limit,
and when the parent dies.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlve.config import require

log = logging.getLogger(__name__)

WORKER = str(Path(__file__).with_name("worker.py"))
PR_SET_PDEATHSIG = 1
LlmCallback = Callable[[list[str]], Awaitable[list[str]]]
"""answers the worker's llm_batch(prompts); raises RuntimeError with a message for the REPL"""


@dataclass(frozen=True)
class REPLLimits:
    """What one REPL cell and one worker may use."""

    wall_s: float = 10.0
    """wall-clock time of one cell (time spent answering its llm() calls not counted)"""
    cpu_s: float = 10.0
    """CPU time of one cell (whole seconds; the kernel ends the worker past it)"""
    episode_cpu_s: float = 300.0
    """CPU time of the whole worker: the hard limit a cell cannot raise (the kernel kills it)"""
    memory_mb: int = 1024
    """address space of the worker (RLIMIT_AS); allocations past it raise MemoryError"""
    max_output_chars: int = 4000
    """stdout, value and traceback each keep this many characters"""
    max_file_bytes: int = 10_000_000
    """largest file the worker may write (RLIMIT_FSIZE; a longer write fails with OSError)"""
    disk_mb: int = 64
    """size of the worker's working folder, a tmpfs (writes past it fail with ENOSPC)"""
    max_files: int = 1000
    """files and folders the working folder may hold"""
    start_timeout_s: float = 30.0
    """longest wait for the worker to start"""

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "episode_cpu_s", "start_timeout_s"):
            value = getattr(self, name)
            require(value > 0, f"REPLLimits.{name} must be > 0, got {value!r}")
        for name in ("memory_mb", "max_output_chars", "max_file_bytes", "disk_mb", "max_files"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1,
                    f"REPLLimits.{name} must be an integer >= 1, got {value!r}")  # fmt: skip


@dataclass
class CellResult:
    """What a cell printed and returned, or why the worker is gone."""

    stdout: str = ""
    stdout_chars: int = 0
    """characters printed in all (stdout keeps the first max_output_chars)"""
    value: str | None = None
    """repr of the last expression's value"""
    error: str | None = None
    """the traceback, trimmed to the cell's own lines"""
    final: str | None = None
    """the answer given to FINAL() (or assigned to final_answer), once there is one"""
    breach: str | None = None
    """'wall_time', 'cpu_time', 'memory' or 'died': the worker was ended; the episode ends"""


def _set_parent_death_signal() -> None:
    """In the child before exec: die with SIGKILL when the parent dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (AttributeError, OSError):  # not Linux: the session kill on close still applies
        pass


UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child",
           "--mount-proc", "--net", "--ipc", "--uts", "--"]  # fmt: skip
"""new namespaces for the worker: its reaper is their PID 1 (when it ends, every process in them
ends), it is root of a user namespace only (to mount its tmpfs), and it has no network"""


@functools.cache
def namespaces_prefix() -> tuple[str, ...]:
    """UNSHARE where the kernel allows it (containers often do not); () otherwise, said once."""
    if shutil.which("unshare"):
        trial = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=30)
        if trial.returncode == 0:
            return tuple(UNSHARE)
        reason = trial.stderr.decode(errors="replace").strip()
    else:
        reason = "the unshare command (util-linux) is not installed"
    log.warning("REPL workers run without their own namespaces (%s): no PID namespace and no "
                "tmpfs quota; Landlock, seccomp and rlimits still apply", reason)  # fmt: skip
    return ()


def clean_environment(workdir: str) -> dict[str, str]:
    """The worker's whole environment: nothing of the run's (API keys, tokens, RLVE_SERVE_SECRET
    stay out of the model's reach)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
            "LANG": "C.UTF-8"}  # fmt: skip


class REPLWorker:
    """One running worker; use `await REPLWorker.start(limits)`, then `run`, then `close`."""

    def __init__(self, process: asyncio.subprocess.Process, limits: REPLLimits, workdir: str):
        self.process, self.limits, self.workdir = process, limits, workdir
        self.network_isolated = False
        """whether the worker runs in a network namespace without interfaces"""
        self.isolation: dict[str, Any] = {}
        """what the kernel granted the worker's confinement: namespaces, tmpfs, landlock (its
        ABI, 0 without), seccomp (confine.py)"""

    @classmethod
    async def start(cls, limits: REPLLimits) -> REPLWorker:
        workdir = tempfile.mkdtemp(prefix="rlve-repl-")
        settings = {**asdict(limits), "workdir": workdir}
        process = await asyncio.create_subprocess_exec(
            *namespaces_prefix(), sys.executable, "-I", WORKER, json.dumps(settings),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_set_parent_death_signal, cwd=workdir, limit=2**24,
            env=clean_environment(workdir),
        )  # fmt: skip
        worker = cls(process, limits, workdir)
        try:
            hello = await asyncio.wait_for(worker._receive(), limits.start_timeout_s)
        except (TimeoutError, ConnectionError) as exc:
            await worker.close()
            raise RuntimeError(f"the REPL worker did not start: {exc or 'timeout'}") from None
        worker.network_isolated = bool(hello.get("network_isolated"))
        worker.isolation = dict(hello.get("isolation") or {})
        return worker

    async def _send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def _receive(self) -> dict[str, Any]:
        line = await self.process.stdout.readline()
        if not line:
            raise ConnectionError("the REPL worker exited")
        return json.loads(line)

    async def set_variable(self, name: str, value: Any) -> None:
        """Make a JSON-able value a variable of the REPL (e.g. the long input)."""
        await self._send({"op": "set", "name": name, "value": value})
        await asyncio.wait_for(self._receive(), self.limits.start_timeout_s)

    async def run(self, code: str, on_llm: LlmCallback) -> CellResult:
        """Run one cell; a breached limit kills the worker and says which."""
        try:
            await self._send({"op": "run", "code": code})
            budget = self.limits.wall_s
            while True:
                start = time.perf_counter()
                message = await asyncio.wait_for(self._receive(), budget)
                budget -= time.perf_counter() - start
                if message["op"] == "result":
                    message.pop("op")
                    return CellResult(**message)
                try:
                    reply = {"results": await on_llm(message["prompts"])}
                except RuntimeError as exc:
                    reply = {"error": str(exc)}
                await self._send(reply)
        except TimeoutError:
            await self.close()
            return CellResult(breach="wall_time")
        except (ConnectionError, BrokenPipeError):
            returncode = await self._reap()
            # killed by SIGXCPU: -24 from a worker without namespaces, 128 + 24 through unshare
            cpu = returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU)
            breach = "cpu_time" if cpu else "died"
            return CellResult(breach=breach, error=f"the worker ended (exit status {returncode})")

    async def _reap(self) -> int | None:
        try:
            return await asyncio.wait_for(self.process.wait(), 5.0)
        except TimeoutError:
            await self.close()
            return self.process.returncode

    async def close(self) -> None:
        """Kill the worker's whole process group and delete its working directory."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            await asyncio.wait_for(self.process.wait(), 5.0)
        except TimeoutError:
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)
