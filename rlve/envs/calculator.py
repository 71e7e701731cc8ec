"""Calculator: arithmetic too long for mental math, with a `calculate` tool the model may call.

Questions join three or four multi-digit integers with `+ - *`. The model calls the tool with
`<tool_call>{"name": "calculate", "arguments": {"expression": "..."}}</tool_call>`, reads the
result from the tool message, and ends the episode with a turn without a tool call that holds
`<answer>N</answer>`. Reward: exact match of that final answer (weight 1); `used_calculator`
(weight 0) records whether any tool call was made. The tool computes with the `ast`-based safe
evaluator of `rlve.envs.arithmetic`, never `eval()`.
"""

from __future__ import annotations

import json
import re

from rlve.envs.arithmetic import (
    MAX_EXPRESSION_CHARS,
    QUESTION,
    evaluate_expression,
    format_number,
    parse_integer,
    question_rows,
)
from rlve.envs.base import State, require_int
from rlve.envs.parsers import XMLParser, assistant_texts
from rlve.envs.rubric import Rubric
from rlve.envs.tools import ToolEnv
from rlve.types import Message

SYSTEM_PROMPT = f"""Answer the arithmetic question exactly. You have a calculator tool:
<tool_call>{{"name": "calculate", "arguments": {{"expression": "..."}}}}</tool_call>
The expression may use numbers, + - * / // % **, and parentheses (at most \
{MAX_EXPRESSION_CHARS} characters). The result comes back in a tool message.
When you know the answer, reply without a tool call and give the integer as <answer>N</answer>."""

MIN_OPERAND = 10
"""operands have at least two digits: one-digit sums are mental math"""


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: numbers joined by + - * / // % ** with parentheses, e.g. "(12 + 3) * 4".
    """
    return format_number(evaluate_expression(expression))


QUESTION_PATTERN = re.compile(re.escape(QUESTION).replace(re.escape("{expression}"), "(.*)"))
"""a question's text with its expression as the one group"""


def honest_policy(messages: list[Message]) -> str:
    """What a model that uses the tool as meant writes: a `calculate` call on the question's
    expression, then, once a tool message holds a value (not an error), `<answer>value</answer>`.
    The SFT teacher of the calculator agent (rlve.experiments.agent_calculator) and the tests'
    honest model."""
    tools = [m["content"] for m in messages if m["role"] == "tool"]
    if tools and not tools[-1].startswith("Error"):
        return f"<answer>{tools[-1]}</answer>"
    question = next(m["content"] for m in messages if m["role"] == "user")
    call = {"name": "calculate", "arguments": {"expression": question_expression(question)}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def question_expression(question: str) -> str:
    """The expression of a question written as QUESTION (ValueError for any other text)."""
    match = QUESTION_PATTERN.fullmatch(question)
    if match is None:
        raise ValueError(f"not a calculator question: {question[:80]!r}")
    return match.group(1)


def exact_answer(completion: list[Message], answer: str, parser: XMLParser) -> float:
    """1 if the `<answer>` of the last assistant message is the right integer, else 0.

    Only the last message counts: it is the one that ended the episode (or the last before the
    turn limit), so an answer guessed before checking with the tool is not rewarded.
    """
    texts = assistant_texts(completion)
    if not texts:
        return 0.0
    return float(parse_integer(parser.parse(texts[-1])) == int(answer))


def used_calculator(state: State) -> float:
    """1 if the model made any tool call (even a malformed one), else 0."""
    return float(state.get("tool_calls", 0) > 0)


def load_environment(
    num_examples: int = 1000,
    seed: int = 0,
    min_operands: int = 3,
    max_operands: int = 4,
    max_operand: int = 9999,
    max_turns: int = 4,
    max_tokens: int = 256,
) -> ToolEnv:
    """Long arithmetic with a calculator tool; the final `<answer>` is scored by exact match.

    Args:
        num_examples: questions in the dataset (at least 1).
        seed: seed of the questions; the same seed gives the same questions.
        min_operands: fewest integers in a question (at least 2).
        max_operands: most integers in a question (at least min_operands, at most 8).
        max_operand: largest integer in a question (at least 10; operands start at 10).
        max_turns: most model turns, tool calls and the final answer together (at least 1).
        max_tokens: default most tokens per model turn.
    """
    require_int("num_examples", num_examples, 1)
    require_int("min_operands", min_operands, 2)
    if not isinstance(max_operands, int) or not min_operands <= max_operands <= 8:
        raise ValueError(
            f"max_operands must be an integer in [min_operands={min_operands}, 8], "
            f"got {max_operands!r}"
        )
    require_int("max_operand", max_operand, MIN_OPERAND)
    require_int("max_turns", max_turns, 1)
    require_int("max_tokens", max_tokens, 1)
    parser = XMLParser(["answer"])
    rubric = Rubric(parser=parser)
    rubric.add(exact_answer, 1.0).add(used_calculator, 0.0)
    return ToolEnv(
        question_rows(num_examples, seed, min_operands, max_operands, MIN_OPERAND, max_operand),
        tools=[calculate],
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        name="calculator",
        sampling={"max_tokens": max_tokens},
    )
