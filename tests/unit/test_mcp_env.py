"""MCPEnv against real MCP servers over stdio (and one over streamable HTTP): the shipped notes
server and a hostile one that crashes, hangs or floods on request."""

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import rlve
from rlve.envs.mcp import MCPEnv, MCPServerConfig
from rlve.envs.mcp.notes_server import seeded_notes
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups

HOSTILE = str(Path(__file__).parents[1] / "fixtures" / "mcp" / "hostile_server.py")
ROWS = [{"question": "Use the tools.", "answer": "", "info": {"notes_seed": 5, "num_notes": 3}}]


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def scripted(*replies):
    """A policy that plays `replies` in order, one per model turn of its episode."""

    def policy(messages):
        turn = sum(m["role"] == "assistant" for m in messages)
        return replies[min(turn, len(replies) - 1)]

    return policy


def play(env, policy, group_size=1, example=0):
    jobs = [GroupJob(env, env.example(example), seed=0)]
    (group,) = asyncio.run(play_groups(ScriptedEngine(policy), jobs, group_size, EpisodeSettings()))
    return group.trajectories


def tool_texts(trajectory):
    return [m["content"] for m in trajectory.completion if m["role"] == "tool"]


def notes_server(lifetime, **overrides):
    return MCPServerConfig(
        name="notes", command="python", lifetime=lifetime,
        args=("-m", "rlve.envs.mcp.notes_server", "--seed", "{notes_seed}",
              "--notes", "{num_notes}"),
        **overrides,
    )  # fmt: skip


def hostile_server(**overrides):
    return MCPServerConfig(name="hostile", command="python", args=(HOSTILE,), **overrides)


def child_processes():
    """MCP server processes still alive (other tests' helper processes are not counted)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            command = " ".join(process.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "notes_server" in command or "hostile_server" in command or "time.sleep(60)" in command:
            found.append(process)
    return found


def test_notes_episode_reads_the_code_and_is_rewarded():
    env = rlve.load_environment("mcp/notes", num_examples=2, seed=0, num_notes=4)
    names = [s["function"]["name"] for s in env.tool_schemas]
    assert names == ["list_notes", "read_note", "write_note", "delete_note"]
    example = env.example(0)
    topic, seed = example.info["topic"], example.info["notes_seed"]
    code = seeded_notes(seed, 4)[topic].split(" is ")[1]
    assert example.answer == code
    (t,) = play(env, scripted(call("read_note", key=topic), f"<answer>{code.upper()}</answer>"))
    assert tool_texts(t) == [f"the {topic} code is {code}"]
    assert t.reward == 1.0 and t.stop_reason == "no_tool_call"
    assert t.metrics["tools/calls"] == 1.0 and t.metrics["tools/errors"] == 0.0
    assert t.metrics["mcp/failed"] == 0.0 and t.metrics["mcp/start_seconds"] > 0


def test_per_rollout_servers_keep_state_within_an_episode_and_not_across_them():
    env = MCPEnv(ROWS, servers=[notes_server("per_rollout")])
    policy = scripted(call("write_note", key="mine", text="hello"), call("list_notes"), "done")
    first, second = play(env, policy, group_size=2)
    for t in (first, second):  # each sees its own note only, never the other episode's
        assert tool_texts(t) == ["saved 'mine'", "\n".join(sorted([*seeded_notes(5, 3), "mine"]))]
    assert child_processes() == []


def test_a_shared_server_keeps_state_across_episodes():
    env = MCPEnv(ROWS, servers=[notes_server("shared")])
    play(env, scripted(call("write_note", key="kept", text="from episode 1"), "done"))
    (t,) = play(env, scripted(call("read_note", key="kept"), "done"))
    assert tool_texts(t) == ["from episode 1"]
    env.close()
    assert child_processes() == []


def test_bad_calls_get_tool_errors_and_the_episode_goes_on():
    env = MCPEnv(ROWS, servers=[hostile_server()], max_argument_chars=100, max_result_chars=100)
    policy = scripted(call("nope"), "<tool_call>{bad json</tool_call>", call("echo", text=7),
                      call("echo", text="y" * 200), call("big", n=10_000), call("echo", text="ok"),
                      "done")  # fmt: skip
    (t,) = play(env, policy)
    texts = tool_texts(t)
    assert texts[0] == "Error: unknown tool 'nope'; the tools are ['big', 'crash', 'echo', 'hang']"
    assert texts[1].startswith("Error: the tool call is not valid JSON")
    assert texts[2].startswith("Error: Error executing tool echo: 1 validation error")
    assert texts[3] == "Error: the arguments are longer than 100 characters"
    assert texts[4] == "x" * 100 + "\n[... 9900 more characters cut]"
    assert texts[5] == "ok"
    assert t.stop_reason == "no_tool_call"
    assert t.metrics["tools/calls"] == 6.0 and t.metrics["tools/errors"] == 4.0
    env.close()


def test_a_server_that_dies_ends_its_episode_not_the_batch():
    env = MCPEnv(ROWS, servers=[hostile_server(lifetime="per_rollout")])

    def policy(messages):  # episode seeds differ: one rollout of the group crashes its server
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn == 0:
            return call("echo", text="first")
        return "done"

    crash = scripted(call("crash"), "never played")
    (crashed,) = play(env, crash)
    assert crashed.stop_reason == "mcp_server_failed"
    assert crashed.metrics["mcp/failed"] == 1.0
    assert crashed.fault.kind == "env_error"  # counted under faults/env_error
    assert crashed.fault.message.startswith("MCP server 'hostile' failed during crash")
    assert tool_texts(crashed)[0].startswith("Error: MCP server 'hostile' failed during crash")
    healthy = play(env, policy, group_size=3)
    assert [t.stop_reason for t in healthy] == ["no_tool_call"] * 3
    assert [t.fault for t in healthy] == [None] * 3
    assert child_processes() == []


def test_a_server_that_hangs_is_cut_off_by_the_call_time_limit():
    env = MCPEnv(ROWS, servers=[hostile_server(lifetime="per_rollout", call_timeout_s=1.0)])
    (t,) = play(env, scripted(call("hang"), "never played"))
    assert t.stop_reason == "mcp_server_failed"
    assert tool_texts(t) == ["Error: MCP server 'hostile' did not answer hang within 1.0 s"]
    assert child_processes() == []


def test_servers_that_cannot_start_fail_clearly():
    never_answers = MCPServerConfig(name="mute", command="python",
                                    args=("-c", "import time; time.sleep(60)"),
                                    start_timeout_s=1.0)  # fmt: skip
    with pytest.raises(ValueError, match="MCP server 'mute' did not start within 1.0 s"):
        MCPEnv(ROWS, servers=[never_answers])
    missing = MCPServerConfig(name="missing", command="/nonexistent/mcp-server")
    with pytest.raises(ValueError, match="MCP server 'missing' failed to start"):
        MCPEnv(ROWS, servers=[missing])
    assert child_processes() == []


def test_a_per_rollout_server_that_fails_at_episode_start_fails_that_episode():
    env = MCPEnv(ROWS, servers=[notes_server("per_rollout")])
    bad_row = {"question": "q", "answer": "", "info": {"notes_seed": 1, "num_notes": 99}}
    env.dataset = env.dataset.add_item({**env.dataset[0], "info": bad_row["info"],
                                        "example_id": 1})  # fmt: skip
    env._examples = None
    (t,) = play(env, scripted("never played"), example=1)
    assert t.stop_reason == "mcp_server_failed" and t.num_turns == 0
    assert t.metrics["mcp/failed"] == 1.0


def test_config_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServerConfig(name="x")
    with pytest.raises(ValueError, match="lifetime must be 'shared' or 'per_rollout', got 'often'"):
        MCPServerConfig(name="x", url="http://h/mcp", lifetime="often")
    with pytest.raises(ValueError, match="call_timeout_s must be > 0, got 0"):
        MCPServerConfig(name="x", url="http://h/mcp", call_timeout_s=0)
    with pytest.raises(ValueError, match="placeholder 'missing' is not in the example's info"):
        MCPServerConfig(name="x", command="python", args=("{missing}",)).target({"a": 1})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_server_gives_each_rollout_a_fresh_session():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "rlve.envs.mcp.notes_server", "--notes", "2",
                               "--transport", "streamable-http", "--port", str(port)])  # fmt: skip
    try:
        config = MCPServerConfig(name="notes", url=f"http://127.0.0.1:{port}/mcp",
                                 lifetime="per_rollout", start_timeout_s=5.0)  # fmt: skip
        for _ in range(60):  # wait for the server to listen
            try:
                env = MCPEnv(ROWS, servers=[config])
                break
            except ValueError:
                time.sleep(0.5)
        (t,) = play(env, scripted(call("list_notes"), "done"))
        assert tool_texts(t) == ["\n".join(sorted(seeded_notes(0, 2)))]
    finally:
        server.terminate()
        server.wait(10)
