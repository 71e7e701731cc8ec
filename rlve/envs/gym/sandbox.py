"""Run verification of model output in worker processes with a time and memory limit.

Verifiers that parse model text (sympy evaluates it) or search for a solution can hang, eat
memory or, if fooled, run code. `VerifierPool` keeps that out of the trainer's process: each
call runs in a spawned worker; a worker that hangs, dies or runs out of memory is replaced.
"""

from __future__ import annotations

import asyncio
import builtins
import io
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

CallKind = Literal["ok", "timeout", "crash", "error"]

_STARTUP_TIMEOUT_S = 120.0
"""how long a new worker may take to import its modules (spawn on a busy machine is slow)"""

MAX_RESULT_BYTES = 16 * 1024 * 1024
"""the largest pickled result the parent reads from a worker; a longer one is a crash"""


@dataclass(frozen=True)
class CallResult:
    """The outcome of one call in a worker."""

    ok: bool
    """True when the function returned"""
    value: Any
    """what the function returned (plain data: see `VerifierPool`); None unless ok"""
    error: str | None
    """why the call failed; None when ok"""
    kind: CallKind
    """"ok"; "timeout" (worker killed); "crash" (worker died or ran out of memory); "error"
    (the function raised, or the call or its result could not be sent)"""


@dataclass
class PoolStats:
    """Counters over the life of a pool."""

    calls: int = 0
    timeouts: int = 0
    crashes: int = 0
    errors: int = 0
    workers_replaced: int = 0


@dataclass(eq=False)
class _Worker:
    process: Any  # multiprocessing.process.BaseProcess
    conn: Any  # multiprocessing.connection.Connection, the parent's end
    ready: bool = False


class VerifierPool:
    """A fixed number of worker processes that run `fn(*args)` for callers, one call at a time
    per worker.

    `fn` must be picklable: a module-level function (or a builtin) of a module the worker can
    import. Its result must be plain data (numbers, strings, bytes, None, lists, tuples, dicts,
    sets) of at most MAX_RESULT_BYTES pickled: the parent refuses to unpickle anything that
    names a class or function other than `complex`, so a worker taken over by hostile input can
    neither run code in the caller through a crafted pickle nor make it build a container
    larger than the bytes it sent (`set(range(10**10))` is 42 bytes as a pickle of globals).

    `memory_limit_mb` caps how much address space (RLIMIT_AS) a worker may add on top of what it
    holds once started; a call that exceeds it raises MemoryError in the worker, which is then
    retired (kind "crash"). None means no limit. `timeout_s` bounds each call, measured from the
    moment the call is handed to an idle worker; the first call in a worker also imports
    `fn`'s module. Thread-safe; `acall` runs `call` in a thread for asyncio code.
    """

    def __init__(
        self,
        num_workers: int = 2,
        timeout_s: float = 5.0,
        memory_limit_mb: int | None = 1024,
        *,
        start_method: Literal["spawn", "forkserver"] = "spawn",
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be an integer >= 1, got {num_workers!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if memory_limit_mb is not None and not memory_limit_mb > 0:
            raise ValueError(f"memory_limit_mb must be None or > 0, got {memory_limit_mb!r}")
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self.num_workers = num_workers
        self.timeout_s = float(timeout_s)
        self.memory_limit_mb = memory_limit_mb
        self._context = multiprocessing.get_context(start_method)
        self._lock = threading.Lock()
        self._stats = PoolStats()
        self._closed = False
        self._workers: list[_Worker] = []
        self._idle: queue.Queue[_Worker] = queue.Queue()
        for _ in range(num_workers):
            self._idle.put(self._start_worker())

    # ---------------------------------------------------------------- calling

    @property
    def stats(self) -> PoolStats:
        """A snapshot of the counters."""
        with self._lock:
            return replace(self._stats)

    def call(self, fn: Callable[..., Any], *args: Any) -> CallResult:
        """Run `fn(*args)` in a worker; waits for an idle worker first. Never raises for what
        happens in the worker: the outcome is in the result's `kind`."""
        if self._closed:
            raise RuntimeError("VerifierPool is closed")
        self._count("calls")
        try:
            payload = pickle.dumps((fn, args))
        except Exception as error:  # lambdas, local functions, open files ...
            return self._failure("error", f"cannot send the call to a worker: {_describe(error)}")
        worker = self._take_idle_worker()
        result = None
        try:
            result = self._run(worker, payload)
        finally:
            # Anything but a clean answer (including an interrupt here) leaves the worker in an
            # unknown state, possibly still computing: never hand it to the next caller.
            if result is not None and result.kind in ("ok", "error") and not self._closed:
                self._idle.put(worker)
            else:
                self._replace(worker)
        return result

    async def acall(self, fn: Callable[..., Any], *args: Any) -> CallResult:
        """`call` from asyncio code, in a thread so the event loop keeps running."""
        return await asyncio.to_thread(self.call, fn, *args)

    def _run(self, worker: _Worker, payload: bytes) -> CallResult:
        if not worker.ready and not self._await_ready(worker):
            return self._failure("crash", "the worker died while starting")
        try:
            worker.conn.send_bytes(payload)
            if not worker.conn.poll(self.timeout_s):
                return self._failure("timeout", f"no answer within {self.timeout_s:g} s")
            raw = worker.conn.recv_bytes(MAX_RESULT_BYTES)
        except (EOFError, OSError) as error:
            if str(error) == "bad message length":  # what recv_bytes says past its limit
                return self._failure("crash", f"the worker sent over {MAX_RESULT_BYTES} bytes")
            worker.process.join(timeout=5)  # EOF means it is exiting; reap it for the code
            code = worker.process.exitcode
            return self._failure("crash", f"the worker died (exit code {code})")
        try:
            status, body = _load_plain_data(raw)
        except pickle.UnpicklingError as error:
            # The worker checks its own results (`_encode_answer`), so this one is hostile.
            return self._failure("crash", f"the worker sent a forbidden result: {error}")
        if status == "ok":
            return CallResult(ok=True, value=body, error=None, kind="ok")
        if status == "memory":
            return self._failure("crash", f"memory limit of {self.memory_limit_mb} MB: {body}")
        return self._failure("error", body)

    def _await_ready(self, worker: _Worker) -> bool:
        try:
            if worker.conn.poll(_STARTUP_TIMEOUT_S):
                worker.ready = _load_plain_data(worker.conn.recv_bytes()) == ("ready", None)
        except (EOFError, OSError, pickle.UnpicklingError):
            worker.ready = False
        return worker.ready

    def _failure(self, kind: CallKind, message: str) -> CallResult:
        self._count({"timeout": "timeouts", "crash": "crashes", "error": "errors"}[kind])
        return CallResult(ok=False, value=None, error=message, kind=kind)

    def _count(self, counter: str) -> None:
        with self._lock:
            setattr(self._stats, counter, getattr(self._stats, counter) + 1)

    # ---------------------------------------------------------------- workers

    def _start_worker(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=_worker_main,
            args=(child_conn, self.memory_limit_mb),
            name="rlve-verifier",
            daemon=True,
        )
        process.start()
        child_conn.close()  # so the parent sees EOF when the worker dies
        worker = _Worker(process=process, conn=parent_conn)
        with self._lock:
            self._workers.append(worker)
        return worker

    def _take_idle_worker(self) -> _Worker:
        while True:
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                if self._closed:
                    raise RuntimeError(
                        "VerifierPool was closed while waiting for a worker"
                    ) from None

    def _replace(self, worker: _Worker) -> None:
        _stop(worker)
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            if self._closed:
                return
            self._stats.workers_replaced += 1
        self._idle.put(self._start_worker())

    def close(self) -> None:
        """Stop every worker, busy or not. Calls in flight end as "crash"."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for worker in workers:
            _stop(worker)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _stop(worker: _Worker) -> None:
    worker.conn.close()
    if worker.process.is_alive():
        worker.process.kill()  # a hung worker would ignore anything gentler
    worker.process.join(timeout=10)


# -------------------------------------------------------------------- the worker side


def _worker_main(conn: Any, memory_limit_mb: int | None) -> None:
    """Serve calls until the parent closes the pipe or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    if memory_limit_mb is not None:
        _limit_address_space(memory_limit_mb)
    conn.send_bytes(pickle.dumps(("ready", None)))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            fn, args = pickle.loads(payload)  # safe: from the parent, over this worker's own pipe
            answer = ("ok", fn(*args))
        except MemoryError as error:
            conn.send_bytes(pickle.dumps(("memory", _describe(error))))
            return  # a process that hit its limit may be fragmented or half-broken: retire it
        except BaseException as error:  # SystemExit too: the worker, not fn, decides when to go
            answer = ("error", _describe(error))
        conn.send_bytes(_encode_answer(answer))


def _encode_answer(answer: tuple[str, Any]) -> bytes:
    # Checked here with the parent's own rules, so a result that is not plain data (a numpy
    # float, a dataclass) is reported as this call's error instead of looking like an attack.
    try:
        raw = pickle.dumps(answer)
        _load_plain_data(raw)
    except Exception as error:
        raw = pickle.dumps(("error", f"the result is not plain data: {_describe(error)}"))
    return raw


def _limit_address_space(memory_limit_mb: int) -> None:
    import resource

    in_use = 0  # outside Linux the limit is absolute
    if sys.platform == "linux":
        with open("/proc/self/statm") as statm:  # first field: address space in pages
            in_use = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = in_use + memory_limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _exit_when_orphaned(parent_pid: int) -> None:
    # Daemon workers are killed when the parent exits normally; this covers a parent that was
    # killed outright (the worker is re-parented). It cannot help while fn holds the GIL in C.
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(1)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


_PLAIN_GLOBALS = {("builtins", "complex")}
"""the one callable a result may name: two numbers in, one number out. Sets and frozensets
arrive as the pickle opcodes of protocol 4 and later, item by item, never through a call."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PLAIN_GLOBALS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _load_plain_data(raw: bytes) -> Any:
    return _PlainDataUnpickler(io.BytesIO(raw)).load()
