"""verifiers environments in rlve: three packages written against verifiers' public API (a
single-turn task, a multi-turn game, a tool environment), pip-installed, played by rlve's
token-exact scripted engine, and scored the same as verifiers' own rollout scores them."""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import pytest

verifiers = pytest.importorskip("verifiers")

import verifiers_packages as vp  # noqa: E402
from chat_server import ChatServer, completion  # noqa: E402

import rlve  # noqa: E402
from rlve.envs import expand_env_names  # noqa: E402
from rlve.envs.tools import parse_tool_calls  # noqa: E402
from rlve.envs.verifiers_env import adapter, load_verifiers_environment  # noqa: E402
from rlve.inference.scripted import ScriptedEngine  # noqa: E402


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    target = vp.install(tmp_path_factory.mktemp("vf_site"))
    yield target
    sys.path.remove(str(target))


def rlve_rollouts(name: str, tokenizer) -> dict[int, object]:
    env = rlve.load_environment(f"verifiers:{name}")
    engine = ScriptedEngine(vp.POLICIES[name], tokenizer=tokenizer)
    result = rlve.evaluate(env, engine, num_examples=len(env))
    return {t.example_id: t for g in result.groups for t in g.trajectories}


def verifiers_own_rollouts(name: str) -> dict[int, dict]:
    """verifiers' own `evaluate`, its OpenAI client talking to a chat server that answers with
    the same policy (tool calls given structured, as vLLM's tool parser gives them)."""
    from openai import AsyncOpenAI

    policy = vp.POLICIES[name]

    def answer(body: dict) -> dict:
        text = policy(body["messages"])
        calls = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for i, c in enumerate(parse_tool_calls({"content": text}))
        ]  # fmt: skip
        return completion(text, "tool_calls" if calls else "stop", tool_calls=calls or None)

    server = ChatServer()
    server.answer = answer
    try:
        vf_env = verifiers.load_environment(name)
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        out = asyncio.run(vf_env.evaluate(client, "scripted", num_examples=-1))
    finally:
        server.close()
    return {
        example_id: {"reward": reward, "stop": stop, "turns": len(state["trajectory"])}
        for example_id, reward, stop, state in zip(
            out["example_id"], out["reward"], out["stop_conditions"], out["state"], strict=True
        )
    }


@pytest.mark.parametrize("name", vp.PACKAGES)
def test_rewards_and_stops_equal_verifiers_own_rollout(packages, tiny_tokenizer, name):
    ours = rlve_rollouts(name, tiny_tokenizer)
    theirs = verifiers_own_rollouts(name)
    assert sorted(ours) == sorted(theirs)
    for example_id, trajectory in ours.items():
        own = theirs[example_id]
        assert (trajectory.reward, trajectory.stop_reason, trajectory.num_turns) == (
            own["reward"], own["stop"], own["turns"]), example_id  # fmt: skip


def test_the_expected_rewards_of_each_package(packages, tiny_tokenizer):
    # reverse_words: 3-word sentences reversed (1 + 0.5 + 0.25), 4-word ones given back as they
    # are, no word in place (format only: 0.25)
    words = rlve_rollouts("vf_reverse_words", tiny_tokenizer)
    assert sorted(t.reward for t in words.values()) == [0.25] * 4 + [1.75] * 2
    # nim: a winning move each turn wins every pile but 10, where an illegal move (then one
    # more turn, as in verifiers' loop) ends the game by the illegal_move stop condition
    nim = rlve_rollouts("vf_nim", tiny_tokenizer)
    lost = [t for t in nim.values() if t.reward == 0.0]
    assert len(lost) == 1 and lost[0].stop_reason == "illegal_move" and lost[0].num_turns == 2
    assert all(t.stop_reason == "has_final_env_response" for t in nim.values() if t.reward)
    # tool_math: two tool calls then the answer; wrong on purpose once
    tools = rlve_rollouts("vf_tool_math", tiny_tokenizer)
    assert sorted(t.reward for t in tools.values()) == [0.0, 1.0, 1.0, 1.0]
    assert {t.metrics["reward/total_tool_calls"] for t in tools.values()} == {2.0}
    assert {t.num_turns for t in tools.values()} == {3}


def test_turns_are_token_exact(packages, tiny_tokenizer):
    """Each sampled turn is the scripted engine's own ids; environment replies are masked."""
    nim = rlve_rollouts("vf_nim", tiny_tokenizer)
    trajectory = nim[0]
    for (start, end), message in zip(
        trajectory.turn_spans,
        [m for m in trajectory.completion if m["role"] == "assistant"],
        strict=True,
    ):
        ids = trajectory.token_ids[start:end]
        assert tiny_tokenizer.decode(ids, skip_special_tokens=True) == message["content"]
        assert trajectory.loss_mask[start:end] == [1] * (end - start)
    assert sum(trajectory.loss_mask) == sum(e - s for s, e in trajectory.turn_spans)


def test_tool_calls_reach_verifiers_as_openai_calls():
    view = adapter.verifiers_messages([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": vp._call("add", a=1, b=2) + "<tool_call>{bad"},
    ])  # fmt: skip
    assert view[1]["tool_calls"] == [{"id": "call_0_0", "type": "function",
                                      "function": {"name": "add",
                                                   "arguments": '{"a": 1, "b": 2}'}}]  # fmt: skip


def test_rlve_signal_handlers_survive_loading(packages):
    def mine(signum, frame):
        return None

    old = signal.signal(signal.SIGTERM, mine)
    try:
        load_verifiers_environment("verifiers:vf_nim")
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_names_that_do_not_load_say_why(packages, monkeypatch):
    with pytest.raises(ValueError, match="cannot import 'no_such_env'"):
        rlve.load_environment("verifiers:no-such-env")
    with pytest.raises(ValueError, match="has no load_environment"):
        rlve.load_environment("verifiers:json")
    assert expand_env_names(["verifiers:vf_nim"]) == ["verifiers:vf_nim"]
    monkeypatch.setattr(verifiers, "__version__", "0.2.0")
    with pytest.raises(ImportError, match=r"verifiers 0.2.0 is installed; rlve drives .* 0.1.9"):
        rlve.load_environment("verifiers:vf_nim")


def test_reward_functions_that_raise_are_counted(packages, tiny_tokenizer):
    """verifiers scores a raising reward function 0 and only logs it; rlve counts it per rollout
    (`errors/<name>`, a `verifier_error` fault), as it counts its own rubric's."""

    def fails_on_four_words(completion, answer) -> float:
        if len(answer.split()) == 4:
            raise ValueError("four words")
        return 1.0

    def group_fails(completions) -> list[float]:
        raise RuntimeError("the judge is down")

    vf_env = verifiers.load_environment("vf_reverse_words")
    vf_env.rubric.add_reward_func(fails_on_four_words, weight=2.0)
    vf_env.rubric.add_reward_func(group_fails, weight=1.0)
    env = adapter.VerifiersEnv(vf_env, name="vf_reverse_words")
    engine = ScriptedEngine(vp.reverse_policy, tokenizer=tiny_tokenizer)
    result = rlve.evaluate(env, engine, num_examples=len(env))
    trajectories = [t for g in result.groups for t in g.trajectories]
    # 3-word sentences: 1.75 as before, + 2 x 1.0; 4-word ones: 0.25, + 2 x 0 (verifiers' 0)
    three = [t for t in trajectories if t.reward > 1]
    four = [t for t in trajectories if t.reward < 1]
    assert sorted(t.reward for t in three) == [3.75, 3.75] and len(four) == 4
    assert all(t.reward == 0.25 for t in four)
    assert all(t.errors == {"group_fails": 1} for t in three)
    assert all(t.errors == {"fails_on_four_words": 1, "group_fails": 1} for t in four)
    assert all(t.fault.kind == "verifier_error" for t in trajectories)
    assert four[0].fault.message == "fails_on_four_words: ValueError: four words"
    assert result.summary["errors/fails_on_four_words"] == 4.0
