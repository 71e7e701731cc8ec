"""Token-exact episodes with real chat templates (tests/fixtures/chat_templates, sources in its
README): Qwen3, which rewrites earlier assistant turns when more follow, and LFM2. The tiny
tokenizer carries each template; what is tested is how the token sequence is built.
"""

import copy
import json
import re
from pathlib import Path

import pytest

import rlve
from rlve.envs.tictactoe import minimax_policy
from rlve.inference.scripted import ScriptedEngine
from rlve.models import load_tokenizer
from rlve.rollout.chat_tokens import ChatTokens

TEMPLATES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"


def with_template(name: str):
    tokenizer = copy.deepcopy(load_tokenizer("tiny"))
    tokenizer.chat_template = (TEMPLATES / name).read_text()
    return tokenizer


@pytest.fixture(scope="module", params=["qwen3.jinja", "lfm2.jinja"])
def tokenizer(request):
    return with_template(request.param)


def sampled_texts(tokenizer, trajectory) -> list[str]:
    """The text of each sampled turn, decoded from the masked tokens of the trajectory."""
    return [
        tokenizer.decode(trajectory.token_ids[start:end], skip_special_tokens=True)
        for start, end in trajectory.turn_spans
    ]


def test_qwen3_rewrites_history_but_the_reply_tokens_do_not_depend_on_it():
    tokenizer = with_template("qwen3.jinja")
    history = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>add</think>\\boxed{4}"},
        {"role": "user", "content": "Are you sure?"},
    ]
    rendered = tokenizer.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
    assert "<think>" not in rendered  # the quirk: re-rendering drops the sampled think block
    completion = tokenizer.encode("<think>add</think>\\boxed{4}") + [tokenizer.eos_token_id]
    reply = ChatTokens(tokenizer).reply_ids(completion, history[2:])
    assert (
        tokenizer.decode(reply)
        == "\n<|im_start|>user\nAre you sure?<|im_end|>\n<|im_start|>assistant\n"
    )


def thinking_arithmetic(messages) -> str:
    expression = re.search(r"What is (.+)\?", messages[1]["content"]).group(1)
    return f"<think>{expression} worked out</think>\\boxed{{{eval(expression)}}}"  # our own text


def test_double_check_keeps_every_sampled_think_block_and_scores_every_episode(tokenizer):
    env = rlve.load_environment("double_check", num_examples=6)
    result = rlve.evaluate(env, ScriptedEngine(thinking_arithmetic, tokenizer), 6)
    assert result.summary["reward/mean"] == 1.0  # both answers right in all 6
    for group in result.groups:
        (trajectory,) = group.trajectories
        assert trajectory.stop_reason != "chat_template" and not trajectory.errors
        texts = sampled_texts(tokenizer, trajectory)
        assert len(texts) == 2 and all(t.startswith("<think>") for t in texts)
        # the sequence holds both turns as sampled: the first think block was not re-rendered away
        assert tokenizer.decode(trajectory.token_ids).count("worked out</think>") == 2


def test_tictactoe_with_think_replies_plays_every_game_to_a_result(tokenizer):
    env = rlve.load_environment("tictactoe", num_examples=8, max_turns=7)
    result = rlve.evaluate(env, ScriptedEngine(minimax_policy, tokenizer), 8)
    assert result.summary["game/invalid"] == 0.0 and result.summary["game/format"] == 1.0
    assert result.summary["game/win"] + result.summary["game/draw"] == 1.0
    for group in result.groups:
        (trajectory,) = group.trajectories
        assert trajectory.num_turns >= 3 and trajectory.stop_reason != "chat_template"
        assert len(trajectory.turn_spans) == trajectory.num_turns


def calculator_user(messages) -> str:
    last = messages[-1]
    if last["role"] == "tool":  # second turn: answer with the tool's result
        return f"<think>the tool says {last['content']}</think><answer>{last['content']}</answer>"
    expression = re.search(r"What is (.+)\?", last["content"]).group(1)
    call = json.dumps({"name": "calculate", "arguments": {"expression": expression}})
    return f"<think>let the tool do it</think><tool_call>{call}</tool_call>"


def test_tool_calls_and_responses_in_several_turns_stay_token_exact(tokenizer):
    env = rlve.load_environment("calculator", num_examples=4)
    result = rlve.evaluate(env, ScriptedEngine(calculator_user, tokenizer), 4)
    assert result.summary["reward/mean"] == 1.0  # every answer came from the tool's response
    for group in result.groups:
        (trajectory,) = group.trajectories
        text = tokenizer.decode(trajectory.token_ids)
        assert text.count("<think>let the tool do it</think><tool_call>") == 1
        assert text.count("<think>the tool says") == 1
        assert len(trajectory.turn_spans) == 2


ONE_QUESTION_ONLY = (
    "{% for m in messages %}{% if loop.index0 > 1 and m.role == 'user' %}"
    "{{ raise_exception('this template takes one question') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_template_that_cannot_render_a_reply_ends_those_episodes_not_the_evaluation():
    tokenizer = copy.deepcopy(load_tokenizer("tiny"))
    tokenizer.chat_template = ONE_QUESTION_ONLY
    env = rlve.load_environment("double_check", num_examples=4)
    result = rlve.evaluate(env, ScriptedEngine(thinking_arithmetic, tokenizer), 4)
    assert result.summary["stop/chat_template"] == 1.0
    assert result.summary["errors/chat_template"] == 4
    for group in result.groups:  # the first answer was sampled and scored before the failure
        assert len(group.trajectories[0].turn_spans) == 1


def test_tools_go_into_the_system_message_when_the_template_ignores_them():
    from rlve.envs.calculator import calculate
    from rlve.envs.tools import tool_schema

    tools = [tool_schema(calculate)]
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    smollm2 = ChatTokens(with_template("smollm2.jinja"), tools)
    assert smollm2.tools_in_system
    text = smollm2.tokenizer.decode(smollm2.prompt_ids(prompt))
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nBe brief.\n\nYou can call the following tools:")
    assert json.dumps(tools[0]) in system and "<tool_call>" in system
    tiny = ChatTokens(load_tokenizer("tiny"), tools)  # its template renders tools itself
    assert not tiny.tools_in_system
    assert tiny.tokenizer.decode(tiny.prompt_ids(prompt)).count("<tools>") == 1


def test_a_tool_episode_under_a_template_without_tools_stays_token_exact():
    tokenizer = with_template("smollm2.jinja")
    env = rlve.load_environment("calculator", num_examples=1)
    replies = iter(['<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}'
                    "</tool_call>", "<answer>2</answer>"])  # fmt: skip
    result = rlve.evaluate(env, ScriptedEngine(lambda m: next(replies), tokenizer), 1)
    (t,) = result.groups[0].trajectories
    assert t.stop_reason == "no_tool_call"
    assert "You can call the following tools" in tokenizer.decode(t.token_ids[: t.prompt_len])
    assert sampled_texts(tokenizer, t) == [
        '<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}</tool_call>',
        "<answer>2</answer>",
    ]
