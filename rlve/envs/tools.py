"""Tool environments: plain Python functions become tools the model can call.

A tool's JSON schema comes from its signature and docstring. The model calls tools by writing
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (the Hermes/Qwen convention; structured
`tool_calls` from OpenAI-style engines work too). Each result, or the error, goes back as a `tool`
message; the episode ends when the model answers without calling a tool.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlve.envs.base import MultiTurnEnv, State
from rlve.envs.parsers import tagged_bodies
from rlve.types import Message

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
               dict: "object"}  # fmt: skip


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(options[0]) if len(options) == 1 else {}
    if origin is not None:
        annotation = origin
    name = _JSON_TYPES.get(annotation)
    return {"type": name} if name else {}


def _docstring_parts(func: Callable) -> tuple[str, dict[str, str]]:
    """The summary of a Google-style docstring and the description of each argument."""
    doc = inspect.getdoc(func) or ""
    summary = doc.partition("\n\n")[0]
    arg_docs: dict[str, str] = {}
    in_args, current = False, None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args, current = True, None
        elif in_args and (match := re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)):
            current = match.group(1)
            arg_docs[current] = match.group(2)
        elif in_args and stripped and current:
            arg_docs[current] += " " + stripped
        elif not stripped:
            in_args = False
    if summary.strip() in ("Args:", "Arguments:", "Parameters:"):
        summary = ""
    return " ".join(summary.split()), arg_docs


def tool_schema(func: Callable, hidden: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAI-style JSON schema of a tool, from its signature and docstring."""
    summary, arg_docs = _docstring_parts(func)
    hints = typing.get_type_hints(func)
    properties, required = {}, []
    for name, param in inspect.signature(func).parameters.items():
        if name in hidden or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        prop = _json_type(hints.get(name, Any))
        if name in arg_docs:
            prop["description"] = arg_docs[name]
        properties[name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "type": "function",
        "function": {
            "name": func.__name__,
            "description": summary,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


@dataclass
class ToolCall:
    """One parsed tool call; `error` says why it could not be parsed."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_TOOL_CALLS_PER_TURN = 8


def parse_tool_calls(message: Message) -> list[ToolCall]:
    """The tool calls in an assistant message: structured `tool_calls` or `<tool_call>` tags (at
    most MAX_TOOL_CALLS_PER_TURN; the rest are not parsed)."""
    calls = []
    for raw in (message.get("tool_calls") or [])[:MAX_TOOL_CALLS_PER_TURN]:
        function = raw.get("function", raw)
        arguments = function.get("arguments", {})
        calls.append(_decode_call(function.get("name", ""), arguments))
    content = str(message.get("content") or "")
    for body in tagged_bodies(content, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        if len(calls) == MAX_TOOL_CALLS_PER_TURN:
            break
        try:
            payload = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(ToolCall("", {}, f"the tool call is not valid JSON ({exc.msg})"))
            continue
        except RecursionError:
            calls.append(ToolCall("", {}, "the tool call nests too deeply"))
            continue
        if not isinstance(payload, dict):
            calls.append(ToolCall("", {}, "a tool call must be a JSON object"))
            continue
        calls.append(_decode_call(payload.get("name", ""), payload.get("arguments", {})))
    return calls


def _decode_call(name: Any, arguments: Any) -> ToolCall:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCall(str(name), {}, f"the arguments are not valid JSON ({exc.msg})")
        except RecursionError:
            return ToolCall(str(name), {}, "the arguments nest too deeply")
    if not isinstance(arguments, dict):
        return ToolCall(str(name), {}, "the arguments must be a JSON object")
    return ToolCall(str(name), arguments)


class ToolEnv(MultiTurnEnv):
    """The model may call `tools` between its answers; a turn without a tool call ends it.

    `tool_timeout_s` bounds each call; a tool that raises or times out answers with an error
    message the model can read, and the episode goes on.
    """

    injected_args: tuple[str, ...] = ()

    def __init__(self, dataset, *, tools: Sequence[Callable], tool_timeout_s: float = 10.0,
                 max_turns: int = 10, **kwargs):  # fmt: skip
        if not tools:
            raise ValueError("ToolEnv needs at least one tool")
        self.tools = {t.__name__: t for t in tools}
        self.tool_timeout_s = tool_timeout_s
        schemas = [tool_schema(t, hidden=self.injected_args) for t in tools]
        super().__init__(dataset, max_turns=max_turns, tools=schemas, **kwargs)

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        calls = parse_tool_calls(messages[-1])
        if not calls:
            self.end_episode(state, "no_tool_call")
            return []
        replies = []
        for call in calls:
            state["tool_calls"] = state.get("tool_calls", 0) + 1
            start = time.perf_counter()
            result = await self._run_tool(call, state)
            state["tool_seconds"] = state.get("tool_seconds", 0.0) + time.perf_counter() - start
            replies.append({"role": "tool", "name": call.name, "content": result})
        return replies

    async def _run_tool(self, call: ToolCall, state: State) -> str:
        error = call.error
        if error is None and call.name not in self.tools:
            error = f"unknown tool {call.name!r}; the tools are {sorted(self.tools)}"
        if error is None:
            try:
                return str(await self._invoke(self.tools[call.name], call.arguments, state))
            except TimeoutError:
                error = f"{call.name} took longer than {self.tool_timeout_s} s"
            except Exception as exc:  # the model sees the error and may try again
                error = f"{type(exc).__name__}: {exc}"
        state["tool_errors"] = state.get("tool_errors", 0) + 1
        return f"Error: {error}"

    async def _invoke(self, tool: Callable, arguments: dict[str, Any], state: State) -> Any:
        arguments = self.inject_args(tool, dict(arguments), state)
        if inspect.iscoroutinefunction(tool):
            return await asyncio.wait_for(tool(**arguments), self.tool_timeout_s)
        return await asyncio.wait_for(asyncio.to_thread(tool, **arguments), self.tool_timeout_s)

    def inject_args(self, tool: Callable, arguments: dict[str, Any], state: State) -> dict:
        """Add the arguments the model does not give (StatefulToolEnv: the resource)."""
        return arguments

    def episode_metrics(self, state: State) -> dict[str, float]:
        return {
            "tools/calls": float(state.get("tool_calls", 0)),
            "tools/errors": float(state.get("tool_errors", 0)),
            "tools/seconds": float(state.get("tool_seconds", 0.0)),
        }


class StatefulToolEnv(ToolEnv):
    """Tools that share a per-episode resource (a database connection, a sandbox, a session).

    `create_resource(state)` makes it when the episode starts; tools receive it through their
    `resource` parameter (hidden from the model's schema); `release_resource` always runs, also
    when the episode fails or times out.
    """

    injected_args = ("resource",)

    async def create_resource(self, state: State) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement create_resource")

    async def release_resource(self, resource: Any, state: State) -> None:
        """Free the resource. Default: nothing."""

    async def setup_state(self, state: State) -> None:
        state["resource"] = await self.create_resource(state)

    async def cleanup_state(self, state: State) -> None:
        if state.get("resource") is not None:
            resource, state["resource"] = state["resource"], None
            await self.release_resource(resource, state)

    def inject_args(self, tool: Callable, arguments: dict[str, Any], state: State) -> dict:
        if "resource" in inspect.signature(tool).parameters:
            arguments["resource"] = state["resource"]
        return arguments
