"""Agents trained unchanged: the endpoint, its token-exact record, and the episodes it makes.

A scripted engine on the tiny model's tokenizer plays the model (its answers are token-exact like
a real one's); the agents are real clients (the openai SDK, the OpenAI Agents SDK, a subprocess)
talking HTTP to the run's endpoint.
"""

import asyncio
import copy
import json
import socket
import sys
import textwrap

import httpx
import pytest

from examples import agents_sdk_agent
from examples.calculator_agent import CALCULATE, solve
from rlve.algorithms.train_sequences import sequences_from_groups
from rlve.envs.agent import AgentEnv, load_environment
from rlve.envs.calculator import calculate, honest_policy
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.scripted import ScriptedEngine
from rlve.rollout.agent_episode import running_gateway
from rlve.rollout.chat_tokens import ChatTokens, end_of_turn_id
from rlve.rollout.episode import EpisodeSettings, play_episode
from rlve.types import RolloutGroup

SAMPLING = SamplingConfig(temperature=1.0, max_tokens=64)


async def converse(client, task, calls: int, follow_up: str = "Go on.") -> list[str]:
    """An agent's plain loop: `calls` calls, each answer and then `follow_up` added to the
    conversation it sends next; the answers."""
    messages, answers = list(task.prompt), []
    for _ in range(calls):
        reply = await client.chat.completions.create(model="m", messages=messages)
        answers.append(reply.choices[0].message.content)
        messages += [{"role": "assistant", "content": answers[-1]},
                     {"role": "user", "content": follow_up}]  # fmt: skip
    return answers


class RecordingEngine(ScriptedEngine):
    """A scripted engine that keeps every request's prompt ids and the ids it sampled."""

    def __init__(self, policy, tokenizer):
        super().__init__(policy, tokenizer, end_of_turn_id(tokenizer))
        self.served: list[tuple[list[int], list[int]]] = []

    async def generate(self, request: GenerationRequest):
        generation = await super().generate(request)
        self.served.append((list(request.prompt_ids), list(generation.token_ids)))
        return generation


def play(env, engine, index=0, seed=0, **settings):
    return asyncio.run(play_episode(env, engine, env.example(index), SAMPLING,
                                    EpisodeSettings(**settings), seed))  # fmt: skip


def calculator_env(agent=solve, **kwargs):
    return load_environment(agent=agent, tasks="calculator", num_examples=8, **kwargs)


def rubric_reward(env, trajectory, state) -> float:
    """The reward `env`'s rubric gives one played episode."""
    [score] = asyncio.run(env.rubric.score_group([trajectory.prompt], [trajectory.completion],
                                                 [trajectory.answer], [state],
                                                 [trajectory.info]))  # fmt: skip
    return score.reward


def test_the_example_agent_is_trained_on_exactly_the_ids_it_was_served(tiny_tokenizer):
    engine = RecordingEngine(honest_policy, tiny_tokenizer)
    env = calculator_env()
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_done"
    assert len(engine.served) == 2  # the tool call, then the answer
    (first_prompt, first_answer), (second_prompt, second_answer) = engine.served
    assert second_prompt[: len(first_prompt) + len(first_answer)] == first_prompt + first_answer
    assert trajectory.token_ids == second_prompt + second_answer
    assert trajectory.turn_spans == [
        (len(first_prompt), len(first_prompt) + len(first_answer)),
        (len(second_prompt), len(trajectory.token_ids)),
    ]
    sampled = [i for i, m in enumerate(trajectory.loss_mask) if m]
    assert sampled == [*range(*trajectory.turn_spans[0]), *range(*trajectory.turn_spans[1])]
    assert state["agent/calls"] == 2 and state["agent/splits_per_episode"] == 0
    assert trajectory.side_sequences == []
    assert state["agent_result"] == f"<answer>{env.example(0).answer}</answer>"
    [score] = asyncio.run(
        env.rubric.score_group(
            [trajectory.prompt],
            [trajectory.completion],
            [trajectory.answer],
            [state],
            [trajectory.info],
        )
    )
    assert score.reward == 1.0  # the calculator's exact answer (and no posted reward)
    assert score.metrics["reward/used_calculator"] == 1.0  # the tool call the endpoint returned


def test_an_agent_that_rewrites_its_history_starts_a_new_sample_and_it_is_counted(tiny_tokenizer):
    async def forgetful(client, task):
        messages = list(task.prompt)
        first = await client.chat.completions.create(model="m", messages=messages)
        messages.append({"role": "assistant", "content": "I wrote something else."})
        messages.append({"role": "user", "content": "Again, please."})
        second = await client.chat.completions.create(model="m", messages=messages)
        return [first.choices[0].message.content, second.choices[0].message.content]

    engine = RecordingEngine(lambda messages: "forty-two", tiny_tokenizer)
    trajectory, state = play(calculator_env(forgetful), engine)
    (first_prompt, first_answer), (second_prompt, second_answer) = engine.served
    assert state["agent/splits_per_episode"] == 1
    assert trajectory.token_ids == first_prompt + first_answer
    [side] = trajectory.side_sequences
    assert side.token_ids == second_prompt + second_answer
    assert side.loss_mask == [0] * len(second_prompt) + [1] * len(second_answer)
    shared = next(i for i, (a, b) in enumerate(zip(first_prompt + first_answer, second_prompt,
                                                    strict=False)) if a != b)  # fmt: skip
    assert state["agent/drift_tokens"] == len(second_prompt) - shared > 0


def test_n_choices_are_each_recorded_and_the_agent_continues_from_the_one_it_keeps(
    tiny_tokenizer,
):
    async def picky(client, task):
        messages = list(task.prompt)
        response = await client.chat.completions.create(model="m", messages=messages, n=3)
        kept = response.choices[2].message
        messages += [{"role": "assistant", "content": kept.content},
                     {"role": "user", "content": "And then?"}]  # fmt: skip
        await client.chat.completions.create(model="m", messages=messages)
        return kept.content

    answers = iter(["one", "two", "three", "four"])
    engine = RecordingEngine(lambda messages: next(answers), tiny_tokenizer)
    trajectory, state = play(calculator_env(picky), engine)
    assert state["agent/calls"] == 4 and state["agent/branches"] == 2
    assert state["agent/splits_per_episode"] == 0  # no history was rewritten
    sides = trajectory.side_sequences
    assert len(sides) == 2
    continued = [
        s
        for s in [trajectory, *sides]
        if sum(1 for m in s.loss_mask if m)
        and len(s.token_ids) == len(engine.served[3][0]) + len(engine.served[3][1])
    ]
    assert len(continued) == 1 and continued[0].token_ids == sum(engine.served[3], [])


async def _request(gateway, session, path="/v1/chat/completions", key=None, **kwargs):
    url = f"{gateway.root}/s/{session.sid}{path}"
    key = session.key if key is None else key
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient() as client:
        if path.endswith("models"):
            return await client.get(url, headers=headers)
        return await client.post(url, headers=headers, **kwargs)


def test_every_request_needs_the_session_s_key_and_an_open_session(tiny_tokenizer):
    async def scenario():
        gateway = await running_gateway()
        engine = RecordingEngine(lambda messages: "hi", tiny_tokenizer)
        session = gateway.open(engine, SAMPLING, seed=0)
        other = gateway.open(engine, SAMPLING, seed=1)
        body = {"messages": [{"role": "user", "content": "hello"}]}
        ok = await _request(gateway, session, json=body)
        wrong_key = await _request(gateway, session, key=other.key, json=body)
        no_key = await _request(gateway, session, key="", json=body)
        models = await _request(gateway, session, path="/v1/models")
        gateway.close(session)
        closed = await _request(gateway, session, json=body)
        gateway.close(other)
        return ok, wrong_key, no_key, models, closed, engine.served

    ok, wrong_key, no_key, models, closed, served = asyncio.run(scenario())
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "hi"
    assert ok.json()["rlve"] == {"temperature": 1.0, "max_tokens": 64, "top_p": 1.0}
    assert (wrong_key.status_code, no_key.status_code, closed.status_code) == (401, 401, 404)
    assert models.json()["data"][0]["id"] == "rlve-policy"
    assert len(served) == 1  # refused requests never reach the model


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'{"messages": "hello"}', 400, "non-empty list"),
        (b'{"messages": [{"role": "wizard", "content": "x"}]}', 400, "role"),
        (b'{"messages": [{"role": "user", "content": 7}]}', 400, "content"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400, "stream"),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 99}', 400, "n must be"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', 400, "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "' + b"x" * 70000 + b'"}]}', 413, "larger"),
    ],
)
def test_a_hostile_request_gets_a_clear_4xx_and_costs_nothing_else(
    tiny_tokenizer, body, status, says
):
    async def scenario():
        gateway = await running_gateway()
        gateway.max_body_bytes = 65536
        engine = RecordingEngine(lambda messages: "hi", tiny_tokenizer)
        session = gateway.open(engine, SAMPLING, seed=0)
        refused = await _request(gateway, session, content=body)
        plain = {"messages": [{"role": "user", "content": "x"}]}
        fine = await _request(gateway, session, json=plain)
        gateway.close(session)
        return refused, fine, engine.served

    refused, fine, served = asyncio.run(scenario())
    assert refused.status_code == status and says in refused.json()["error"]["message"]
    assert fine.status_code == 200 and len(served) == 1


def test_a_streamed_answer_is_the_same_message_in_openai_s_chunks_and_recorded_alike(
    tiny_tokenizer,
):
    # the calculator's two calls, asked with stream=true through the openai SDK: the text and
    # the tool call put together from the chunks are what the plain answer holds
    async def streaming(client, task):
        messages, answer = list(task.prompt), None
        for _ in range(2):
            stream = await client.chat.completions.create(
                model="m", messages=messages, tools=[CALCULATE], stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            content, calls, finish, usage = "", [], None, None
            async for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    content += choice.delta.content or ""
                    calls += choice.delta.tool_calls or []
                    finish = choice.finish_reason or finish
            assert usage is not None and usage.completion_tokens > 0
            if finish == "tool_calls":
                (call,) = calls
                assert call.function.name == "calculate"
                messages += [
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": call.id, "type": "function", "function": {
                            "name": "calculate", "arguments": call.function.arguments}}]},
                    {"role": "tool", "tool_call_id": call.id,
                     "content": calculate(**json.loads(call.function.arguments))},
                ]  # fmt: skip
            else:
                answer = content
        return answer

    engine = RecordingEngine(honest_policy, tiny_tokenizer)
    env = calculator_env(streaming)
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_done", state.get("env_error")
    assert state["agent_result"] == f"<answer>{env.example(0).answer}</answer>"
    assert state["agent/calls"] == 2 and state["agent/splits_per_episode"] == 0
    assert trajectory.token_ids == sum(engine.served[-1], [])


def test_the_endpoint_s_connections_send_at_once():
    """TCP_NODELAY reaches the accepted sockets only through a listening socket made with
    IPPROTO_TCP (asyncio checks `sock.proto`); with proto 0, every answer of a session waited
    for the client's delayed ACK: 44 ms a call against 1.1 ms (docs/benchmarks.md)."""

    async def listening():
        return (await running_gateway()).socket

    assert asyncio.run(listening()).proto == socket.IPPROTO_TCP


def test_the_run_s_temperature_and_token_limit_win_and_the_answer_says_so(tiny_tokenizer):
    seen = []

    class Watching(RecordingEngine):
        async def generate(self, request):
            seen.append(request.sampling)
            return await super().generate(request)

    async def scenario():
        gateway = await running_gateway()
        session = gateway.open(Watching(lambda m: "hi", tiny_tokenizer), SAMPLING, seed=0)
        message = [{"role": "user", "content": "x"}]
        hot = await _request(gateway, session, json={"messages": message, "temperature": 1.9,
                                                     "max_tokens": 4096})  # fmt: skip
        short = await _request(gateway, session, json={"messages": message, "max_tokens": 5})
        gateway.close(session)
        return hot.json()["rlve"], short.json()["rlve"]

    hot, short = asyncio.run(scenario())
    assert hot == {"temperature": 1.0, "max_tokens": 64, "top_p": 1.0}
    assert short["max_tokens"] == 5
    assert [s.max_tokens for s in seen] == [64, 5] and {s.temperature for s in seen} == {1.0}


def test_rewards_posted_per_call_land_on_that_turn(tiny_tokenizer):
    async def grading(client, task):
        await converse(client, task, calls=2)
        root = str(client.base_url).removesuffix("/v1/")
        headers = {"Authorization": f"Bearer {client.api_key}"}
        async with httpx.AsyncClient() as http:
            for body in ({"reward": -0.5, "call": 0}, {"reward": 2.0}, {"reward": 1, "call": 5}):
                await http.post(f"{root}/rl/reward", json=body, headers=headers)
        return "done"

    trajectory, state = play(calculator_env(grading),
                             RecordingEngine(lambda m: "ok", tiny_tokenizer))  # fmt: skip
    assert state["posted_reward"] == 1.5  # the third post named a call never made: refused
    assert state["turn_rewards"] == {0: -0.5}
    assert trajectory.turn_rewards == [-0.5, 0.0]


def test_an_agent_past_its_deadline_or_one_that_raises_ends_as_a_counted_fault(tiny_tokenizer):
    async def stalls(client, task):
        await client.chat.completions.create(model="m", messages=task.prompt)
        await asyncio.sleep(60)

    async def crashes(client, task):
        raise KeyError("no such thing")

    engine = RecordingEngine(lambda m: "hmm", tiny_tokenizer)
    late, late_state = play(calculator_env(stalls, agent_timeout_s=0.5), engine)
    assert late_state["stop_reason"] == "timeout" and "agent_timeout_s" in late_state["timeout"]
    assert late.num_sampled_tokens == len(engine.served[0][1])  # what it did is kept
    _, crashed = play(calculator_env(crashes), engine)
    assert crashed["stop_reason"] == "env_error" and "KeyError" in crashed["env_error"]


def test_an_agent_that_raises_on_the_model_s_mistake_is_scored_when_asked(tiny_tokenizer):
    """The Agents SDK raises ModelBehaviorError when the model calls a tool it does not have: a
    fault by default (not trained); with agent_errors="score" the episode is kept, scored 0 by the
    calculator's rubric and trained, so the mistake costs the model what a wrong answer does."""

    def invents_a_tool(messages):
        return '<tool_call>{"name": "calc", "arguments": {"expression": "1+2"}}</tool_call>'

    engine = RecordingEngine(invents_a_tool, tiny_tokenizer)
    _, state = play(calculator_env(agents_sdk_agent.solve), engine)
    assert state["stop_reason"] == "env_error" and "ModelBehaviorError" in state["env_error"]
    env = calculator_env(agents_sdk_agent.solve, agent_errors="score")
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_error" and "calc not found" in state["agent_error"]
    assert trajectory.token_ids == sum(engine.served[-1], [])  # the call it made is trained
    assert rubric_reward(env, trajectory, state) == 0.0
    honest, honest_state = play(env, RecordingEngine(honest_policy, tiny_tokenizer))
    assert rubric_reward(env, honest, honest_state) == 1.0
    with pytest.raises(ValueError, match="agent_errors must be one of .* got 'drop'"):
        calculator_env(agent_errors="drop")


def test_an_agent_whose_conversation_outgrows_max_seq_len_ends_as_context_length(tiny_tokenizer):
    async def grows(client, task):  # the endpoint's 400 ends it (openai.BadRequestError)
        await converse(client, task, calls=1000, follow_up="more " * 40)

    env = calculator_env(grows)
    first_prompt = len(ChatTokens(tiny_tokenizer).prompt_ids(env.example(0).prompt))
    engine = RecordingEngine(lambda m: "ok", tiny_tokenizer)
    trajectory, state = play(env, engine, max_seq_len=first_prompt + 100)
    assert state["stop_reason"] == "context_length" and "env_error" not in state
    assert state["agent/calls"] == 2 and len(trajectory.turn_spans) == 2  # kept, to train on


def test_a_generation_still_running_when_its_episode_ends_is_cancelled(tiny_tokenizer):
    cancelled = []

    class Hanging(RecordingEngine):
        async def generate(self, request):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(request.prompt_ids)
                raise

    async def waits(client, task):
        await client.chat.completions.create(model="m", messages=task.prompt)

    engine = Hanging(lambda messages: "", tiny_tokenizer)
    _, state = play(calculator_env(waits, agent_timeout_s=0.5), engine)
    assert state["stop_reason"] == "timeout" and len(cancelled) == 1


def test_many_concurrent_sessions_are_served_at_once_and_none_is_left_open(tiny_tokenizer):
    async def slow_model_episodes():
        engine = RecordingEngine(lambda m: "ok", tiny_tokenizer)
        in_flight, most = 0, 0
        generate = engine.generate

        async def counted(request):
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.05)
            try:
                return await generate(request)
            finally:
                in_flight -= 1

        engine.generate = counted

        async def two_calls(client, task):
            for _ in range(2):
                await client.chat.completions.create(model="m", messages=task.prompt)
            return "ok"

        env = calculator_env(two_calls)
        episodes = [play_episode(env, engine, env.example(i), SAMPLING, EpisodeSettings(), i)
                    for i in range(64)]  # fmt: skip
        results = await asyncio.gather(*episodes)
        gateway = await running_gateway()
        return results, most, len(gateway.sessions)

    results, most, still_open = asyncio.run(slow_model_episodes())
    assert all(state["stop_reason"] == "agent_done" for _, state in results)
    assert all(state["agent/calls"] == 2 for _, state in results)
    assert most == 64 and still_open == 0


AGENT_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import openai
    task = json.load(sys.stdin)
    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    reply = client.chat.completions.create(model=os.environ["OPENAI_MODEL"],
                                           messages=task["prompt"])
    leaked = sorted(k for k in os.environ if k.startswith("RLVE_TEST_SECRET"))
    print(json.dumps({"answer": reply.choices[0].message.content, "leaked": leaked}))
""")


def test_a_command_agent_runs_in_a_clean_environment_and_is_recorded(
    tiny_tokenizer, tmp_path, monkeypatch
):
    script = tmp_path / "agent.py"
    script.write_text(AGENT_SCRIPT)
    monkeypatch.setenv("RLVE_TEST_SECRET_TOKEN", "do-not-leak")
    env = load_environment(command=[sys.executable, str(script)], tasks="calculator",
                           num_examples=4)  # fmt: skip
    engine = RecordingEngine(lambda m: "seven", tiny_tokenizer)
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_done", state.get("env_error")
    assert json.loads(state["agent_result"]) == {"answer": "seven", "leaked": []}
    assert trajectory.token_ids == sum(engine.served[0], [])


def test_the_openai_agents_sdk_drives_the_endpoint_unchanged(tiny_tokenizer):
    engine = RecordingEngine(honest_policy, tiny_tokenizer)
    env = calculator_env(agents_sdk_agent.solve)
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_done", state.get("env_error")
    assert state["agent/calls"] == 2 and state["agent/splits_per_episode"] == 0
    assert state["agent_result"] == f"<answer>{env.example(0).answer}</answer>"
    assert trajectory.token_ids == sum(engine.served[-1], [])


def test_the_openai_agents_sdk_streamed_run_drives_the_endpoint_unchanged(tiny_tokenizer):
    # Runner.run_streamed asks every call with stream=true
    from agents import Runner

    async def streamed(client, task):
        run = Runner.run_streamed(agents_sdk_agent.calculator_agent(client, task), task.question,
                                  max_turns=4)  # fmt: skip
        async for _ in run.stream_events():
            pass
        return str(run.final_output)

    engine = RecordingEngine(honest_policy, tiny_tokenizer)
    env = calculator_env(streamed)
    trajectory, state = play(env, engine)
    assert state["stop_reason"] == "agent_done", state.get("env_error")
    assert state["agent/calls"] == 2 and state["agent/splits_per_episode"] == 0
    assert state["agent_result"] == f"<answer>{env.example(0).answer}</answer>"
    assert trajectory.token_ids == sum(engine.served[-1], [])


def test_agent_env_refuses_a_bad_setup_by_name():
    with pytest.raises(ValueError, match="exactly one of agent"):
        AgentEnv([{"question": "q"}])
    with pytest.raises(ValueError, match="list of arguments"):
        AgentEnv([{"question": "q"}], command="python agent.py")
    with pytest.raises(ValueError, match="agent_timeout_s"):
        AgentEnv([{"question": "q"}], agent=solve, agent_timeout_s=0)
    with pytest.raises(ValueError, match="cannot import"):
        load_environment(agent="no_such_module:solve")


THINK_STRIPPING_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message.content or '' -%}"
    "{%- if message.role == 'assistant' and not loop.last -%}"
    "{%- set content = content.split('</think>')[-1] -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Qwen3's habit: an earlier turn's reasoning is left out once more messages follow"""


def test_a_template_that_drops_earlier_think_blocks_splits_the_episode_and_counts_it(
    tiny_tokenizer,
):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = THINK_STRIPPING_TEMPLATE

    async def two_turns(client, task):
        return await converse(client, task, calls=2, follow_up="Sure?")

    engine = RecordingEngine(lambda messages: "<think>hmm</think>42", tokenizer)
    trajectory, state = play(calculator_env(two_turns), engine)
    (first_prompt, first_answer), (second_prompt, second_answer) = engine.served
    assert state["agent/splits_per_episode"] == 1 and state["agent/drift_tokens"] > 0
    assert trajectory.token_ids == first_prompt + first_answer  # the think block as sampled
    assert "<think>hmm</think>" not in tokenizer.decode(second_prompt)  # what the model was shown
    [side] = trajectory.side_sequences
    assert side.token_ids == second_prompt + second_answer


def test_a_tool_call_the_template_writes_differently_continues_on_the_sampled_ids(
    tiny_tokenizer,
):
    sampled_call = (
        '<tool_call>{ "arguments": {"expression": "12 * 3"},  "name": "calculate" }</tool_call>'
    )

    def model(messages):
        return "36 it is" if messages[-1]["role"] == "tool" else sampled_call

    engine = RecordingEngine(model, tiny_tokenizer)
    trajectory, state = play(calculator_env(), engine)
    (first_prompt, first_answer), (second_prompt, _) = engine.served
    assert state["agent/calls"] == 2 and state["agent/splits_per_episode"] == 0
    assert second_prompt[: len(first_prompt) + len(first_answer)] == first_prompt + first_answer
    start, end = trajectory.turn_spans[0]
    assert tiny_tokenizer.decode(trajectory.token_ids[start:end], skip_special_tokens=True) == (
        sampled_call  # the call as sampled, not as the template would write it
    )
    rendered = ChatTokens(tiny_tokenizer).render(
        [{"role": "assistant", "content": "", "tool_calls": [{"function": {
            "name": "calculate", "arguments": {"expression": "12 * 3"}}}]}], False)  # fmt: skip
    assert sampled_call not in rendered  # the template's own writing differs


def test_a_model_that_cheats_through_the_agent_earns_less_than_an_honest_one(tiny_tokenizer):
    """The calculator agent's episodes scored by the calculator's rubric: gibberish, an answer
    guessed without the tool, a model that calls the tool until the agent gives up, and one that
    writes a malformed tool call all earn less than the honest model."""

    def gibberish(messages):
        return "}}{{<tool_call> ]] <answer>"

    def guesses(messages):
        return "<answer>1000</answer>"

    def loops(messages):
        return '<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}</tool_call>'

    def malformed(messages):
        return '<tool_call>{"name": "calculate", "arguments": </tool_call>'

    def reward(model):
        env = calculator_env()
        trajectory, state = play(env, RecordingEngine(model, tiny_tokenizer))
        return rubric_reward(env, trajectory, state), state["stop_reason"]

    assert reward(honest_policy) == (1.0, "agent_done")
    for cheat in (gibberish, guesses, loops, malformed):
        assert reward(cheat) == (0.0, "agent_done"), cheat.__name__


def test_agent_episodes_train_with_per_turn_credit_and_their_split_samples(tiny_tokenizer):
    """Two agent episodes of one task, each splitting once (its third call rewrites the history):
    the one whose agent posted +1 for its first call wins the group. With per-turn credit that
    call's turn carries the reward, its second turn none; the split-off sample trains with the
    episode's own advantage."""

    def agent(posted: float):
        async def run(client, task):
            await converse(client, task, calls=2)
            await client.chat.completions.create(model="m", messages=task.prompt[-1:])  # rewrite
            root = str(client.base_url).removesuffix("/v1/")
            async with httpx.AsyncClient() as http:
                await http.post(f"{root}/rl/reward", json={"reward": posted, "call": 0},
                                headers={"Authorization": f"Bearer {client.api_key}"})  # fmt: skip
            return "done"

        return run

    trajectories = []
    for posted in (1.0, 0.0):
        env = calculator_env(agent(posted))
        trajectory, state = play(env, RecordingEngine(lambda m: "ok", tiny_tokenizer))
        [score] = asyncio.run(env.rubric.score_group([trajectory.prompt], [trajectory.completion],
                                                     [trajectory.answer], [state],
                                                     [trajectory.info]))  # fmt: skip
        trajectory.reward = score.reward
        assert state["agent/splits_per_episode"] == 1 and len(trajectory.side_sequences) == 1
        trajectories.append(trajectory)
    assert [t.reward for t in trajectories] == [1.0, 0.0]
    assert trajectories[0].turn_rewards == [1.0, 0.0]
    group = RolloutGroup(example_id=0, env_name="agent", trajectories=trajectories)
    sequences = sequences_from_groups([group], std_normalize=False, turn_gamma=1.0).sequences
    winner, winner_side, loser, loser_side = sequences
    (first_start, first_end), (second_start, second_end) = trajectories[0].turn_spans
    assert set(winner.token_advantages[first_start:first_end]) == {0.5}  # 1 against the mean 0.5
    assert set(winner.token_advantages[second_start:second_end]) == {0.0}  # both earned 0 there
    assert (winner_side.advantage, loser_side.advantage) == (0.5, -0.5)
    assert winner_side.token_advantages is None and loser.advantage == -0.5
