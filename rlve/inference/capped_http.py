"""HTTP answers read with a size cap: a server that sends without end fills no memory.

httpx's `post`/`get` read a body whole, however large (and however far it inflates, gzip
included). `send_capped` streams it and stops at `limit` decoded bytes with `ResponseTooLarge`.
"""

from __future__ import annotations

from typing import Any

import httpx

MAX_RESPONSE_BYTES = 64 * 2**20
"""the largest answer read from a server: far above a completion with log-probs (~100 bytes a
token), far below the memory of a run"""
_CODING_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}
"""describe the body on the wire; the returned response holds it decoded"""


class ResponseTooLarge(httpx.HTTPError):
    """A server's answer went past the cap; the message names the url and the cap."""


async def send_capped(
    client: httpx.AsyncClient, method: str, url: str, limit: int = MAX_RESPONSE_BYTES, **kwargs: Any
) -> httpx.Response:
    """`client.request(method, url, **kwargs)`, its body read up to `limit` bytes."""
    response = await client.send(client.build_request(method, url, **kwargs), stream=True)
    try:
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"{method} {url}: the answer passed {limit:,} bytes; the "
                                       "rest was not read")  # fmt: skip
            chunks.append(chunk)
    finally:
        await response.aclose()
    headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _CODING_HEADERS]
    return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks),
                          request=response.request)  # fmt: skip
