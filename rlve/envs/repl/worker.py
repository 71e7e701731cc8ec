"""The Python REPL worker: one process per episode, started by `rlve.envs.repl.process`.

    python -I rlve/envs/repl/worker.py <limits as JSON>

It speaks JSON lines with its parent over the stdin/stdout it was started with; the code it runs
sees an empty stdin and a captured stdout. Before the first cell it confines itself with what
the kernel enforces (confine.py: a tmpfs working folder, Landlock, seccomp, rlimits, inside the
namespaces process.py starts it in), then adds an audit hook as a first line that gives a
model's ordinary mistakes a readable refusal:

- processes: fork, exec, spawn, system and subprocess (seccomp refuses them underneath);
- files: writes only inside the working directory, reads inside it and in the Python
  installation (Landlock underneath);
- network: socket connect/bind (a network namespace without interfaces underneath);
- memory: RLIMIT_AS (MemoryError); file size: RLIMIT_FSIZE (OSError "File too large");
  CPU: RLIMIT_CPU per cell (SIGXCPU; a cell that ignores it is ended at its wall-clock limit)
  under a hard limit for the whole episode (SIGKILL, whatever the cell does).

The hook is reachable from a cell and is not the boundary; the kernel's confinement is.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import io
import json
import math
import os
import resource
import sys
import traceback
from typing import Any


def _sibling(name: str):
    """A module of this folder, loaded by path (`python -I` puts no script folder on sys.path,
    and importing the rlve package would load far more than the worker needs)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"rlve_repl_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


confine = _sibling("confine")

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
PATH_EVENTS = {"os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
               "os.chdir", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown",
               "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move"}  # fmt: skip
READ_EVENTS = {"os.listdir", "os.scandir"}
REFUSED_EVENTS = {"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                  "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym",
                  "ctypes.cdata", "os.kill", "os.killpg", "socket.__new__", "socket.connect",
                  "socket.bind", "socket.sendto", "socket.getaddrinfo", "os.startfile",
                  "resource.setrlimit", "resource.prlimit"}  # fmt: skip


MAX_OPEN_FILES = 256
READ_DEVICES = ["/dev/urandom", "/dev/random"]
WRITE_DEVICES = ["/dev/null", "/dev/zero"]

LIMITS_BEING_SET = False
"""True while the worker itself sets a cell's CPU limit (the cell's own code may not)"""


class Refused(PermissionError):
    """An operation the REPL sandbox does not allow."""


def isolate_network() -> bool:
    """Move this process into a network namespace without interfaces; False if not allowed."""
    try:
        unshare = ctypes.CDLL(None, use_errno=True).unshare
    except (AttributeError, OSError):  # not Linux
        return False
    return any(unshare(flags) == 0 for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET))


def make_audit_hook(workdir: str, read_roots: list[str]):
    inside = os.path.realpath(workdir) + os.sep

    def allowed(path: Any, write: bool) -> bool:
        if isinstance(path, int):  # an open file descriptor
            return True
        real = os.path.realpath(os.fsdecode(path)) + os.sep
        if real.startswith(inside) or real == inside:
            return True
        return not write and any(real.startswith(root) for root in read_roots)

    def hook(event: str, args: tuple) -> None:
        if event.startswith("resource.") and LIMITS_BEING_SET:
            return
        if event in REFUSED_EVENTS:
            raise Refused(f"{event} is not allowed in this REPL")
        if event == "open" and args:
            path, mode, flags = (list(args) + [None, None])[:3]
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and bool(flags & WRITE_FLAGS)
            )
            if not allowed(path, write):
                raise Refused(f"access to {path!r} is not allowed (only the working directory)")
        elif event in PATH_EVENTS and args:
            if not allowed(args[0], write=event not in READ_EVENTS):
                raise Refused(f"{event} on {args[0]!r} is not allowed (only the working directory)")

    return hook


class CappedWriter(io.TextIOBase):
    """Keeps the first `limit` characters written; counts all of them."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.kept, self.total = limit, [], 0, 0

    def write(self, text: str) -> int:
        self.total += len(text)
        if self.kept < self.limit:
            piece = text[: self.limit - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def text(self) -> str:
        return "".join(self.parts)


class Worker:
    def __init__(self, limits: dict[str, Any], channel_in, channel_out):
        self.limits = limits
        self.channel_in, self.channel_out = channel_in, channel_out
        self.final: str | None = None
        self.namespace: dict[str, Any] = {
            "__name__": "__repl__", "FINAL": self._final, "llm": self._llm,
            "llm_batch": self._llm_batch,
        }  # fmt: skip

    def send(self, message: dict[str, Any]) -> None:
        self.channel_out.write(json.dumps(message) + "\n")
        self.channel_out.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.channel_in.readline()
        return json.loads(line) if line else None

    def _final(self, answer: Any) -> str:
        """FINAL(answer): end the episode with this answer (its first max_output_chars)."""
        self.final = str(answer)[: self.limits["max_output_chars"]]
        return self.final

    def _llm_batch(self, prompts: list[str]) -> list[str]:
        """Ask the model each prompt (one call per prompt, answered together)."""
        if not isinstance(prompts, list | tuple) or not all(isinstance(p, str) for p in prompts):
            raise TypeError("llm_batch takes a list of strings")
        self.send({"op": "llm", "prompts": list(prompts)})
        reply = self.receive()
        if reply is None:
            raise SystemExit(0)
        if reply.get("error"):
            raise RuntimeError(reply["error"])
        return list(reply["results"])

    def _llm(self, prompt: str) -> str:
        """Ask the model one prompt; returns its answer."""
        return self._llm_batch([prompt])[0]

    def run(self, code: str) -> dict[str, Any]:
        out = CappedWriter(self.limits["max_output_chars"])
        value, error = None, None
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = int(used.ru_utime + used.ru_stime + self.limits["cpu_s"]) + 1
        global LIMITS_BEING_SET
        LIMITS_BEING_SET = True
        try:
            hard = resource.getrlimit(resource.RLIMIT_CPU)[1]  # the episode's, set at start
            resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, hard), hard))
        finally:
            LIMITS_BEING_SET = False
        stdout, sys.stdout = sys.stdout, out
        stderr, sys.stderr = sys.stderr, out
        try:
            tree = ast.parse(code, "<cell>", "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<cell>", "exec"), self.namespace)  # safe: confined (confine.py)
            if last is not None:
                expression = compile(ast.Expression(last.value), "<cell>", "eval")
                result = eval(expression, self.namespace)  # safe: confined (confine.py)
                value = None if result is None else repr(result)[: self.limits["max_output_chars"]]
        except MemoryError:
            error = "MemoryError: the cell went over the REPL's memory limit"
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the REPL lives on
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            error = "".join(line for line in lines if 'File "<cell>"' in line or line is lines[-1])
            error = error[-self.limits["max_output_chars"] :]
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        if self.final is None and "final_answer" in self.namespace:
            self.final = str(self.namespace["final_answer"])[: self.limits["max_output_chars"]]
        return {"op": "result", "stdout": out.text(), "stdout_chars": out.total, "value": value,
                "error": error, "final": self.final}  # fmt: skip

    def serve(self) -> None:
        while (message := self.receive()) is not None:
            if message["op"] == "set":
                self.namespace[message["name"]] = message["value"]
                self.send({"op": "ok"})
            elif message["op"] == "run":
                self.send(self.run(message["code"]))


def reap(child: int) -> int:
    """PID 1's whole job: wait for the worker (and the orphans the namespace hands to PID 1),
    then exit as the worker did, a signal s as 128 + s. PID 1 of a namespace ignores signals it
    has no handler for, SIGXCPU included, so the cells run in a child of it."""
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def main() -> None:
    limits = json.loads(sys.argv[1])
    in_namespaces = os.getpid() == 1  # PID 1 of the namespaces process.py made
    if in_namespaces and (child := os.fork()):
        sys.exit(reap(child))
    channel_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.chdir(limits["workdir"])
    isolated = in_namespaces or isolate_network()
    tmpfs = in_namespaces and confine.mount_workdir(
        limits["workdir"], limits["disk_mb"], limits["max_files"]
    )
    confine.limit_resources(limits["memory_mb"], limits["max_file_bytes"], MAX_OPEN_FILES)
    episode_cpu = math.ceil(limits["episode_cpu_s"])  # a cell may raise its own limit up to here
    resource.setrlimit(resource.RLIMIT_CPU, (episode_cpu, episode_cpu))
    roots = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots |= {os.path.realpath(p) + os.sep for p in sys.path if p and os.path.isdir(p)}
    roots.discard(os.sep)
    landlock = confine.restrict_paths(sorted(roots) + READ_DEVICES,
                                      [limits["workdir"], *WRITE_DEVICES])  # fmt: skip
    seccomp = confine.install_seccomp()
    sys.addaudithook(make_audit_hook(limits["workdir"], sorted(roots)))
    worker = Worker(limits, channel_in, channel_out)
    isolation = {"namespaces": in_namespaces, "tmpfs": tmpfs, "landlock": landlock,
                 "seccomp": seccomp}  # fmt: skip
    worker.send({"op": "hello", "network_isolated": isolated, "isolation": isolation})
    worker.serve()


if __name__ == "__main__":
    main()
