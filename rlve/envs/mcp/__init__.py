"""MCP environments: the tools of Model Context Protocol servers as the model's tools.

`MCPEnv` (env.py) talks to servers through `MCPConnection` (connection.py); `mcp/notes`
(notes.py) is an example environment over the shipped notes server (notes_server.py).
"""

from rlve.envs.mcp.connection import MCPConnection, MCPServerConfig, MCPServerFailure
from rlve.envs.mcp.env import MCPEnv

__all__ = ["MCPConnection", "MCPEnv", "MCPServerConfig", "MCPServerFailure"]
