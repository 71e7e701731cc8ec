"""A small real MCP server shipped with rlve: a key-value notes store, kept in memory.

    python -m rlve.envs.mcp.notes_server [--seed N] [--notes K] [--transport stdio|streamable-http]

`--seed N --notes K` starts the store with K notes generated from seed N (`seeded_notes`), so an
environment and its verifier agree on the contents without talking to the server. The store lives
as long as the process: a server started per rollout gives every episode its own notes.
"""

from __future__ import annotations

import argparse
import random
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

MAX_NOTE_CHARS = 2000
"""longest note text the store accepts"""
MAX_KEY_CHARS = 40
"""longest key the store accepts"""

Key = Annotated[str, Field(description="the note's key, as list_notes gives it")]

TOPICS = ("garden", "harbor", "library", "orchard", "tower", "market", "bridge", "meadow", "valley",
          "canyon", "island", "forest", "castle", "village", "lantern", "compass")  # fmt: skip
COLORS = ("red", "blue", "green", "amber", "violet", "silver", "golden", "gray")


def seeded_notes(seed: int, count: int) -> dict[str, str]:
    """`count` notes `{key: text}` generated from `seed`: the same arguments, the same notes."""
    if not 0 <= count <= len(TOPICS):
        raise ValueError(f"count must be in 0..{len(TOPICS)}, got {count}")
    rng = random.Random(seed)
    keys = rng.sample(TOPICS, count)
    return {key: f"the {key} code is {rng.choice(COLORS)} {rng.randint(10, 99)}" for key in keys}


def build_server(notes: dict[str, str] | None = None) -> MCPServer:
    """An MCP server whose tools read and write one in-memory store."""
    store = dict(notes or {})
    server = MCPServer(
        "rlve-notes", instructions="A key-value store of short text notes.", log_level="WARNING"
    )

    @server.tool(description="The keys of all notes, sorted.")
    def list_notes() -> list[str]:
        return sorted(store)

    @server.tool(description="The text of one note.")
    def read_note(key: Key) -> str:
        if key not in store:
            raise ToolError(f"no note with key {key!r}; the keys are {sorted(store)}")
        return store[key]

    @server.tool(description="Create a note or replace its text.")
    def write_note(key: Key, text: Annotated[str, Field(description="the note's text")]) -> str:
        if not 1 <= len(key) <= MAX_KEY_CHARS:
            raise ToolError(f"a key must have 1-{MAX_KEY_CHARS} characters, got {len(key)}")
        if len(text) > MAX_NOTE_CHARS:
            raise ToolError(f"a note holds at most {MAX_NOTE_CHARS} characters, got {len(text)}")
        store[key] = text
        return f"saved {key!r}"

    @server.tool(description="Delete one note.")
    def delete_note(key: Key) -> str:
        if store.pop(key, None) is None:
            raise ToolError(f"no note with key {key!r}")
        return f"deleted {key!r}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--notes", type=int, default=0, help="seeded notes to start with")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http only")
    args = parser.parse_args()
    server = build_server(seeded_notes(args.seed, args.notes))
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
