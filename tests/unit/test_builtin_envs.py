"""The built-in environments reverse_text, double_check and calculator, and their arithmetic.

Episodes are played by scripted policies through `rlve.evaluate`, so each test checks the
environment exactly as training would run it: prompts, turn-taking, stop reasons, rewards.
"""

import json
import random
import re
from difflib import SequenceMatcher

import pytest
from datasets import Dataset

import rlve
from rlve.envs import calculator, reverse_text
from rlve.envs.arithmetic import (
    evaluate_expression,
    format_number,
    parse_integer,
    random_problem,
)
from rlve.envs.double_check import ARE_YOU_SURE
from rlve.inference.scripted import ScriptedEngine
from rlve.types import Trajectory


def play(env, policy, num_examples: int = 4) -> list[Trajectory]:
    result = rlve.evaluate(env, ScriptedEngine(policy), num_examples, 1, seed=0)
    return [t for group in result.groups for t in group.trajectories]


def question_expression(messages) -> str:
    """The expression of the question "What is <expression>?" (the first user message)."""
    return calculator.question_expression(
        next(m["content"] for m in messages if m["role"] == "user")
    )


def question_value(messages) -> int:
    """The true value of the question: what an oracle policy answers."""
    return evaluate_expression(question_expression(messages))


# ---------------------------------------------------------------- the safe evaluator


@pytest.mark.parametrize(
    "expression, value",
    [
        ("2 + 3 * (4 - 1)", 11),
        ("-(3 - 5) * 4", 8),
        ("17 // 5", 3),
        ("17 % 5", 2),
        ("7 / 2", 3.5),
        ("2 ** 10", 1024),
        ("(482 - 37) * 59 + 1203", 27458),  # 445 * 59 = 26255; + 1203 = 27458
    ],
)
def test_evaluator_computes_arithmetic(expression, value):
    assert evaluate_expression(expression) == value


@pytest.mark.parametrize(
    "expression, reason",
    [
        ("__import__('os')", "Call is not allowed"),
        ("().__class__", "Attribute is not allowed"),
        ("x + 1", "names are not allowed"),
        ("2 ** 99999", "exponents must be within"),
        ("9 ** 99 * 9 ** 99", "larger than 10\\*\\*100"),
        ("1" * 10_240, "10240 characters"),
        ("1 / 0", "division by zero"),
        ("2 ^ 3", "write powers as \\*\\*"),
        ("True + 1", "only numbers"),
        ("'a' * 3", "only numbers"),
        ("(-8) ** 0.5", "complex"),
        ("2 +", "not a valid arithmetic expression"),
    ],
)
def test_evaluator_rejects_what_is_not_bounded_arithmetic(expression, reason):
    with pytest.raises(ValueError, match=reason):
        evaluate_expression(expression)


def test_numbers_read_and_print_as_a_model_would():
    assert format_number(evaluate_expression("6 / 2")) == "3"
    assert format_number(evaluate_expression("1 / 3")) == "0.333333333333"
    assert format_number(-12) == "-12"
    assert [parse_integer(t) for t in ["1,234", " -56 ", "7.0", "7.5", "seven", None]] == [
        1234, -56, 7, None, None, None,
    ]  # fmt: skip


def test_generated_problems_are_seeded_and_their_answers_are_the_expressions_value():
    first = [random_problem(random.Random(3), 4, 10, 999) for _ in range(2)]
    assert first[0] == first[1]
    rng = random.Random(0)
    for _ in range(50):
        problem = random_problem(rng, rng.randint(2, 4), 10, 999)
        assert len(re.findall(r"\d+", problem.expression)) in (2, 3, 4)
        assert problem.answer == evaluate_expression(problem.expression)


# ---------------------------------------------------------------- reverse_text


def reverse_policy(messages):
    return f"<reversed_text>{messages[-1]['content'][::-1]}</reversed_text>"


def copy_policy(messages):
    return f"<reversed_text>{messages[-1]['content']}</reversed_text>"


def test_reverse_text_perfect_policy_scores_one():
    env = rlve.load_environment("reverse_text")
    rollouts = play(env, reverse_policy, num_examples=20)
    assert len(rollouts) == 20
    assert [t.reward for t in rollouts] == [1.0] * 20
    assert all(t.metrics["reward/format_reward"] == 1.0 for t in rollouts)


def test_reverse_text_copy_scores_difflibs_ratio():
    # "abc" against "cba": the longest matching block is one character, so 2 * 1 / (3 + 3) = 1/3.
    env = reverse_text.load_environment(dataset=[{"text": "abc"}])
    (rollout,) = play(env, copy_policy, num_examples=1)
    assert rollout.reward == pytest.approx(1 / 3)
    # and on generated paragraphs, the same number difflib gives
    env = reverse_text.load_environment(num_examples=5)
    for t in play(env, copy_policy, num_examples=5):
        paragraph = t.prompt[-1]["content"]
        assert t.reward == SequenceMatcher(None, paragraph, paragraph[::-1]).ratio()


def test_reverse_text_answer_without_tags_scores_zero():
    env = reverse_text.load_environment(num_examples=3)
    rollouts = play(env, lambda messages: messages[-1]["content"][::-1], num_examples=3)
    assert [t.reward for t in rollouts] == [0.0] * 3
    assert [t.metrics["reward/format_reward"] for t in rollouts] == [0.0] * 3


def test_reverse_text_dataset_is_seeded_and_complete():
    default = reverse_text.load_environment()
    assert len(default.dataset) == 1000
    assert set(default.dataset.column_names) == {"prompt", "answer", "info", "example_id"}
    first = default.example(0)
    paragraph = first.prompt[-1]["content"]
    assert first.answer == paragraph[::-1]
    assert 2 <= len(re.findall(r"[.!?]", paragraph)) <= 4  # 2-4 sentences
    same = reverse_text.load_environment(num_examples=3, seed=0).example(0)
    other = reverse_text.load_environment(num_examples=3, seed=1).example(0)
    assert same.prompt == first.prompt
    assert other.prompt[-1]["content"] != paragraph
    assert reverse_text.VOCABULARY_SIZE >= 200


def test_reverse_text_uses_the_users_dataset():
    rows = Dataset.from_list([{"body": "Hello"}, {"body": "rlve"}])
    env = reverse_text.load_environment(dataset=rows, text_column="body")
    assert len(env) == 2
    assert (env.example(0).prompt[-1]["content"], env.example(0).answer) == ("Hello", "olleH")
    assert env.example(1).answer == "evlr"
    with pytest.raises(ValueError, match="text_column 'text'"):
        reverse_text.load_environment(dataset=rows)


# ---------------------------------------------------------------- double_check


def double_check_policy(first_right: bool, second_right: bool):
    def policy(messages):
        turn = sum(m["role"] == "assistant" for m in messages)
        right = (first_right, second_right)[turn]
        value = question_value(messages) + (0 if right else 1)
        return f"<think>Working it out.</think>\n\\boxed{{{value}}}"

    return policy


@pytest.mark.parametrize(
    "first_right, second_right, reward, changed",
    [(True, True, 1.0, 0.0), (True, False, 0.0, 1.0), (False, True, 1.0, 1.0)],
)
def test_double_check_scores_the_final_answer(first_right, second_right, reward, changed):
    env = rlve.load_environment("double_check", num_examples=10)
    rollouts = play(env, double_check_policy(first_right, second_right), num_examples=4)
    for t in rollouts:
        assert t.reward == reward
        assert t.metrics["reward/first_answer_correct"] == float(first_right)
        assert t.metrics["reward/changed_answer"] == changed


def test_double_check_conversation_is_answer_doubt_answer():
    env = rlve.load_environment("double_check", num_examples=10)
    (t,) = play(env, double_check_policy(True, True), num_examples=1)
    # Three messages, not four: nothing follows the final answer.
    assert [m["role"] for m in t.completion] == ["assistant", "user", "assistant"]
    assert t.completion[1]["content"] == ARE_YOU_SURE == "Are you sure?"
    assert t.num_turns == 2
    assert t.stop_reason == "max_turns_reached"


def test_double_check_does_not_fall_back_to_the_first_answer():
    env = rlve.load_environment("double_check", num_examples=10)

    def gives_up(messages):
        if any(m["role"] == "assistant" for m in messages):
            return "I am not sure any more."
        return f"\\boxed{{{question_value(messages)}}}"

    (t,) = play(env, gives_up, num_examples=1)
    assert t.reward == 0.0
    assert t.metrics["reward/first_answer_correct"] == 1.0
    assert t.metrics["reward/changed_answer"] == 1.0


# ---------------------------------------------------------------- calculator


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def scripted_turns(*first_turns: str):
    """Play `first_turns` in order, then behave like `calculator.honest_policy`."""

    def policy(messages):
        turn = sum(m["role"] == "assistant" for m in messages)
        return first_turns[turn] if turn < len(first_turns) else calculator.honest_policy(messages)

    return policy


def test_the_question_expression_is_read_back_or_refused():
    assert calculator.question_expression("What is 12 + 3 * 40?") == "12 + 3 * 40"
    with pytest.raises(ValueError, match="not a calculator question: 'Compute 1 \\+ 1'"):
        calculator.question_expression("Compute 1 + 1")


def test_calculator_tool_use_scores_one():
    env = rlve.load_environment("calculator")
    rollouts = play(env, calculator.honest_policy, num_examples=5)
    for t in rollouts:
        assert t.reward == 1.0
        assert t.metrics["reward/used_calculator"] == 1.0
        assert [m["role"] for m in t.completion] == ["assistant", "tool", "assistant"]
        assert t.completion[1]["content"] == t.answer
        assert (t.num_turns, t.stop_reason) == (2, "no_tool_call")


def test_calculator_malformed_call_gets_an_error_and_plays_on():
    env = rlve.load_environment("calculator", num_examples=10)
    (t,) = play(env, scripted_turns('<tool_call>{"name": "calculate", </tool_call>'), 1)
    assert t.completion[1]["role"] == "tool"
    assert t.completion[1]["content"].startswith("Error: the tool call is not valid JSON")
    assert t.num_turns == 3  # bad call, good call, answer
    assert t.reward == 1.0
    assert t.metrics["tools/errors"] == 1.0 and t.metrics["tools/calls"] == 2.0


def test_calculator_unknown_tool_is_told_the_tools():
    env = rlve.load_environment("calculator", num_examples=10)
    (t,) = play(env, scripted_turns(tool_call("python", code="1+1")), 1)
    assert t.completion[1]["content"] == "Error: unknown tool 'python'; the tools are ['calculate']"
    assert t.reward == 1.0


def test_calculator_refused_expression_reaches_the_model():
    env = rlve.load_environment("calculator", num_examples=10)
    (t,) = play(env, scripted_turns(tool_call("calculate", expression="2 ** 99999")), 1)
    assert t.completion[1]["content"] == (
        "Error: ExpressionError: exponents must be within [-100, 100]"
    )


def test_calculator_direct_answer_ends_after_one_turn():
    env = rlve.load_environment("calculator", num_examples=10)
    rollouts = play(env, lambda m: f"<answer>{question_value(m)}</answer>", num_examples=3)
    for t in rollouts:
        assert (t.num_turns, t.stop_reason) == (1, "no_tool_call")
        assert t.reward == 1.0
        assert t.metrics["reward/used_calculator"] == 0.0


def test_calculator_endless_tool_calls_stop_at_max_turns():
    env = rlve.load_environment("calculator", num_examples=10)
    (t,) = play(env, lambda m: tool_call("calculate", expression="1 + 1"), 1)
    assert (t.num_turns, t.stop_reason) == (4, "max_turns_reached")
    assert t.reward == 0.0
    assert t.metrics["tools/calls"] == 4.0


# ---------------------------------------------------------------- loading by name


@pytest.mark.parametrize("name", ["reverse_text", "double_check", "calculator"])
def test_loads_by_name_with_1000_examples(name):
    env = rlve.load_environment(name)
    assert env.name == name
    assert len(env) == 1000
    assert name in rlve.list_environments()


@pytest.mark.parametrize(
    "name, kwargs, argument",
    [
        ("reverse_text", {"num_examples": 0}, "num_examples"),
        ("reverse_text", {"max_tokens": 0}, "max_tokens"),
        ("double_check", {"num_examples": 0}, "num_examples"),
        ("double_check", {"max_operand": 1}, "max_operand"),
        ("calculator", {"num_examples": 0}, "num_examples"),
        ("calculator", {"max_turns": 0}, "max_turns"),
        ("calculator", {"min_operands": 1}, "min_operands"),
        ("calculator", {"max_operands": 9}, "max_operands"),
        ("calculator", {"max_operand": 9}, "max_operand"),
    ],
)
def test_bad_arguments_name_the_argument(name, kwargs, argument):
    with pytest.raises(ValueError, match=f"^{argument} must be"):
        rlve.load_environment(name, **kwargs)
