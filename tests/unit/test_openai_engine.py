"""OpenAIEngine against a real chat-completions server on 127.0.0.1, answered by a Python policy."""

from __future__ import annotations

import socket

import pytest
from chat_server import ChatServer, completion

import rlve
from rlve.envs.tictactoe import minimax_policy
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.openai_engine import EndpointError, OpenAIEngine, wire_messages


@pytest.fixture
def server():
    s = ChatServer()
    yield s
    s.close()


def engine_for(server: ChatServer, **kwargs) -> OpenAIEngine:
    kwargs.setdefault("api_key", "sk-test")
    return OpenAIEngine(server.base_url, "test-model", backoff_s=0.001, **kwargs)


CALCULATOR_TOOL = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {}}},
}


async def test_request_body_carries_the_conversation_and_the_sampling_settings(server):
    server.answer = lambda body: completion("<think>centre</think><move>4</move>")
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "move?"}]
    sampling = SamplingConfig(temperature=0.5, top_p=0.9, max_tokens=64, stop=("</move>",), seed=7)
    async with engine_for(server) as engine:
        generation = await engine.generate(
            GenerationRequest(messages, sampling, tools=[CALCULATOR_TOOL])
        )
    headers, body = server.requests[0]
    assert body == {
        "model": "test-model",
        "messages": messages,
        "temperature": 0.5,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["</move>"],
        "seed": 7,
        "tools": [CALCULATOR_TOOL],
    }
    assert headers["Authorization"] == "Bearer sk-test"
    assert generation.text == "<think>centre</think><move>4</move>"
    assert generation.finish_reason == "stop"
    assert generation.token_ids == [] and generation.tool_calls is None


async def test_without_tools_stop_or_seed_those_fields_are_left_out(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    engine = OpenAIEngine(server.base_url, "m")
    await engine.generate(GenerationRequest([{"role": "user", "content": "hi"}], SamplingConfig()))
    await engine.aclose()
    headers, body = server.requests[0]
    assert sorted(body) == ["max_tokens", "messages", "model", "temperature", "top_p"]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, 1.0, 128)
    assert headers["Authorization"] == "Bearer sk-from-env"


async def test_finish_reasons_map_to_length_or_stop_and_tool_calls_pass_through(server):
    calls = [{"id": "call_1", "type": "function",
              "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]  # fmt: skip
    replies = iter([
        completion("cut", "length"),
        completion(None, "tool_calls", tool_calls=calls),
        completion("filtered", "content_filter"),
    ])  # fmt: skip
    server.answer = lambda body: next(replies)
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    async with engine_for(server) as engine:
        results = [await engine.generate(request) for _ in range(3)]
    assert [g.finish_reason for g in results] == ["length", "stop", "stop"]
    assert results[1].text == "" and results[1].tool_calls == calls


async def test_a_500_is_retried_once_then_the_answer_comes_through(server):
    server.failures = [500]
    server.answer = lambda body: completion("second time lucky")
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    async with engine_for(server) as engine:
        generation = await engine.generate(request)
    assert generation.text == "second time lucky"
    assert engine.retries == 1
    assert len(server.requests) == 2
    assert server.requests[0][1] == server.requests[1][1]  # the same body sent again


async def test_a_429_that_never_clears_gives_up_after_max_retries_plus_one_attempts(server):
    server.failures = [429] * 10
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    async with engine_for(server, max_retries=2) as engine:
        with pytest.raises(EndpointError) as error:
            await engine.generate(request)
    assert len(server.requests) == 3
    assert engine.retries == 2
    assert f"POST {server.base_url}/chat/completions failed after 3 attempts" in str(error.value)
    assert "HTTP 429" in str(error.value)


async def test_a_400_is_not_retried_and_the_error_names_url_and_status(server):
    server.failures = [400]
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    async with engine_for(server) as engine:
        with pytest.raises(EndpointError) as error:
            await engine.generate(request)
    assert len(server.requests) == 1
    assert str(error.value).startswith(
        f"POST {server.base_url}/chat/completions failed with HTTP 400"
    )


async def test_a_wrong_base_url_gives_a_404_with_a_hint(server):
    engine = OpenAIEngine(server.base_url.removesuffix("/v1"), "m", api_key="k")
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    with pytest.raises(EndpointError, match=r"HTTP 404.*base_url should end at the API root"):
        await engine.generate(request)
    await engine.aclose()


async def test_an_unreachable_server_is_retried_then_reported():
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    engine = OpenAIEngine(url, "m", api_key="k", max_retries=1, backoff_s=0)
    request = GenerationRequest([{"role": "user", "content": "x"}], SamplingConfig())
    with pytest.raises(EndpointError, match=rf"{url}/chat/completions failed after 2 attempts"):
        await engine.generate(request)
    assert engine.retries == 1
    await engine.aclose()


def test_wire_messages_ties_each_tool_reply_to_its_call_and_serialises_arguments():
    messages = [
        {"role": "user", "content": "add 1 and 2, then 3 and 4"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}},
            {"id": "given", "type": "function", "function": {"name": "add", "arguments": "{}"}},
        ]},
        {"role": "tool", "name": "add", "content": "3"},
        {"role": "tool", "name": "add", "content": "7"},
    ]  # fmt: skip
    wired = wire_messages(messages)
    assert wired[1]["tool_calls"] == [
        {"id": "call_1_0", "type": "function",
         "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "given", "type": "function", "function": {"name": "add", "arguments": "{}"}},
    ]  # fmt: skip
    assert [m.get("tool_call_id") for m in wired[2:]] == ["call_1_0", "given"]
    assert "tool_call_id" not in messages[2]  # the caller's messages are left as they were


def test_evaluate_tictactoe_through_a_minimax_server_draws_every_game(server):
    server.failures = [500]  # the very first request fails once
    server.answer = lambda body: completion(minimax_policy(body["messages"]))
    env = rlve.load_environment(
        "tictactoe", num_examples=6, min_random_move_prob=0.0, max_random_move_prob=0.0
    )
    engine = engine_for(server)
    result = rlve.evaluate(env, engine, num_examples=6, rollouts_per_example=1, seed=0)
    # A perfect player against a perfect opponent: 6 draws, reward 0.5 + 0.2 format each.
    assert result.summary["game/draw"] == 1.0
    assert result.summary["game/format"] == 1.0
    assert result.summary["reward/mean"] == pytest.approx(0.7)
    assert engine.retries == 1
    model_turns = sum(t.num_turns for g in result.groups for t in g.trajectories)
    assert len(server.requests) == model_turns + 1  # every turn once, the failed one twice
    first_body = server.requests[0][1]
    assert first_body["messages"][0]["role"] == "system"
    assert first_body["max_tokens"] == 128  # the environment's default
    assert engine._client is None  # evaluate closed the connections of its event loop
