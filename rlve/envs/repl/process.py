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
from rlve.reliability.clean_text import without_surrogates

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
    """stdout, value, traceback and the final answer each keep this many characters"""
    max_file_bytes: int = 10_000_000
    """largest file the worker may write (RLIMIT_FSIZE; a longer write fails with OSError)"""
    disk_mb: int = 64
    """size of the worker's working folder, a tmpfs (writes past it fail with ENOSPC)"""
    max_files: int = 1000
    """files and folders the working folder may hold"""
    start_timeout_s: float = 30.0
    """longest wait for the worker to start"""
    episode_wall_s: float = 120.0
    """wall-clock time of all the episode's cells together (llm() answers not counted): what
    bounds a cell whose threads run on after it returned"""
    max_prompts: int = 16
    """prompts of one llm_batch() call"""
    max_prompt_chars: int = 8000
    """characters of one llm() prompt"""

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "episode_cpu_s", "start_timeout_s", "episode_wall_s"):
            value = getattr(self, name)
            require(value > 0, f"REPLLimits.{name} must be > 0, got {value!r}")
        for name in ("memory_mb", "max_output_chars", "max_file_bytes", "disk_mb", "max_files",
                     "max_prompts", "max_prompt_chars"):  # fmt: skip
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
    """'wall_time', 'cpu_time', 'died' or 'protocol' (a line from the worker the protocol does
    not allow: forged by the cell): the worker was ended; the episode ends"""


class ProtocolBreach(Exception):
    """A line from the worker that is not a message the protocol allows."""


def read_limit(limits: REPLLimits) -> int:
    """The longest line the parent reads from a worker: a result's four capped strings, or an
    llm call's capped prompts, at 12 bytes a character (a JSON escape of a character beyond the
    BMP), with room for the keys."""
    strings = max(4 * limits.max_output_chars, limits.max_prompts * limits.max_prompt_chars)
    return 12 * strings + 4096


def checked_message(line: bytes, limits: REPLLimits) -> dict[str, Any]:
    """The worker's message on `line`, if it is one the protocol allows: known ops with exactly
    their keys and types, every string within its cap; ProtocolBreach otherwise. Strings come
    back without surrogates."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ProtocolBreach(f"not a JSON message: {type(exc).__name__}") from None
    if not isinstance(message, dict) or message.get("op") not in _MESSAGE_FIELDS:
        raise ProtocolBreach("not a message of a known op")
    fields = _MESSAGE_FIELDS[message["op"]]
    if set(message) != {"op", *fields}:
        raise ProtocolBreach(f"{message['op']!r} message with keys {sorted(message)[:8]}")
    for key, kinds in fields.items():
        value = message[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ProtocolBreach(f"{message['op']}.{key} is a {type(value).__name__}")
    if message["op"] == "result":
        for key in ("stdout", "value", "error", "final"):
            if isinstance(message[key], str):
                if len(message[key]) > limits.max_output_chars:
                    raise ProtocolBreach(f"result.{key} is over {limits.max_output_chars} chars")
                message[key] = without_surrogates(message[key])
    if message["op"] == "llm":
        prompts = message["prompts"]
        if not 1 <= len(prompts) <= limits.max_prompts:
            raise ProtocolBreach(f"llm call with {len(prompts)} prompts")
        if not all(isinstance(p, str) and len(p) <= limits.max_prompt_chars for p in prompts):
            raise ProtocolBreach(f"llm prompts must be strings of at most "
                                 f"{limits.max_prompt_chars} characters")  # fmt: skip
        message["prompts"] = [without_surrogates(p) for p in prompts]
    return message


_MESSAGE_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "hello": {"network_isolated": (bool,), "isolation": (dict,)},
    "ok": {},
    "result": {"stdout": (str,), "stdout_chars": (int,), "value": (str, type(None)),
               "error": (str, type(None)), "final": (str, type(None))},
    "llm": {"prompts": (list,)},
}  # fmt: skip
"""each op the worker may send, with its keys and their types"""


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
        self.wall_used = 0.0
        """wall-clock seconds the worker's cells took so far (episode_wall_s bounds it)"""
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
            preexec_fn=_set_parent_death_signal, cwd=workdir, limit=read_limit(limits),
            env=clean_environment(workdir),
        )  # fmt: skip
        worker = cls(process, limits, workdir)
        try:
            hello = await asyncio.wait_for(worker._receive(), limits.start_timeout_s)
            if hello["op"] != "hello":
                raise ProtocolBreach(f"{hello['op']!r} before hello")
        except (TimeoutError, ConnectionError, ProtocolBreach) as exc:
            await worker.close()
            raise RuntimeError(f"the REPL worker did not start: {exc or 'timeout'}") from None
        worker.network_isolated = bool(hello.get("network_isolated"))
        worker.isolation = dict(hello.get("isolation") or {})
        return worker

    async def _send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def _receive(self) -> dict[str, Any]:
        try:
            line = await self.process.stdout.readline()
        except ValueError:  # over the read limit (asyncio's LimitOverrunError)
            raise ProtocolBreach(f"a line over {read_limit(self.limits)} bytes") from None
        if not line:
            raise ConnectionError("the REPL worker exited")
        return checked_message(line, self.limits)

    async def set_variable(self, name: str, value: Any) -> None:
        """Make a JSON-able value a variable of the REPL (e.g. the long input)."""
        await self._send({"op": "set", "name": name, "value": value})
        answer = await asyncio.wait_for(self._receive(), self.limits.start_timeout_s)
        if answer["op"] != "ok":
            raise ProtocolBreach(f"{answer['op']!r} in answer to set")

    async def run(self, code: str, on_llm: LlmCallback) -> CellResult:
        """Run one cell; a breached limit kills the worker and says which. The cell's wall
        clock is `wall_s`, and all cells' together `episode_wall_s`."""
        try:
            await self._send({"op": "run", "code": code})
            budget = min(self.limits.wall_s, self.limits.episode_wall_s - self.wall_used)
            while True:
                start = time.perf_counter()
                try:
                    message = await asyncio.wait_for(self._receive(), max(budget, 0.0))
                finally:
                    spent = time.perf_counter() - start
                    budget -= spent
                    self.wall_used += spent
                if message["op"] == "result":
                    message.pop("op")
                    return CellResult(**message)
                if message["op"] != "llm":
                    raise ProtocolBreach(f"{message['op']!r} while a cell runs")
                try:
                    reply = {"results": await on_llm(message["prompts"])}
                except RuntimeError as exc:
                    reply = {"error": str(exc)}
                await self._send(reply)
        except TimeoutError:
            await self.close()
            return CellResult(breach="wall_time")
        except ProtocolBreach as breach:
            await self.close()
            return CellResult(breach="protocol", error=str(breach))
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
