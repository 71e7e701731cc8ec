"""Answers are read with a cap, counted after decompression: an endless or inflating body stops
at the cap with an error naming the url, and a normal one arrives whole."""

import gzip
import json

import httpx
import pytest

from rlve.inference.capped_http import ResponseTooLarge, send_capped


def client_answering(body: bytes, headers: dict | None = None) -> httpx.AsyncClient:
    async def chunks():
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    handler = lambda request: httpx.Response(200, headers=headers, content=chunks())  # noqa: E731
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_a_body_under_the_cap_arrives_whole_and_decoded():
    payload = json.dumps({"choices": [{"text": "x" * 5000}]}).encode()
    async with client_answering(gzip.compress(payload), {"content-encoding": "gzip"}) as client:
        response = await send_capped(client, "POST", "http://m/v1", limit=len(payload), json={})
    assert response.status_code == 200 and response.json()["choices"][0]["text"] == "x" * 5000


async def test_a_body_over_the_cap_stops_there_even_when_it_arrives_compressed():
    bomb = gzip.compress(b"0" * 10_000_000)  # ~10 KB on the wire, 10 MB decoded
    async with client_answering(bomb, {"content-encoding": "gzip"}) as client:
        with pytest.raises(ResponseTooLarge, match=r"POST http://m/v1: .*1,000,000 bytes"):
            await send_capped(client, "POST", "http://m/v1", limit=1_000_000, json={})
