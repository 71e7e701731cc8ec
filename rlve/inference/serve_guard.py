"""Who may call `rlve.serve`: the holder of the run's secret, on the paths rlve uses.

vLLM's dev mode (which rlve.serve needs for `/collective_rpc`) lets a caller join a weight group,
push any weights, load any local file as weights or write files; vLLM's `--api-key` guards only
its `/v1` paths. `ServeGuard` sits in front of all of it (vLLM's `--middleware`): a request
without `Authorization: Bearer <RLVE_SERVE_SECRET>` gets 401 before anything reaches the server,
and a path rlve does not use gets 404 with or without it. Only `/health` is open.
"""

from __future__ import annotations

import hmac
import json
import os
from typing import Any

SECRET_ENV = "RLVE_SERVE_SECRET"
"""the environment variable holding the secret, on the server and in the trainer"""
OPEN_PATHS = frozenset({"/health"})
GUARDED_PATHS = frozenset({
    "/v1/models", "/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize",
    "/collective_rpc", "/reset_prefix_cache",
})  # fmt: skip
"""what rlve's trainer and OpenAI-compatible clients call"""


def bearer_headers() -> dict[str, str]:
    """The header that authorises this process's requests to rlve.serve ({} without a secret)."""
    secret = os.environ.get(SECRET_ENV, "")
    return {"Authorization": f"Bearer {secret}"} if secret else {}


class ServeGuard:
    """ASGI middleware: 404 outside `OPEN_PATHS | GUARDED_PATHS`, 401 on a guarded path without
    the secret (compared in constant time)."""

    def __init__(self, app: Any, secret: str | None = None):
        self.app = app
        secret = secret if secret is not None else os.environ.get(SECRET_ENV, "")
        if not secret:
            raise RuntimeError(f"{SECRET_ENV} is not set: rlve.serve refuses to start unguarded")
        self._expected = f"Bearer {secret}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if scope["type"] != "http" or path not in OPEN_PATHS | GUARDED_PATHS:
            return await _refuse(scope, send, 404, f"{path} is not served")
        if path in GUARDED_PATHS and not self._authorised(scope):
            return await _refuse(scope, send, 401, f"{path} needs the server's secret "
                                 f"(Authorization: Bearer ${SECRET_ENV})")  # fmt: skip
        return await self.app(scope, receive, send)

    def _authorised(self, scope: dict) -> bool:
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        return hmac.compare_digest(given, self._expected)


async def _refuse(scope: dict, send: Any, status: int, message: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
