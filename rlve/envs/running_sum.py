"""RunningSum: numbers arrive one per turn, and each answer states the running total so far.

The smallest environment whose intermediate claims are verified: every answer's `\\boxed{N}` is a
partial result the environment checks when it arrives, and a right one earns its share of the
`partial_weight` reward at its own turn (`reward_turn`), so under `trainer.credit=turn` the turn
that added wrongly is the one that pays. The last answer is the final total (weight 1). The
tic-tac-toe environment does the same with the threats an answer states (`threats_weight`).
"""

from __future__ import annotations

import random

from rlve.envs.arithmetic import parse_integer
from rlve.envs.base import MultiTurnEnv, State, require_int
from rlve.envs.parsers import ThinkParser, assistant_texts, extract_boxed
from rlve.envs.rubric import Rubric
from rlve.types import Message

SYSTEM_PROMPT = """I will give you numbers one at a time. After each number, add it to the \
numbers before it and give the running total as \\boxed{N}. You may reason inside \
<think>...</think> first."""

PARTIAL_WEIGHT = 0.5
"""the default weight of the share of right running totals"""


def rows(num_examples: int, seed: int, min_terms: int, max_terms: int, max_number: int) -> list:
    """Per example: the numbers (2..max_number, min_terms..max_terms of them) and the first
    prompt; the answer is the total."""
    rng = random.Random(seed)
    out = []
    for _ in range(num_examples):
        numbers = [rng.randint(2, max_number) for _ in range(rng.randint(min_terms, max_terms))]
        out.append({"question": f"The first number is {numbers[0]}.",
                    "answer": str(sum(numbers)), "info": {"numbers": numbers}})  # fmt: skip
    return out


def totals_stated_right(state: State) -> float:
    """Share of the numbers whose running total an answer stated right."""
    numbers = state["info"]["numbers"]
    return state.get("right_totals", 0) / len(numbers)


def final_total_correct(completion: list[Message], answer: str, parser: ThinkParser) -> float:
    """1 when the last answer's boxed integer is the total of every number."""
    texts = assistant_texts(completion)
    return float(bool(texts) and parse_integer(parser.parse(texts[-1])) == int(answer))


class RunningSumEnv(MultiTurnEnv):
    """One number per turn; checks each stated running total (see the module docstring)."""

    partial_weight: float = PARTIAL_WEIGHT

    async def setup_state(self, state: State) -> None:
        state.update(total=0, right_totals=0)

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        numbers = state["info"]["numbers"]
        turn = state["turn"]  # answers so far: the one just given answered numbers[turn - 1]
        state["total"] += numbers[turn - 1]
        stated = parse_integer(self.parser.parse(str(messages[-1].get("content") or "")))
        if stated == state["total"]:
            state["right_totals"] += 1
            self.reward_turn(state, self.partial_weight / len(numbers))
        if turn == len(numbers):
            self.end_episode(state)
            return []
        return [{"role": "user", "content": f"The next number is {numbers[turn]}."}]


def load_environment(
    num_examples: int = 1000, seed: int = 0, min_terms: int = 3, max_terms: int = 5,
    max_number: int = 99, partial_weight: float = PARTIAL_WEIGHT, max_tokens: int = 256,
) -> RunningSumEnv:  # fmt: skip
    """Running totals told one number at a time; the last is the answer.

    Args:
        num_examples: problems in the dataset (at least 1).
        seed: seed of the numbers; the same seed gives the same problems.
        min_terms, max_terms: how many numbers a problem has (1 <= min_terms <= max_terms).
        max_number: largest number (at least 2).
        partial_weight: the reward for stating every running total right, each total's share
            credited at its own turn; 0 measures it (`reward/totals_stated_right`) only.
        max_tokens: default most tokens per model turn.
    """
    require_int("num_examples", num_examples, 1)
    require_int("min_terms", min_terms, 1)
    require_int("max_terms", max_terms, min_terms)
    require_int("max_number", max_number, 2)
    if not partial_weight >= 0:
        raise ValueError(f"partial_weight must be >= 0, got {partial_weight!r}")
    parser = ThinkParser(extract_boxed)
    rubric = Rubric(parser=parser)
    rubric.add(final_total_correct, 1.0).add(totals_stated_right, partial_weight)
    env = RunningSumEnv(
        rows(num_examples, seed, min_terms, max_terms, max_number),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_terms,
        name="running_sum",
        sampling={"max_tokens": max_tokens},
    )
    env.partial_weight = partial_weight
    return env
