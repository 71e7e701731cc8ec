"""A small async client for OpenEnv servers (the wire protocol of openenv-core 0.3).

In 0.3 the HTTP `POST /reset` and `POST /step` build a fresh environment for every request and
keep nothing between them; an episode lives on the WebSocket `/ws`, where each connection gets
an environment instance of its own. So one `OpenEnvSession` is one connection, and concurrent
episodes never share server state. The messages, one answer per request, in order:

    {"type": "reset", "data": {"seed": 3}}        -> {"type": "observation", "data": RESULT}
    {"type": "step", "data": {<action fields>}}   -> {"type": "observation", "data": RESULT}
    {"type": "close"}                             (no answer: the server ends the session)
    any failure                                   -> {"type": "error", "data": {"message", "code"}}

where RESULT is `{"observation": {...}, "reward": number | null, "done": bool}` (the observation
without its reward, done and metadata). `GET /schema` gives the JSON schemas of the action and
the observation. Every call has a time limit and every answer a size cap (`MAX_MESSAGE_BYTES`);
answers are parsed once with `json.loads`, linear in their size.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

MAX_MESSAGE_BYTES = 64 * 2**20
"""the largest answer read from a server (a WebSocket message or the schema), the same cap as
rlve.inference.capped_http's (environments do not import the inference package)"""
MAX_ERROR_CHARS = 1000
"""a server's error message is cut to this many characters before it is kept"""
CAPACITY_REACHED = "CAPACITY_REACHED"
"""the error code of a server that has as many sessions as it allows"""


class OpenEnvFailure(Exception):
    """The server could not be reached, failed, died, sent something unreadable, or did not
    answer in time; the session cannot go on. `code` is the server's error code, if it sent one."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class StepResult:
    """A server's answer to reset or step."""

    observation: dict[str, Any]
    """the observation's own fields (reward, done and metadata are not among them)"""
    reward: float | None
    """the reward of the last action; None when the server gave none (after reset, usually)"""
    done: bool
    """the episode is over"""


def check_base_url(url: str) -> str:
    """`url` without a trailing slash, or ValueError when it is not http(s)://host[:port]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"an OpenEnv server url looks like http://host:port, got {url!r}")
    return url.rstrip("/")


def is_loopback(url: str) -> bool:
    """The url names this machine (its connections must not go through a proxy)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetch_schema(url: str, timeout_s: float) -> dict[str, Any]:
    """`GET <url>/schema`: `{"action": ..., "observation": ..., "state": ...}` JSON schemas.
    Synchronous (an environment reads it when it is built); OpenEnvFailure if that fails."""
    address = f"{url}/schema"
    try:
        with httpx.Client(timeout=timeout_s, trust_env=not is_loopback(url)) as client:
            with client.stream("GET", address) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_MESSAGE_BYTES:
                        raise OpenEnvFailure(f"GET {address}: the answer passed "
                                             f"{MAX_MESSAGE_BYTES:,} bytes")  # fmt: skip
        if response.status_code != 200:
            text = bytes(body[:MAX_ERROR_CHARS]).decode(errors="replace")
            raise OpenEnvFailure(f"GET {address} answered HTTP {response.status_code}: {text}")
        schema = json.loads(body)
    except OpenEnvFailure:
        raise
    except Exception as exc:
        raise OpenEnvFailure(f"GET {address} failed: {_describe(exc)}") from exc
    if not (isinstance(schema, dict) and all(isinstance(schema.get(k), dict)
                                             for k in ("action", "observation"))):  # fmt: skip
        raise OpenEnvFailure(f"GET {address} gave no action and observation schemas; is this "
                             "an OpenEnv server?")  # fmt: skip
    return schema


class OpenEnvSession:
    """One episode's connection to `<url>/ws`: `open`, `reset`, `step`..., `close`.

    Calls are made one at a time (one answer per request, in order). A server's error answer
    (OpenEnvFailure with its `code`) leaves the session usable; after any other failure (no
    answer in time, a lost connection, an unreadable answer) the session is broken: later calls
    fail at once, and only `close` is left to do.
    """

    def __init__(self, url: str, timeout_s: float):
        self.url = check_base_url(url)
        self.timeout_s = timeout_s
        """the longest wait for connecting, and for each request and its answer"""
        self._ws: ClientConnection | None = None
        self._broken: str | None = None

    async def open(self) -> OpenEnvSession:
        ws_url = "ws" + self.url.removeprefix("http") + "/ws"
        try:
            self._ws = await connect(
                ws_url, open_timeout=self.timeout_s, close_timeout=min(self.timeout_s, 5.0),
                max_size=MAX_MESSAGE_BYTES, proxy=None if is_loopback(self.url) else True,
            )  # fmt: skip
        except Exception as exc:
            raise self._break(f"cannot connect to {ws_url}: {_describe(exc)}") from exc
        return self

    async def reset(self, **params: Any) -> StepResult:
        """Start an episode (`params`: seed, episode_id, or what else the server's reset takes)."""
        return await self._call("reset", {"type": "reset", "data": params})

    async def step(self, action: dict[str, Any]) -> StepResult:
        return await self._call("step", {"type": "step", "data": action})

    async def close(self) -> None:
        """Say goodbye and close the connection; never raises. Waits at most timeout_s for the
        goodbye and 5 s more (or timeout_s, if less) for the server to close its end."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await asyncio.wait_for(ws.send(json.dumps({"type": "close"})), self.timeout_s)
        except Exception:
            pass  # a dead or hung server: the close below still ends the connection
        try:
            await ws.close()
        except Exception:
            pass

    async def _call(self, what: str, message: dict[str, Any]) -> StepResult:
        if self._broken is not None:
            raise OpenEnvFailure(f"the session is broken ({self._broken}); no {what}")
        if self._ws is None:
            raise OpenEnvFailure(f"the session is not open; no {what}")
        try:
            raw = await asyncio.wait_for(self._exchange(self._ws, message), self.timeout_s)
        except TimeoutError:
            raise self._break(f"OpenEnv server {self.url} did not answer {what} within "
                              f"{self.timeout_s:g} s") from None  # fmt: skip
        except Exception as exc:
            raise self._break(f"OpenEnv server {self.url} failed during {what}: "
                              f"{_describe(exc)}") from exc  # fmt: skip
        try:
            return parse_answer(raw)
        except OpenEnvFailure as failure:
            reason = f"OpenEnv server {self.url}, {what}: {failure}"
            if failure.code is None:  # unreadable: what comes next cannot be trusted either
                raise self._break(reason) from None
            raise OpenEnvFailure(reason, failure.code) from None  # answered: still in step

    @staticmethod
    async def _exchange(ws: ClientConnection, message: dict[str, Any]) -> str | bytes:
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:  # refused (at capacity): the server said why, then closed
            pass  # unread; its answer is still queued for recv (which raises if there is none)
        return await ws.recv()

    def _break(self, reason: str) -> OpenEnvFailure:
        self._broken = reason
        return OpenEnvFailure(reason)


async def open_session(
    url: str, timeout_s: float, **reset_params: Any
) -> tuple[OpenEnvSession, StepResult]:
    """A new session, reset with `reset_params`: `(session, first result)`.

    A server at capacity (as many sessions as it allows, or a closed one not yet released) is
    asked again, with growing pauses, until timeout_s has passed since the first try.
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        session = OpenEnvSession(url, timeout_s)
        try:
            await session.open()
            return session, await session.reset(**reset_params)
        except OpenEnvFailure as failure:
            await session.close()
            if failure.code != CAPACITY_REACHED or time.monotonic() + pause > deadline:
                raise
        except BaseException:  # cancelled (the episode's time limit): free the server's slot
            await session.close()
            raise
        await asyncio.sleep(pause)
        pause = min(2 * pause, 1.0)


def parse_answer(raw: str | bytes) -> StepResult:
    """A server's answer to reset or step, checked; OpenEnvFailure for an error answer or one
    that is not shaped as the protocol says."""
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise OpenEnvFailure(f"the answer is not JSON ({type(exc).__name__})") from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    data = answer.get("data") if isinstance(answer, dict) else None
    if kind == "error":
        error = data if isinstance(data, dict) else {}
        code = str(error.get("code", "UNKNOWN"))
        detail = str(error.get("message", "no message"))
        if "errors" in error:
            detail += f": {json.dumps(error['errors'], default=str)}"
        raise OpenEnvFailure(f"server error {code}: {detail[:MAX_ERROR_CHARS]}", code)
    if kind != "observation" or not isinstance(data, dict):
        raise OpenEnvFailure(f"expected an observation, got type {str(kind)[:80]!r}")
    observation, reward, done = data.get("observation"), data.get("reward"), data.get("done")
    if not isinstance(observation, dict):
        raise OpenEnvFailure("the answer's observation is not an object")
    if reward is not None and not (isinstance(reward, int | float) and math.isfinite(reward)):
        raise OpenEnvFailure(f"the reward is not a finite number: {str(reward)[:80]!r}")
    if not isinstance(done, bool):
        raise OpenEnvFailure(f"'done' is not true or false: {str(done)[:80]!r}")
    return StepResult(observation, None if reward is None else float(reward), done)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
