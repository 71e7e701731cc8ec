"""DoubleCheck: the model answers an arithmetic question, is asked "Are you sure?", answers again.

Two model turns (assistant, user "Are you sure?", assistant): the reward is an exact match of the
FINAL answer, so a model learns to keep right answers and fix wrong ones under doubt. Answers are
written as `\\boxed{N}`, optionally after a `<think>...</think>` block. Metrics say whether the
first answer was right and whether the model changed its answer when asked.
"""

from __future__ import annotations

from rlve.envs.arithmetic import parse_integer, question_rows
from rlve.envs.base import MultiTurnEnv, State, require_int
from rlve.envs.parsers import ThinkParser, assistant_texts, extract_boxed
from rlve.envs.rubric import Rubric
from rlve.types import Message

SYSTEM_PROMPT = """Solve the arithmetic problem. You may reason step by step inside \
<think>...</think> first. Then give your final answer, an integer, as \\boxed{N}.
Example:
<think>12 * 3 = 36, and 36 + 5 = 41.</think>
\\boxed{41}"""

ARE_YOU_SURE = "Are you sure?"
MAX_TURNS = 2
"""model turns: the first answer, then the answer given when asked to double-check"""


def parsed_answers(completion: list[Message], parser: ThinkParser) -> list[int | None]:
    """The integer answer of each assistant message, in order (None where there is none)."""
    return [parse_integer(parser.parse(text)) for text in assistant_texts(completion)]


def _matches(parsed: int | None, answer: str) -> bool:
    return parsed is not None and parsed == int(answer)


def final_answer_correct(completion: list[Message], answer: str, parser: ThinkParser) -> float:
    """1 if the LAST assistant message's boxed answer equals the answer, else 0.

    Only the last message counts: falling back to an earlier answer would reward a model that
    gives up on the second turn.
    """
    answers = parsed_answers(completion, parser)
    return float(bool(answers) and _matches(answers[-1], answer))


def first_answer_correct(completion: list[Message], answer: str, parser: ThinkParser) -> float:
    """1 if the first answer (before "Are you sure?") was right."""
    answers = parsed_answers(completion, parser)
    return float(bool(answers) and _matches(answers[0], answer))


def changed_answer(completion: list[Message], parser: ThinkParser) -> float:
    """1 if the final integer differs from the first (one missing and one given counts)."""
    answers = parsed_answers(completion, parser)
    if len(answers) < 2:
        return 0.0
    return float(answers[0] != answers[-1])


class DoubleCheckEnv(MultiTurnEnv):
    """Asks "Are you sure?" after the first answer; the episode ends at `max_turns` = 2."""

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        if state["turn"] >= self.max_turns:
            return []  # the final answer is the last message; nothing follows it
        return [{"role": "user", "content": ARE_YOU_SURE}]


def load_environment(
    num_examples: int = 1000, seed: int = 0, max_operand: int = 99, max_tokens: int = 512
) -> DoubleCheckEnv:
    """Arithmetic answered twice, with "Are you sure?" in between; the final answer is scored.

    Args:
        num_examples: questions in the dataset (at least 1).
        seed: seed of the questions; the same seed gives the same questions.
        max_operand: largest operand of a question (at least 2; operands start at 2).
        max_tokens: default most tokens per model turn.
    """
    require_int("num_examples", num_examples, 1)
    require_int("max_operand", max_operand, 2)
    require_int("max_tokens", max_tokens, 1)
    parser = ThinkParser(extract_boxed)
    rubric = Rubric(parser=parser)
    rubric.add(final_answer_correct, 1.0)
    rubric.add(first_answer_correct, 0.0).add(changed_answer, 0.0)
    return DoubleCheckEnv(
        question_rows(num_examples, seed, 2, 3, 2, max_operand),  # 2-3 operands: easy to slip
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=MAX_TURNS,
        name="double_check",
        sampling={"max_tokens": max_tokens},
    )
