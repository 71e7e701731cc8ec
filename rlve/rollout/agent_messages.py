"""OpenAI chat messages in and out of a chat template, for agents (rlve.rollout.agent_server).

In: an agent's `messages` (as the openai SDK and agent frameworks send them) become messages a
Hugging Face chat template renders: text parts joined, `developer` read as `system`, a tool call's
JSON-string arguments read as an object, and, for templates that render no tools (SmolLM2's),
each tool call written into the assistant's text as the `<tool_call>` tag the model writes.
Out: a sampled text becomes an assistant message whose `<tool_call>` tags (when the request
offered tools) are OpenAI `tool_calls`. Malformed input raises `BadMessages` with the one line the
agent is told (HTTP 400).
"""

from __future__ import annotations

import json
from typing import Any

from rlve.envs.parsers import tagged_bodies, tagged_spans
from rlve.envs.tools import MAX_TOOL_CALLS_PER_TURN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from rlve.types import Message

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
         "tool": "tool"}  # fmt: skip
"""the roles an agent may send, and what the template reads each as"""


class BadMessages(ValueError):
    """The request's messages or tools cannot be rendered; the message says which and why."""


def template_messages(messages: Any, renders_tools: bool) -> list[Message]:
    """The agent's `messages` as a chat template reads them (see the module's docstring)."""
    if not isinstance(messages, list) or not messages:
        raise BadMessages("messages must be a non-empty list")
    return [_template_message(m, i, renders_tools) for i, m in enumerate(messages)]


def _template_message(message: Any, index: int, renders_tools: bool) -> Message:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise BadMessages(f"messages[{index}] needs a role among {sorted(ROLES)}")
    out: Message = {"role": ROLES[message["role"]], "content": _text(message.get("content"), index)}
    calls = message.get("tool_calls") or []
    if calls and out["role"] == "assistant":
        parsed = [_template_call(call, index) for call in _listed(calls, index, "tool_calls")]
        if renders_tools:
            out["tool_calls"] = [{"type": "function", "function": call} for call in parsed]
        else:
            tags = "".join(f"{TOOL_CALL_OPEN}{json.dumps(c)}{TOOL_CALL_CLOSE}" for c in parsed)
            out["content"] = out["content"] + tags
    for key in ("name", "tool_call_id"):
        if isinstance(message.get(key), str):
            out[key] = message[key]
    return out


def _text(content: Any, index: int) -> str:
    """A message's content as one string: a string, None (""), or a list of text parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        if len(texts) == len(content) and all(isinstance(t, str) for t in texts):
            return "".join(texts)
    raise BadMessages(f"messages[{index}].content must be a string or a list of text parts")


def _listed(value: Any, index: int, what: str) -> list:
    if not isinstance(value, list):
        raise BadMessages(f"messages[{index}].{what} must be a list")
    return value


def _template_call(call: Any, index: int) -> dict[str, Any]:
    """{"name": ..., "arguments": {...}} from an OpenAI tool call."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadMessages(f"messages[{index}].tool_calls needs {{'function': {{'name': ...}}}}")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            pass  # kept as the string the model wrote
    return {"name": function["name"], "arguments": arguments}


def assistant_message(text: str, tools_offered: bool, call_id: str) -> Message:
    """The OpenAI assistant message for a sampled `text`. With tools offered, its `<tool_call>`
    tags become `tool_calls` (ids `<call_id>_<k>`) and leave the content, when every tag holds a
    JSON object with a string `name` (and object `arguments`); otherwise the text is the
    content, as written (the agent reads a reply that called no tool)."""
    calls = _tool_calls(text, call_id) if tools_offered and TOOL_CALL_OPEN in text else None
    if not calls:
        return {"role": "assistant", "content": text}
    content = _without_tags(text).strip()
    return {"role": "assistant", "content": content or None, "tool_calls": calls}


def _tool_calls(text: str, call_id: str) -> list[dict[str, Any]] | None:
    calls = []
    for k, body in enumerate(tagged_bodies(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)):
        if k == MAX_TOOL_CALLS_PER_TURN:
            return None
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, RecursionError):
            return None
        if not (isinstance(payload, dict) and isinstance(payload.get("name"), str)
                and isinstance(payload.get("arguments", {}), dict)):  # fmt: skip
            return None
        arguments = json.dumps(payload.get("arguments", {}))
        calls.append({"id": f"{call_id}_{k}", "type": "function",
                      "function": {"name": payload["name"], "arguments": arguments}})  # fmt: skip
    return calls


def _without_tags(text: str) -> str:
    """`text` without its closed `<tool_call>...</tool_call>` blocks (one pass)."""
    kept, position = [], 0
    for start, end in tagged_spans(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return "".join(kept)
