"""An engine for any OpenAI-compatible chat-completions endpoint (hosted models, `vllm serve`).

Text only: the conversation goes out as `messages` (with `tools` when the environment has them)
and the answer comes back as text, plus structured tool calls when the server returns them; no
token ids, so trajectories are not token-exact (evaluation and teachers, not RL training).
Rate limits, server errors and time-outs are retried with exponential backoff.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx

from rlve.inference.capped_http import send_capped
from rlve.inference.engine import Generation, GenerationRequest
from rlve.types import Message


def worth_retrying(status: int) -> bool:
    """Request time-out (408), rate limit (429) and server errors (5xx) may clear on their own."""
    return status in (408, 429) or status >= 500


class EndpointError(RuntimeError):
    """The endpoint refused a request, or kept failing after every retry."""


class OpenAIEngine:
    """An rlve `Engine` on `POST {base_url}/chat/completions`.

    `base_url` is the API root as OpenAI clients take it, e.g. "https://api.openai.com/v1" or
    "http://127.0.0.1:8000/v1" for `vllm serve`. `api_key` defaults to $OPENAI_API_KEY; without
    one, no Authorization header is sent (local servers need none).
    """

    tokenizer = None

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        extra_body: dict[str, Any] | None = None,
    ):
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.extra_body = dict(extra_body or {})
        """extra request fields, e.g. {"top_k": 20} for vLLM servers"""
        self.retries = 0
        """retries made so far, over all requests"""
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # ---- lifecycle ----------------------------------------------------------------------------

    def _client_for_this_loop(self) -> httpx.AsyncClient:
        # An AsyncClient's connections belong to the event loop that opened them, and
        # `rlve.evaluate` runs each evaluation on a fresh loop: one client per loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(headers=headers, timeout=self.timeout_s)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the connections of the current loop's client."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()

    async def __aenter__(self) -> OpenAIEngine:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    # ---- generation ---------------------------------------------------------------------------

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body of one chat-completions request."""
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(request.messages),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        if request.tools:
            body["tools"] = request.tools
        body.update(self.extra_body)
        return body

    async def generate(self, request: GenerationRequest) -> Generation:
        payload = await self._post(self.request_body(request))
        return parse_completion(payload, self.url)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        client = self._client_for_this_loop()
        for attempt in range(self.max_retries + 1):
            last_try = attempt == self.max_retries
            try:
                response = await send_capped(client, "POST", self.url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if last_try:
                    raise EndpointError(self._gave_up(problem)) from exc
                await self._wait_before_retry(attempt, None)
                continue
            if response.status_code == 200:
                try:
                    return response.json()
                except json.JSONDecodeError as exc:
                    raise EndpointError(
                        f"POST {self.url} answered 200 with a body that is not JSON: "
                        f"{response.text[:200]!r}"
                    ) from exc
            problem = f"HTTP {response.status_code}: {response.text[:300]}"
            if not worth_retrying(response.status_code):
                raise EndpointError(f"POST {self.url} failed with {problem}{_hint(response)}")
            if last_try:
                raise EndpointError(self._gave_up(problem))
            await self._wait_before_retry(attempt, response.headers.get("retry-after"))
        raise AssertionError("unreachable: the loop returns or raises")

    def _gave_up(self, problem: str) -> str:
        return f"POST {self.url} failed after {self.max_retries + 1} attempts; last: {problem}"

    async def _wait_before_retry(self, attempt: int, retry_after: str | None) -> None:
        """Exponential backoff (backoff_s * 2^attempt), or the server's Retry-After if longer."""
        self.retries += 1
        delay = self.backoff_s * 2**attempt
        try:
            delay = max(delay, float(retry_after)) if retry_after else delay
        except ValueError:  # Retry-After may be an HTTP date; the backoff is good enough then
            pass
        await asyncio.sleep(min(delay, self.max_backoff_s))


def _hint(response: httpx.Response) -> str:
    if response.status_code in (401, 403):
        return " (check the API key: api_key or $OPENAI_API_KEY)"
    if response.status_code == 404:
        return " (base_url should end at the API root, e.g. http://host:8000/v1; check the model)"
    return ""


def wire_messages(messages: list[Message]) -> list[Message]:
    """The conversation as strict OpenAI servers accept it.

    rlve's tool replies carry the tool's name but no `tool_call_id`, and structured calls may lack
    ids or carry arguments as a dict; servers want each tool message tied to the call it answers,
    in order, and arguments as a JSON string.
    """
    wired: list[Message] = []
    open_ids: list[str] = []
    for index, message in enumerate(messages):
        message = dict(message)
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = []
            for j, call in enumerate(message["tool_calls"]):
                function = call.get("function", call)
                arguments = function.get("arguments", {})
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                calls.append(
                    {
                        "id": call.get("id") or f"call_{index}_{j}",
                        "type": "function",
                        "function": {"name": function.get("name", ""), "arguments": arguments},
                    }
                )
            message["tool_calls"] = calls
            open_ids = [c["id"] for c in calls]
        elif message.get("role") == "tool" and "tool_call_id" not in message and open_ids:
            message["tool_call_id"] = open_ids.pop(0)
        wired.append(message)
    return wired


def parse_completion(payload: dict[str, Any], url: str) -> Generation:
    """The first choice of a chat-completions response as a `Generation`.

    finish_reason "length" stays "length"; "stop", "tool_calls" and the rest are a finished turn.
    """
    try:
        choice = payload["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise EndpointError(
            f"{url} answered without choices[0].message: {json.dumps(payload)[:300]}"
        ) from exc
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    tool_calls = message.get("tool_calls") or None
    return Generation(
        text=message.get("content") or "", finish_reason=finish, tool_calls=tool_calls
    )
