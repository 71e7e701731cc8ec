"""Run an OpenEnv server (any ASGI app) on this machine for tests and local play.

    with local_server("openenv_guess.app:app", app_dir="tests/fixtures") as server:
        env = OpenEnvEnv(server.url, ...)
        ...
        server.kill()  # the server dies now, as if it crashed

`uvicorn` runs in a child process of this interpreter on 127.0.0.1 and a free port; the context
waits until `GET /health` answers, gives the `LocalServer`, and stops the child when it ends
(only that child: nothing is killed by name).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

STARTUP_TRIES = 3
"""ports tried: another process may take the free port found before uvicorn binds it"""


@dataclass
class LocalServer:
    """A running server: its address, its process and its output."""

    url: str
    """http://127.0.0.1:<port>"""
    process: subprocess.Popen
    log: IO[bytes]
    """the server's stdout and stderr (a file: a pipe nobody reads would block the server)"""

    def output(self) -> str:
        """What the server has printed so far."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill(self) -> None:
        """End the server at once (SIGKILL), as a crash would, and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        """Ask the server to stop (SIGTERM); kill it if it has not stopped within `grace_s`."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def local_server(app: str, *, app_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None,
                 start_timeout_s: float = 30.0) -> Iterator[LocalServer]:  # fmt: skip
    """Serve the ASGI app `app` ('package.module:attribute', imported from `app_dir`, default
    the working directory) with extra environment variables `env`; see the module docstring.
    RuntimeError, with the server's last output, if it does not answer within start_timeout_s."""
    if ":" not in app:
        raise ValueError(f"app must look like 'package.module:attribute', got {app!r}")
    server = None
    for _ in range(STARTUP_TRIES):
        server = _start(app, Path(app_dir or "."), dict(env or {}), start_timeout_s)
        if server is not None:
            break
    if server is None:
        raise RuntimeError(f"uvicorn could not serve {app} on {STARTUP_TRIES} free ports")
    try:
        yield server
    finally:
        server.stop()
        server.log.close()


def _start(app: str, app_dir: Path, env: dict[str, str], timeout_s: float) -> LocalServer | None:
    """A started server, or None when its port was taken meanwhile (worth another try)."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app, "--app-dir", str(app_dir),
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    server = LocalServer(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if client.get(f"{server.url}/health").status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    server.stop()
    output = server.output()
    log.close()
    if "address already in use" in output.lower():
        return None
    raise RuntimeError(f"{' '.join(command)} did not answer on {server.url}/health within "
                       f"{timeout_s:g} s; its output ends:\n{output[-2000:]}")  # fmt: skip
