"""MCPEnv: the tools of one or more Model Context Protocol servers become the model's tools.

Tool schemas come from the servers (`tools/list`); the model calls them with `<tool_call>` tags
(or structured calls), and each result, or the server's tool error, goes back as a `tool`
message. A turn without a tool call ends the episode, as in `ToolEnv`.

Lifetimes (`MCPServerConfig.lifetime`): a shared server is connected once, when the environment
is built, and serves every rollout; a per-rollout server is started (stdio) or given a fresh
session (HTTP) when an episode starts and closed when it ends, so its tools may keep state. A
server that fails to start, dies or does not answer in time ends that episode with stop reason
`mcp_server_failed` and the reason in `state["mcp_failure"]` and `state["env_error"]` (so it is
counted as an `env_error` fault); the other episodes go on. A shared server that died stays dead
for the rest of the run (every later episode fails, and says so).
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Sequence
from typing import Any

from rlve.envs.base import MultiTurnEnv, State
from rlve.envs.mcp.connection import MCPConnection, MCPServerConfig, MCPServerFailure
from rlve.envs.tools import ToolCall, parse_tool_calls
from rlve.types import Message

log = logging.getLogger(__name__)


def mcp_tool_schema(tool: Any) -> dict[str, Any]:
    """An MCP tool (`mcp.types.Tool`) as the OpenAI-style schema chat templates render."""
    parameters = {k: v for k, v in (tool.input_schema or {}).items() if k != "title"}
    parameters.setdefault("type", "object")
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "",
                     "parameters": parameters},
    }  # fmt: skip


class MCPEnv(MultiTurnEnv):
    """A tool environment whose tools are served by MCP servers.

    Args (besides MultiTurnEnv's):
        servers: the servers; their tool names must not clash.
        max_argument_chars: a call whose JSON arguments are longer is refused with a tool error
            (it never reaches the server).
        max_result_chars: a longer tool result is cut to this many characters (and says so).
    """

    def __init__(self, dataset, *, servers: Sequence[MCPServerConfig], max_turns: int = 10,
                 max_argument_chars: int = 20_000, max_result_chars: int = 8_000,
                 **kwargs):  # fmt: skip
        if not servers:
            raise ValueError("MCPEnv needs at least one server")
        names = [s.name for s in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"MCP server names must differ, got {names}")
        super().__init__(dataset, max_turns=max_turns, **kwargs)
        self.servers = {s.name: s for s in servers}
        self.max_argument_chars = max_argument_chars
        self.max_result_chars = max_result_chars
        self.shared: dict[str, MCPConnection] = {}
        self._finalizer = weakref.finalize(self, _close_all, self.shared)
        self.tool_server: dict[str, str] = {}
        """which server serves each tool"""
        schemas = []
        for server in servers:
            for tool in self._list_tools(server):
                if tool.name in self.tool_server:
                    other = self.tool_server[tool.name]
                    raise ValueError(
                        f"tool {tool.name!r} is served by both {other!r} and {server.name!r}"
                    )
                self.tool_server[tool.name] = server.name
                schemas.append(mcp_tool_schema(tool))
        self.tool_schemas = schemas

    def _list_tools(self, server: MCPServerConfig) -> list[Any]:
        """The server's tools. A shared server stays connected; a per-rollout one is started
        once with the first example's info to read its tool list, then closed."""
        connection = MCPConnection(server, self.example(0).info)
        try:
            connection.open_sync()
        except MCPServerFailure as failure:
            raise ValueError(f"{failure} (while listing its tools)") from None
        if server.lifetime == "shared":
            self.shared[server.name] = connection
        else:
            connection.close_sync()
        return connection.tools

    def close(self) -> None:
        """Close the shared connections (also done when the environment is garbage collected
        or the process exits)."""
        self._finalizer()

    # ---- the episode ----------------------------------------------------------------------

    async def setup_state(self, state: State) -> None:
        state["mcp_connections"] = {}
        state["tool_calls"] = state["tool_errors"] = 0
        state["tool_seconds"] = 0.0
        start = time.perf_counter()
        for server in self.servers.values():
            if server.lifetime != "per_rollout":
                continue
            try:
                connection = MCPConnection(server, state["info"])
                state["mcp_connections"][server.name] = await connection.open()
            except (MCPServerFailure, ValueError) as failure:
                self._fail(state, failure)
                break
        state["mcp_start_seconds"] = time.perf_counter() - start

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        calls = parse_tool_calls(messages[-1])
        if not calls:
            self.end_episode(state, "no_tool_call")
            return []
        replies: list[Message] = []
        for call in calls:
            state["tool_calls"] += 1
            start = time.perf_counter()
            try:
                text = await self._run_tool(call, state)
            except MCPServerFailure as failure:
                self._fail(state, failure)
                return [
                    *replies,
                    {"role": "tool", "name": call.name, "content": f"Error: {failure}"},
                ]
            finally:
                state["tool_seconds"] += time.perf_counter() - start
            replies.append({"role": "tool", "name": call.name, "content": text})
        return replies

    async def _run_tool(self, call: ToolCall, state: State) -> str:
        error = call.error
        if error is None and call.name not in self.tool_server:
            error = f"unknown tool {call.name!r}; the tools are {sorted(self.tool_server)}"
        if error is None and len(json.dumps(call.arguments)) > self.max_argument_chars:
            error = f"the arguments are longer than {self.max_argument_chars} characters"
        if error is None:
            server = self.tool_server[call.name]
            connection = self.shared.get(server) or state["mcp_connections"][server]
            text, is_error = await connection.call(call.name, call.arguments)
            if not is_error:
                return self._cut(text)
            error = text
        state["tool_errors"] += 1
        return self._cut(f"Error: {error}")

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_result_chars:
            return text
        cut = len(text) - self.max_result_chars
        return text[: self.max_result_chars] + f"\n[... {cut} more characters cut]"

    def _fail(self, state: State, failure: Exception) -> None:
        log.warning("episode of %s ended: %s", self.name, failure)
        state["mcp_failure"] = state["env_error"] = str(failure)
        self.end_episode(state, "mcp_server_failed")

    async def cleanup_state(self, state: State) -> None:
        connections = state.pop("mcp_connections", {})
        for connection in connections.values():
            await connection.close()

    def episode_metrics(self, state: State) -> dict[str, float]:
        return {
            "tools/calls": float(state.get("tool_calls", 0)),
            "tools/errors": float(state.get("tool_errors", 0)),
            "tools/seconds": float(state.get("tool_seconds", 0.0)),
            "mcp/start_seconds": float(state.get("mcp_start_seconds", 0.0)),
            "mcp/failed": float("mcp_failure" in state),
        }


def _close_all(connections: dict[str, MCPConnection]) -> None:
    for connection in connections.values():
        connection.close_sync()
    connections.clear()
