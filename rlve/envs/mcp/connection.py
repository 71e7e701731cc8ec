"""Connections to MCP servers, owned by one private event loop.

The `mcp` SDK's client is an async context manager whose streams belong to the task that
entered it, while rlve plays episodes on whatever event loop its caller runs (evaluation and
training each run their own). So every connection lives on one daemon thread with its own loop:
a connection's owner task enters `mcp.Client`, lists the tools, and waits until it is told to
close; calls from any loop are handed to that thread and awaited there with a time limit.

A stdio server is a child process that ends when its stdin closes: when the connection closes,
when its owner task is cancelled, and when this process dies however it dies.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rlve.config import require

Lifetime = Literal["shared", "per_rollout"]
CLIENT_TIMEOUT_MARGIN_S = 5.0
"""the SDK client's read limit is the call limit plus this, a backstop that never wins the race"""


@dataclass(frozen=True)
class MCPServerConfig:
    """How to start or reach one MCP server, its lifetime, and how long to wait for it."""

    name: str
    """a short name for messages and metrics"""
    command: str | None = None
    """stdio server: the executable to run (`python` means this interpreter)"""
    args: tuple[str, ...] = ()
    """stdio server: its arguments; `{key}` is filled from the example's `info` per episode"""
    env: Mapping[str, str] = field(default_factory=dict)
    """stdio server: extra environment variables"""
    url: str | None = None
    """streamable-HTTP server: its address, e.g. http://127.0.0.1:8000/mcp"""
    lifetime: Lifetime = "shared"
    """'shared': one connection for every rollout (read-only tools); 'per_rollout': a fresh
    server process (stdio) or session (HTTP) per episode, so tools may keep state"""
    start_timeout_s: float = 30.0
    """longest wait for a server to start and list its tools"""
    call_timeout_s: float = 30.0
    """longest wait for one tool call; past it the episode ends ('mcp_server_failed')"""
    shutdown_timeout_s: float = 5.0
    """longest wait for a connection to close before its task is cancelled"""

    def __post_init__(self) -> None:
        require(bool(self.name), "an MCP server needs a name")
        require(
            (self.command is None) != (self.url is None),
            f"MCP server {self.name!r}: give exactly one of command (stdio) and url (HTTP)",
        )
        require(
            self.lifetime in ("shared", "per_rollout"),
            f"MCP server {self.name!r}: lifetime must be 'shared' or 'per_rollout', "
            f"got {self.lifetime!r}",
        )
        for key in ("start_timeout_s", "call_timeout_s", "shutdown_timeout_s"):
            value = getattr(self, key)
            require(value > 0, f"MCP server {self.name!r}: {key} must be > 0, got {value!r}")

    def target(self, info: Mapping[str, Any]):
        """What `mcp.Client` connects to for an episode with this example `info`."""
        from mcp import StdioServerParameters

        if self.url is not None:
            return self.url
        try:
            args = [arg.format(**info) for arg in self.args]
        except KeyError as exc:
            raise ValueError(
                f"MCP server {self.name!r}: argument placeholder {exc} is not in the example's "
                f"info (keys: {sorted(info)})"
            ) from None
        command = sys.executable if self.command == "python" else self.command
        return StdioServerParameters(command=command, args=args, env=dict(self.env) or None)


class MCPServerFailure(Exception):
    """A server did not start, died, or did not answer in time; the episode cannot go on."""


class _Loop:
    """An event loop on a daemon thread; `run` awaits a coroutine there from any other loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="rlve-mcp", daemon=True).start()

    async def run(self, coro: Coroutine, timeout_s: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)

    def run_sync(self, coro: Coroutine, timeout_s: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)


_loop: _Loop | None = None
_loop_lock = threading.Lock()


def mcp_loop() -> _Loop:
    """The process's MCP thread (started on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = _Loop()
        return _loop


class MCPConnection:
    """One live session with one MCP server. Open it with `open`, close it with `close`."""

    def __init__(self, config: MCPServerConfig, info: Mapping[str, Any] | None = None):
        self.config = config
        self.target = config.target(info or {})
        self.tools: list[Any] = []
        """the server's tools (`mcp.types.Tool`), listed when the connection opened"""
        self._client: Any = None
        self._owner: asyncio.Task | None = None
        self._closing: asyncio.Event | None = None

    @property
    def alive(self) -> bool:
        return self._owner is not None and not self._owner.done()

    async def open(self) -> MCPConnection:
        """Start (or reach) the server and list its tools; MCPServerFailure if that fails or
        takes longer than start_timeout_s."""
        await mcp_loop().run(self._start_checked(), self.config.start_timeout_s + 5.0)
        return self

    def open_sync(self) -> MCPConnection:
        """`open` for code that is not a coroutine (an environment's constructor)."""
        mcp_loop().run_sync(self._start_checked(), self.config.start_timeout_s + 5.0)
        return self

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call one tool: (its result as text, whether the server reported a tool error).
        MCPServerFailure when the server is gone or does not answer in time."""
        if not self.alive:
            raise MCPServerFailure(f"MCP server {self.config.name!r} is not running")
        try:
            result = await mcp_loop().run(
                self._client.call_tool(name, arguments), self.config.call_timeout_s
            )
        except TimeoutError:
            raise MCPServerFailure(f"MCP server {self.config.name!r} did not answer {name} "
                                   f"within {self.config.call_timeout_s} s") from None  # fmt: skip
        except Exception as exc:
            raise MCPServerFailure(f"MCP server {self.config.name!r} failed during {name}: "
                                   f"{_describe(exc)}") from exc  # fmt: skip
        return result_text(result), bool(result.is_error)

    async def close(self) -> None:
        """End the session (a stdio server's process ends with it); never raises."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        try:
            await mcp_loop().run(self._stop(owner), self.config.shutdown_timeout_s + 5.0)
        except Exception:  # the owner task is cancelled in _stop; nothing else to release
            pass

    def close_sync(self) -> None:
        """`close` for code that is not a coroutine."""
        owner, self._owner = self._owner, None
        if owner is not None:
            try:
                mcp_loop().run_sync(self._stop(owner), self.config.shutdown_timeout_s + 5.0)
            except Exception:
                pass

    # ---- on the MCP thread ----------------------------------------------------------------

    async def _start_checked(self) -> None:
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout_s)
        except BaseException as exc:
            owner, self._owner = self._owner, None
            owner.cancel()
            await asyncio.wait([owner], timeout=self.config.shutdown_timeout_s)
            if isinstance(exc, TimeoutError):
                raise MCPServerFailure(f"MCP server {self.config.name!r} did not start within "
                                       f"{self.config.start_timeout_s} s") from None  # fmt: skip
            if isinstance(exc, Exception):
                raise MCPServerFailure(f"MCP server {self.config.name!r} failed to start: "
                                       f"{_describe(exc)}") from exc  # fmt: skip
            raise

    async def _own(self, ready: asyncio.Future) -> None:
        from mcp import Client

        try:
            # the client's own read limit is a backstop past `call`'s, so that a call cut off
            # is always reported as such (both at call_timeout_s raced under load)
            backstop = self.config.call_timeout_s + CLIENT_TIMEOUT_MARGIN_S
            async with Client(self.target, read_timeout_seconds=backstop) as c:
                self._client = c
                self.tools = list((await c.list_tools()).tools)
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _stop(self, owner: asyncio.Task) -> None:
        self._closing.set()
        done, _ = await asyncio.wait([owner], timeout=self.config.shutdown_timeout_s)
        if not done:
            owner.cancel()
            await asyncio.wait([owner], timeout=5.0)


def result_text(result: Any) -> str:
    """A tool result as the text a model reads: its text blocks, one per line; other blocks are
    named by type (an image is shown as `[image]`)."""
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """The innermost useful message of an exception (anyio wraps them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
