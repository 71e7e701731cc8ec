"""`mcp/notes`: find a code in a notes store that only an MCP server can read.

Each episode's store holds `num_notes` notes generated from the example's seed (by the shipped
server, `rlve.envs.mcp.notes_server`, started over stdio). The question names a topic; the model
lists the notes or reads the right one, then answers `<answer>color number</answer>`. Reward:
1 for the exact code (the format is a metric only: tool-call turns have no answer).
"""

from __future__ import annotations

import json
import random
import re

from rlve.envs.base import require_int
from rlve.envs.mcp.connection import MCPServerConfig
from rlve.envs.mcp.env import MCPEnv
from rlve.envs.mcp.notes_server import TOPICS, seeded_notes
from rlve.envs.parsers import XMLParser
from rlve.envs.rubric import Rubric
from rlve.types import Message

SYSTEM_PROMPT = """You can read a store of notes only through the tools below. Call tools as \
many times as you need. When you know the answer, reply without a tool call and put the answer \
inside <answer>...</answer>."""


def question_rows(num_examples: int, seed: int, num_notes: int, shared: bool) -> list[dict]:
    """Questions about seeded stores: one store per example, or one for all when `shared`."""
    rows = []
    for i in range(num_examples):
        notes_seed = seed if shared else seed * 1_000_003 + i
        notes = seeded_notes(notes_seed, num_notes)
        topic = random.Random(f"{seed}-{i}").choice(sorted(notes))
        code = notes[topic].removeprefix(f"the {topic} code is ")
        rows.append({
            "question": f"What is the {topic} code in the notes? Answer with the code, for "
                        "example <answer>red 17</answer>.",
            "answer": code,
            "info": {"notes_seed": notes_seed, "num_notes": num_notes, "topic": topic},
        })  # fmt: skip
    return rows


def load_environment(
    num_examples: int = 200,
    seed: int = 0,
    num_notes: int = 6,
    lifetime: str = "per_rollout",
    max_turns: int = 4,
    max_tokens: int = 128,
    start_timeout_s: float = 30.0,
    call_timeout_s: float = 10.0,
) -> MCPEnv:
    """Look a code up in a notes store served over MCP (stdio).

    Args:
        num_examples: questions (at least 1).
        seed: seed of the questions and of the stores' contents.
        num_notes: notes in each store (1-16).
        lifetime: 'per_rollout' (a fresh server per episode, its own store) or 'shared' (one
            server and one store for all episodes).
        max_turns: most model turns, tool calls and the answer together (at least 1).
        max_tokens: default most tokens per model turn.
        start_timeout_s: longest wait for a server to start.
        call_timeout_s: longest wait for one tool call.
    """
    require_int("num_examples", num_examples, 1)
    require_int("max_turns", max_turns, 1)
    require_int("max_tokens", max_tokens, 1)
    if not isinstance(num_notes, int) or not 1 <= num_notes <= len(TOPICS):
        raise ValueError(f"num_notes must be an integer in 1..{len(TOPICS)}, got {num_notes!r}")
    server = MCPServerConfig(
        name="notes",
        command="python",
        args=(
            "-m",
            "rlve.envs.mcp.notes_server",
            "--seed",
            "{notes_seed}",
            "--notes",
            "{num_notes}",
        ),  # fmt: skip
        lifetime=lifetime,  # type: ignore[arg-type]  (checked by MCPServerConfig)
        start_timeout_s=start_timeout_s,
        call_timeout_s=call_timeout_s,
    )
    parser = XMLParser(["answer"])
    rubric = Rubric(parser=parser)
    rubric.add(exact_code, 1.0).add(parser.format_reward_func(), 0.0)
    return MCPEnv(
        question_rows(num_examples, seed, num_notes, shared=lifetime == "shared"),
        servers=[server],
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        name="mcp/notes",
        sampling={"max_tokens": max_tokens},
    )


def exact_code(completion: list[Message], answer: str, parser: XMLParser) -> float:
    """1.0 when the last answer is the code (case and spacing aside), else 0.0."""
    given = parser.parse_answer(completion)
    return float(given is not None and " ".join(given.lower().split()) == answer)


def reference_policy(messages: list[Message]) -> str:
    """A scripted solver (a baseline and a teacher): read the note the question names, then
    answer with its code."""
    last = messages[-1]
    if last["role"] != "tool":
        topic = re.search(r"What is the (\w+) code", str(last["content"]))
        key = topic.group(1) if topic else ""
        call = {"name": "read_note", "arguments": {"key": key}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return f"<answer>{str(last['content']).split(' code is ')[-1]}</answer>"
