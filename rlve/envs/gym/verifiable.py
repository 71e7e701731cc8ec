"""The verifiable environment interface: a problem generator P_d(seed) and a verifier R.

A `VerifiableEnv` makes a `Problem` from (seed, difficulty) and scores a model's output with a
`Verdict` whose reward lies in [-1, 1] (RLVE, Zeng et al. 2025, section 2.1). The answer is read
from the last `<answer>...</answer>` (or the last `\\boxed{}`); no answer is a format failure.
This module stays light (no Gym, reasoning_gym or datasets imports of its own) because verifier
pool workers unpickle environments defined on top of it.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal

from rlve.envs.parsers import extract_boxed, last_tagged

AnswerFormat = Literal["answer_tag", "boxed"]

ANSWER_INSTRUCTIONS: dict[str, str] = {
    "answer_tag": "Think step by step, then give your final answer inside <answer>...</answer>.",
    "boxed": "Think step by step, then give your final answer inside \\boxed{}.",
}
"""the system prompt that tells the model where its answer goes, per answer format"""

MAX_FAILED_SEEDS = 5
"""generation failures in a row after which an environment is disabled"""


class GenerationFailed(RuntimeError):
    """The generator could not make a problem for this (seed, difficulty); try the next seed."""


class EnvironmentDisabled(RuntimeError):
    """An environment failed to generate for several seeds in a row; the trainer drops it."""

    def __init__(self, name: str, difficulty: int, seeds: list[int], last_error: str):
        super().__init__(
            f"environment {name!r} failed to generate a problem at difficulty {difficulty} for "
            f"{len(seeds)} seeds in a row ({seeds[0]}..{seeds[-1]}); last error: {last_error}"
        )
        self.name = name
        self.difficulty = difficulty
        self.seeds = seeds
        self.last_error = last_error


@dataclass
class Problem:
    """One generated problem: what the model sees and what the verifier needs."""

    prompt: str
    """the task text shown to the model (the answer-format instruction is added by the wrapper)"""
    data: dict[str, Any]
    """plain JSON-able data the verifier needs to score an answer"""
    parameters: dict[str, Any] = field(default_factory=dict)
    """the generator's parameters for this problem (e.g. {"length": 5}); JSON-able"""
    reference_answer: str | None = None
    """an answer that scores accuracy 1, when the environment provides one"""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Problem:
        return Problem(**json.loads(text))


@dataclass(frozen=True)
class Verdict:
    """The verifier's judgement of one output."""

    reward: float
    """in [-1, 1]: -1 wrong format, 1 correct, partial credit in between"""
    accuracy: bool
    """reward >= the environment's passing threshold: what the curriculum counts"""
    format_ok: bool
    """an answer was found and could be read"""
    detail: str = ""
    """why, when something went wrong (for logs)"""


class VerifiableEnv(ABC):
    """A problem generator and verifier. Subclasses implement `generate` and `check`.

    `check` sees only the extracted answer text; `verify` does the extraction, so every
    environment reads answers the same way. Instances are pickled to verifier workers: keep
    their state small and plain (heavy upstream objects are built lazily and not pickled).
    """

    name: str = "verifiable"
    passing_threshold: float = 1.0
    """a reward at or above this counts as correct"""
    format_penalty: float = -1.0
    """the reward of an output without a readable answer"""
    answer_format: AnswerFormat = "answer_tag"

    @abstractmethod
    def generate(self, seed: int, difficulty: int) -> Problem:
        """A problem from P_difficulty(seed); the same arguments always give the same problem.
        Raises GenerationFailed (or anything else) when this seed yields no problem."""

    @abstractmethod
    def check(self, problem: Problem, answer: str) -> Verdict:
        """Score the extracted answer text of an output."""

    @property
    def answer_instruction(self) -> str:
        return ANSWER_INSTRUCTIONS[self.answer_format]

    def extract_answer(self, output: str) -> str | None:
        """The content of the last `<answer>...</answer>` (or `\\boxed{}`), stripped; else None.
        Both scans are linear in the length of the output."""
        if self.answer_format == "boxed":
            return extract_boxed(output)
        found = last_tagged(output, "answer")
        return found[1].strip() if found is not None else None

    def verify(self, problem: Problem, output: str) -> Verdict:
        """Score a whole model output: format failure without an answer, else `check`."""
        answer = self.extract_answer(output)
        if answer is None:
            return self.format_failure("no answer found")
        return checked_verdict(self, problem, answer)

    def verdict(self, reward: float, format_ok: bool = True, detail: str = "") -> Verdict:
        """A verdict whose accuracy follows this environment's passing threshold."""
        return Verdict(float(reward), reward >= self.passing_threshold, format_ok, detail)

    def format_failure(self, detail: str) -> Verdict:
        return Verdict(self.format_penalty, False, False, detail)


def checked_verdict(env: VerifiableEnv, problem: Problem, answer: str) -> Verdict:
    """`env.check`, with its reward checked to be a number in [-1, 1] (ValueError otherwise)."""
    verdict = env.check(problem, answer)
    if not -1.0 <= verdict.reward <= 1.0:  # also refuses NaN
        raise ValueError(f"{env.name} gave reward {verdict.reward}, outside [-1, 1]")
    return verdict


def check_in_worker(env: VerifiableEnv, problem: Problem, answer: str) -> tuple:
    """The verifier pool's entry point: a verdict as a plain tuple (the pool only returns plain
    data). Module-level so that workers can unpickle it."""
    verdict = checked_verdict(env, problem, answer)
    return (verdict.reward, verdict.accuracy, verdict.format_ok, verdict.detail)


def generate_in_worker(env: VerifiableEnv, seed: int, difficulty: int) -> dict[str, Any]:
    """The generation pool's entry point: a problem as a plain dict."""
    return asdict(env.generate(seed, difficulty))


def preload_modules(names: list[str]) -> None:
    """Import modules in a worker ahead of its first real call (imports count against the
    pool's time limit)."""
    import importlib

    for name in names:
        importlib.import_module(name)


# ---------------------------------------------------------------- generation with retries


@dataclass
class GenerationStats:
    """Counters of `generate_with_retries` for one environment."""

    generated: int = 0
    failures: int = 0
    timeouts: int = 0


def call_with_timeout(fn: Callable[[], Any], timeout_s: float) -> Any:
    """`fn()` in a daemon thread; TimeoutError after `timeout_s`. A timed-out call keeps running
    in its thread (Python cannot stop it): generators are trusted code, unlike model output."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True, name="rlve-generate")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"no problem within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def generate_with_retries(
    env: VerifiableEnv,
    seed: int,
    difficulty: int,
    *,
    stats: GenerationStats | None = None,
    max_failed_seeds: int = MAX_FAILED_SEEDS,
    timeout_s: float | None = 30.0,
    generate: Callable[[int, int], Problem] | None = None,
) -> tuple[Problem, int]:
    """(problem, seed used): tries seed, seed + 1, ... until one generates.

    `generate(seed, difficulty)` replaces `env.generate` (e.g. to run it in a worker process);
    `timeout_s` bounds each call with a thread (None: no bound). Raises EnvironmentDisabled after
    `max_failed_seeds` failures (errors or timeouts) in a row.
    """
    if not isinstance(difficulty, int) or difficulty < 0:
        raise ValueError(f"difficulty must be an integer >= 0, got {difficulty!r}")
    stats = stats if stats is not None else GenerationStats()
    generate = generate or env.generate
    tried: list[int] = []
    last_error = ""
    for attempt in range(max_failed_seeds):
        current = seed + attempt
        tried.append(current)
        try:
            if timeout_s is None:
                problem = generate(current, difficulty)
            else:
                problem = call_with_timeout(partial(generate, current, difficulty), timeout_s)
        except TimeoutError as error:
            stats.failures += 1
            stats.timeouts += 1
            last_error = str(error)
            continue
        except Exception as error:  # upstream generators fail in many ways (asserts, recursion)
            stats.failures += 1
            last_error = f"{type(error).__name__}: {error}"
            continue
        stats.generated += 1
        return problem, current
    raise EnvironmentDisabled(env.name, difficulty, tried, last_error)


def json_copy(value: Any) -> Any | None:
    """`value` after a JSON round trip if that leaves it equal, else None. Tuples, int keys,
    sets and numpy values do not survive; str/int enums do, and come back as plain values. The
    copy is what a verifier can use instead of regenerating the problem."""
    try:
        copied = json.loads(json.dumps(value))
        return copied if copied == value else None
    except (TypeError, ValueError):  # not JSON-able, or numpy arrays refusing `==`
        return None
