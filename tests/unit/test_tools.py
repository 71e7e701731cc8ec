import asyncio
import json
import random
import re

from rlve.envs import StatefulToolEnv, ToolEnv, tool_schema
from rlve.envs.tools import parse_tool_calls, tagged_bodies
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups

ROWS = [{"question": "What is 6 * 7?", "answer": "42"}]


def multiply(a: int, b: int = 1) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor,
            1 by default.
    """
    return a * b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def play(env, policy, **settings):
    jobs = [GroupJob(env, env.example(0), seed=0)]
    (group,) = asyncio.run(
        play_groups(ScriptedEngine(policy), jobs, 1, EpisodeSettings(**settings))
    )
    return group.trajectories[0]


def test_schema_from_signature_and_docstring():
    assert tool_schema(multiply) == {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiply two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "the first factor."},
                    "b": {"type": "integer", "description": "the second factor, 1 by default."},
                },
                "required": ["a"],
            },
        },
    }


def test_parse_tool_calls_from_tags_and_structured_calls():
    message = {
        "role": "assistant",
        "content": "x " + call("multiply", a=2, b=3) + " " + call("divide", a=1, b=2),
    }
    calls = parse_tool_calls(message)
    assert [(c.name, c.arguments) for c in calls] == [
        ("multiply", {"a": 2, "b": 3}),
        ("divide", {"a": 1, "b": 2}),
    ]
    structured = {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "divide", "arguments": '{"a": 4, "b": 2}'}}
    ]}  # fmt: skip
    assert [(c.name, c.arguments) for c in parse_tool_calls(structured)] == [
        ("divide", {"a": 4, "b": 2})
    ]
    (bad,) = parse_tool_calls({"role": "assistant", "content": "<tool_call>{oops</tool_call>"})
    assert bad.error.startswith("the tool call is not valid JSON")


def test_a_tool_call_nested_past_the_json_parser_s_depth_is_an_error_for_the_model():
    deep = "[" * 100_000
    tagged, in_arguments = parse_tool_calls({"role": "assistant", "content": (
        f"<tool_call>{deep}</tool_call>"
        f'<tool_call>{{"name": "divide", "arguments": "{deep}"}}</tool_call>')})  # fmt: skip
    assert tagged.error == "the tool call nests too deeply"
    assert (in_arguments.name, in_arguments.error) == ("divide", "the arguments nest too deeply")


class CountingText(str):
    """A str that records where each `find` starts scanning."""

    def find(self, sub, start=0, *args):
        self.starts.append(start)
        return super().find(sub, start, *args)


def test_tagged_bodies_match_a_lazy_regex_and_scan_the_text_once():
    pieces = ["<a>", "</a>", "x", "<a><a>", "</a></a>", ""]
    rng = random.Random(0)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(8)))
        assert list(tagged_bodies(text, "<a>", "</a>")) == re.findall(r"<a>(.*?)</a>", text, re.S)
    # 8,000 unclosed tags: two scans (the first tag, its missing close), not one per tag
    text = CountingText("<tool_call>{" * 8000)
    text.starts = []
    assert list(tagged_bodies(text, "<tool_call>", "</tool_call>")) == []
    assert text.starts == [0, len("<tool_call>")]


def test_at_most_eight_tool_calls_are_parsed_per_turn():
    content = "".join(call("multiply", a=i, b=1) for i in range(20))
    calls = parse_tool_calls({"role": "assistant", "content": content})
    assert [c.arguments["a"] for c in calls] == list(range(8))


def test_tool_loop_runs_tools_until_the_model_answers_without_one():
    def policy(messages):
        if messages[-1]["role"] == "tool":
            return f"The answer is {messages[-1]['content']}."
        return call("multiply", a=6, b=7)

    t = play(ToolEnv(ROWS, tools=[multiply, divide]), policy)
    assert [m["role"] for m in t.completion] == ["assistant", "tool", "assistant"]
    assert t.completion[1] == {"role": "tool", "name": "multiply", "content": "42"}
    assert t.completion[2]["content"] == "The answer is 42."
    assert t.stop_reason == "no_tool_call"
    assert t.metrics["tools/calls"] == 1.0 and t.metrics["tools/errors"] == 0.0
    assert t.metrics["tools/seconds"] > 0


def test_tool_errors_go_back_to_the_model_and_the_episode_goes_on():
    replies = iter([call("divide", a=1, b=0), call("nope"), "<tool_call>{bad json</tool_call>",
                    call("multiply", c=1), "done"])  # fmt: skip
    t = play(ToolEnv(ROWS, tools=[multiply, divide]), lambda m: next(replies))
    tool_texts = [m["content"] for m in t.completion if m["role"] == "tool"]
    assert tool_texts[0] == "Error: ZeroDivisionError: division by zero"
    assert tool_texts[1] == "Error: unknown tool 'nope'; the tools are ['divide', 'multiply']"
    assert tool_texts[2].startswith("Error: the tool call is not valid JSON")
    assert tool_texts[3].startswith("Error: TypeError:") and "'c'" in tool_texts[3]
    assert t.stop_reason == "no_tool_call"
    assert t.metrics["tools/calls"] == 4.0 and t.metrics["tools/errors"] == 4.0


def test_tool_loop_is_capped_by_max_turns():
    t = play(ToolEnv(ROWS, tools=[multiply], max_turns=3), lambda m: call("multiply", a=1))
    assert t.stop_reason == "max_turns_reached" and t.num_turns == 3


class Connection:
    def __init__(self):
        self.log = []
        self.closed = False


class DatabaseEnv(StatefulToolEnv):
    opened: list[Connection] = []

    async def create_resource(self, state):
        connection = Connection()
        DatabaseEnv.opened.append(connection)
        return connection

    async def release_resource(self, resource, state):
        resource.closed = True


def remember(text: str, resource) -> str:
    """Store a note.

    Args:
        text: the note.
    """
    resource.log.append(text)
    return f"stored {len(resource.log)}"


def test_stateful_tools_get_the_episode_resource_hidden_from_the_schema():
    env = DatabaseEnv(ROWS, tools=[remember])
    assert list(env.tool_schemas[0]["function"]["parameters"]["properties"]) == ["text"]
    replies = iter([call("remember", text="a"), call("remember", text="b"), "done"])
    DatabaseEnv.opened.clear()
    t = play(env, lambda m: next(replies))
    assert [m["content"] for m in t.completion if m["role"] == "tool"] == ["stored 1", "stored 2"]
    (connection,) = DatabaseEnv.opened
    assert connection.log == ["a", "b"] and connection.closed


def test_resource_is_released_when_the_episode_times_out():
    def slow(seconds: float, resource) -> str:
        """Sleep."""
        import time

        time.sleep(seconds)
        return "late"

    env = DatabaseEnv(ROWS, tools=[slow], tool_timeout_s=5.0)
    DatabaseEnv.opened.clear()
    t = play(env, lambda m: call("slow", seconds=1.0), time_limit_s=0.2)
    assert t.stop_reason == "timeout"
    assert DatabaseEnv.opened[0].closed
