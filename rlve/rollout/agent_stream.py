"""A chat completion sent as OpenAI's stream of chunks, for agents that ask with `stream=true`.

The endpoint generates each choice whole (it records the sampled ids of a finished turn), then
sends it as server-sent events in the shape the openai SDK and agent frameworks parse: per
choice a chunk whose delta holds the role, the text and the tool calls, then a chunk with its
finish reason; a last chunk with the usage when `stream_options.include_usage` asks for it; then
`data: [DONE]`. The agent sees the same message as without streaming, only later in one piece.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class StreamedCompletion:
    """A finished `chat.completion` to send as chunks."""

    completion: dict
    include_usage: bool = False

    def chunks(self) -> list[dict]:
        """The `chat.completion.chunk` objects, in order."""
        head = {key: self.completion[key] for key in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"
        chunks = []
        for choice in self.completion["choices"]:
            message = choice["message"]
            delta = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                delta["tool_calls"] = [
                    {"index": i, **call} for i, call in enumerate(message["tool_calls"])
                ]
            index = choice["index"]
            chunks.append(
                {
                    **head,
                    "choices": [
                        {"index": index, "delta": delta, "finish_reason": None, "logprobs": None}
                    ],
                }
            )
            chunks.append({**head, "choices": [{"index": index, "delta": {},
                                                "finish_reason": choice["finish_reason"],
                                                "logprobs": None}]})  # fmt: skip
        chunks[-1]["rlve"] = self.completion["rlve"]  # the sampling settings used
        if self.include_usage:
            chunks.append({**head, "choices": [], "usage": self.completion["usage"]})
        return chunks

    def events(self) -> Iterator[str]:
        """The chunks as server-sent events, then the end marker."""
        for chunk in self.chunks():
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"


def stream_request(body: dict) -> tuple[bool, bool]:
    """(stream, include_usage) of a request body, each checked to be what OpenAI accepts."""
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ValueError(f"stream must be true or false, got {stream!r}")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ValueError("stream_options must be an object")
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool):
        raise ValueError(f"stream_options.include_usage must be true or false, got {usage!r}")
    return stream, usage
