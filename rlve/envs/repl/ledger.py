"""`python_repl/ledger`: a long ledger in a REPL variable; sum one account's coins.

The ledger (`context`) has 40 * 2**d lines like "Day 17: account KX4 received 312 coins."; the
target account appears on d + 1 of them (the facts to combine), the rest are other accounts.
The answer is the sum, given with FINAL(). Difficulty d therefore grows both the input length
and the number of facts; `make_example(seed, difficulty)` serves the curriculum.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence
from typing import Any

from rlve.envs.base import State, require_int
from rlve.envs.repl.env import PythonREPLEnv
from rlve.envs.repl.process import REPLLimits
from rlve.envs.rubric import Rubric
from rlve.types import Example, Message

SYSTEM_PROMPT = """You work in a persistent Python REPL. Write code in ```python ... ``` blocks; \
you will see what it prints and the value of its last line. Variables persist between turns. \
The input is in the variable `context`. `llm(prompt)` asks a language model and returns its \
answer. When you know the answer, call FINAL(answer) in the REPL."""

MAX_DIFFICULTY = 10


def account_name(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_uppercase, k=2)) + str(rng.randrange(10))


def make_ledger(seed: int, difficulty: int) -> tuple[str, str, int, int]:
    """(ledger text, target account, its total, lines): 40 * 2**d lines, d + 1 of them for the
    target account."""
    rng = random.Random(seed)
    lines_count = 40 * 2**difficulty
    target = account_name(rng)
    others = sorted({account_name(rng) for _ in range(30)} - {target})
    rows = [(target, rng.randint(1, 999)) for _ in range(difficulty + 1)]
    rows += [(rng.choice(others), rng.randint(1, 999)) for _ in range(lines_count - len(rows))]
    rng.shuffle(rows)
    text = "\n".join(f"Day {i // 4 + 1}: account {account} received {coins} coins."
                     for i, (account, coins) in enumerate(rows))  # fmt: skip
    return text, target, sum(c for a, c in rows if a == target), lines_count


def final_answer_reward(state: State, answer: str) -> float:
    """1 when the answer given to FINAL() is the total (spaces aside)."""
    given = state.get("final_answer")
    return float(given is not None and given.strip() == answer)


class LedgerEnv(PythonREPLEnv):
    """The ledger task; generates problems at any difficulty for the curriculum."""

    def make_example(self, seed: int, difficulty: int, example_id: int | None = None) -> Example:
        difficulty = min(difficulty, MAX_DIFFICULTY)
        row = ledger_row(seed, difficulty)
        prompt = [{"role": "system", "content": SYSTEM_PROMPT},
                  {"role": "user", "content": row["question"]}]  # fmt: skip
        return Example(seed if example_id is None else example_id, prompt, row["answer"],
                       row["info"])  # fmt: skip


def ledger_row(seed: int, difficulty: int) -> dict[str, Any]:
    text, target, total, lines = make_ledger(seed, difficulty)
    question = (f"The ledger in `context` has {lines} lines. How many coins did account "
                f"{target} receive in total?")  # fmt: skip
    info = {"context": text, "difficulty": difficulty, "seed": seed}
    return {"question": question, "answer": str(total), "info": info}


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulties: Sequence[int] = (0, 1, 2),
    max_turns: int = 6,
    max_tokens: int = 512,
    wall_s: float = 10.0,
    cpu_s: float = 10.0,
    memory_mb: int = 1024,
    max_llm_calls: int = 8,
    train_on_sub_calls: bool = False,
) -> LedgerEnv:
    """Sum an account's coins in a long ledger held in a REPL variable.

    Args:
        num_examples: questions in the dataset (at least 1).
        seed: seed of the ledgers.
        difficulties: difficulties in turn (0..10): 40 * 2**d lines, d + 1 facts.
        max_turns: most model turns.
        max_tokens: default most tokens per model turn.
        wall_s: wall-clock limit of one cell.
        cpu_s: CPU limit of one cell.
        memory_mb: memory limit of the REPL worker.
        max_llm_calls: llm() calls per episode.
        train_on_sub_calls: train on the llm() answers too, with the episode's advantage.
    """
    require_int("num_examples", num_examples, 1)
    difficulties = list(difficulties)
    if not difficulties or any(not 0 <= d <= MAX_DIFFICULTY for d in difficulties):
        raise ValueError(f"difficulties must be in 0..{MAX_DIFFICULTY}, got {difficulties!r}")
    rows = [ledger_row(seed + i, difficulties[i % len(difficulties)]) for i in range(num_examples)]
    rubric = Rubric()
    rubric.add(final_answer_reward, 1.0)
    return LedgerEnv(
        rows,
        system_prompt=SYSTEM_PROMPT,
        rubric=rubric,
        max_turns=max_turns,
        name="python_repl/ledger",
        sampling={"max_tokens": max_tokens},
        limits=REPLLimits(wall_s=wall_s, cpu_s=cpu_s, memory_mb=memory_mb),
        max_llm_calls=max_llm_calls,
        train_on_sub_calls=train_on_sub_calls,
    )


FENCE = "`" * 3


def reference_policy(messages: list[Message]) -> str:
    """A scripted solver (a baseline and a teacher): one cell that sums the account's lines."""
    question = next(str(m["content"]) for m in messages if m["role"] == "user")
    account = re.search(r"did account (\w+) receive", question)
    code = (
        "import re\npairs = re.findall(r'account (\\w+) received (\\d+)', context)\n"
        f"FINAL(sum(int(n) for a, n in pairs if a == {account.group(1) if account else ''!r}))"
    )
    return f"{FENCE}python\n{code}\n{FENCE}"
