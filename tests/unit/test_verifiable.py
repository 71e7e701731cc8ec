"""The verifiable environment layer: interface, wrapper, adapters, sandboxed verification, names."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlve.envs import expand_env_names
from rlve.envs.gym.builtin import MultiplicationEnv, SortingEnv, TicTacToeBestMoveEnv
from rlve.envs.gym.expression_screen import UnsafeExpression, screen_expression
from rlve.envs.gym.sandbox import VerifierPool
from rlve.envs.gym.sources import verifiable_env
from rlve.envs.gym.verifiable import (
    EnvironmentDisabled,
    GenerationStats,
    Problem,
    Verdict,
    VerifiableEnv,
    generate_with_retries,
)
from rlve.envs.gym.wrapper import WORKER_MODULES, VerifiableSingleTurnEnv, warmed_pool
from rlve.envs.registry import list_environments
from rlve.envs.tictactoe.game import EMPTY, best_moves, board_from_string

# ---------------------------------------------------------------- helpers


async def score(env: VerifiableSingleTurnEnv, example, text: str) -> dict[str, float]:
    """Score one completion through the env's rubric: reward plus every metric."""
    completion = [{"role": "assistant", "content": text}]
    state: dict = {}
    [result] = await env.rubric.score_group(
        [example.prompt], [completion], [example.answer], [state], [example.info]
    )
    return {"reward": result.reward, **result.metrics, **env.episode_metrics(state)}


class SleepingEnv(VerifiableEnv):
    """Test-only: a verifier that never returns."""

    name = "test/sleeping"

    def generate(self, seed: int, difficulty: int) -> Problem:
        return Problem("Say anything.", {}, {}, "x")

    def check(self, problem: Problem, answer: str) -> Verdict:
        time.sleep(3600)
        return self.verdict(1.0)


class FailingEnv(VerifiableEnv):
    """Test-only: a generator that fails for seeds below `works_from`."""

    name = "test/failing"

    def __init__(self, works_from: int):
        self.works_from = works_from

    def generate(self, seed: int, difficulty: int) -> Problem:
        if seed < self.works_from:
            raise AssertionError(f"no problem for seed {seed}")
        return Problem(f"seed {seed}", {}, {})

    def check(self, problem: Problem, answer: str) -> Verdict:
        return self.verdict(1.0)


@pytest.fixture(scope="module")
def sorting_env():
    return VerifiableSingleTurnEnv(SortingEnv(), num_examples=4, difficulties=[0], sandbox=False)


# ---------------------------------------------------------------- the wrapper on a built-in env


async def test_perfect_answer_scores_one(sorting_env):
    example = sorting_env.example(0)
    metrics = await score(sorting_env, example, f"sorted: <answer>{example.answer}</answer>")
    assert metrics["reward"] == 1.0
    assert metrics["reward/accuracy"] == 1.0 and metrics["reward/format_score"] == 1.0


async def test_wrong_answers_get_the_env_rewards(sorting_env):
    example = sorting_env.example(0)
    low, middle, high = example.answer.split()
    # Reversed: only the middle of three positions is right, (1/3) ** 5 = 1/243.
    reversed_metrics = await score(sorting_env, example, f"<answer>{high} {middle} {low}</answer>")
    assert reversed_metrics["reward"] == pytest.approx(1 / 243)
    assert (
        reversed_metrics["reward/accuracy"] == 0.0
        and reversed_metrics["reward/format_score"] == 1.0
    )
    # Two numbers instead of three: an invalid solution, -0.5.
    short = await score(sorting_env, example, f"<answer>{low} {middle}</answer>")
    assert short["reward"] == -0.5


async def test_missing_answer_is_a_format_failure(sorting_env):
    example = sorting_env.example(0)
    metrics = await score(sorting_env, example, example.answer)  # right numbers, no tags
    assert metrics["reward"] == -1.0
    assert metrics["reward/format_score"] == 0.0 and metrics["reward/accuracy"] == 0.0


async def test_the_binary_reward_pays_only_a_correct_answer():
    env = VerifiableSingleTurnEnv(SortingEnv(), num_examples=1, difficulties=[0], sandbox=False,
                                  reward="binary")  # fmt: skip
    example = env.example(0)
    low, middle, high = example.answer.split()
    honest = await score(env, example, f"<answer>{example.answer}</answer>")
    assert honest["reward"] == 1.0
    near_miss = f"<answer>{high} {middle} {low}</answer>"  # shaped: 1/243
    cheats = [near_miss, example.answer, "", "<answer></answer>", "<answer>" + "9 " * 10_000]
    for text in cheats:  # wrong, unformatted, empty, stalled, flooded: all 0, none below
        metrics = await score(env, example, text)
        assert metrics["reward"] == 0.0, text[:40]
    with pytest.raises(ValueError, match=r"reward must be one of \['shaped', 'binary'\]"):
        VerifiableSingleTurnEnv(SortingEnv(), num_examples=1, sandbox=False, reward="dense")


def test_same_seed_and_difficulty_give_the_same_problem():
    env = VerifiableSingleTurnEnv(TicTacToeBestMoveEnv(), num_examples=1, sandbox=False)
    first, again = env.make_example(11, 1), env.make_example(11, 1)
    assert first == again
    assert env.make_example(12, 1).prompt != first.prompt
    assert first.info["difficulty"] == 1 and first.info["seed"] == 11
    other_instance = VerifiableSingleTurnEnv(TicTacToeBestMoveEnv(), num_examples=1, sandbox=False)
    assert other_instance.make_example(11, 1) == first


def test_dataset_rows_carry_seed_difficulty_and_problem():
    env = VerifiableSingleTurnEnv(
        MultiplicationEnv(), num_examples=4, seed=100, difficulties=[0, 2], sandbox=False
    )
    infos = [env.example(i).info for i in range(4)]
    assert [(i["seed"], i["difficulty"]) for i in infos] == [(100, 0), (101, 2), (102, 0), (103, 2)]
    problem = Problem.from_json(infos[1]["problem"])
    a, b = problem.data["a"], problem.data["b"]
    assert problem.reference_answer == str(a * b) and 100 <= a <= 999 and 100 <= b <= 999


def test_difficulty_raises_the_size_parameter():
    assert [len(SortingEnv().generate(0, d).data["numbers"]) for d in range(4)] == [3, 5, 7, 9]
    fine = verifiable_env("rlve/sorting_fine")
    assert [len(fine.generate(0, d).data["numbers"]) for d in range(4)] == [3, 4, 5, 6]
    assert [MultiplicationEnv().generate(0, d).parameters["digits"] for d in range(3)] == [1, 2, 3]
    for d, pieces in enumerate([6, 4, 2, 0, 0]):
        board = board_from_string(TicTacToeBestMoveEnv().generate(d, d).data["board"])
        assert 9 - board.count(EMPTY) == pieces


def test_tictactoe_rewards_best_other_and_occupied_cells():
    env = TicTacToeBestMoveEnv()
    problem = env.generate(3, 0)
    board = board_from_string(problem.data["board"])
    best = best_moves(board, "X")
    worse = [c for c in range(9) if board[c] == EMPTY and c not in best]
    taken = next(c for c in range(9) if board[c] != EMPTY)
    assert env.verify(problem, f"<answer>{best[0]}</answer>").reward == 1.0
    if worse:
        assert env.verify(problem, f"<answer>{worse[0]}</answer>").reward == 0.0
    assert env.verify(problem, f"<answer>{taken}</answer>").reward == -0.5
    assert env.verify(problem, "<answer>centre</answer>") == Verdict(
        -1.0, False, False, "the answer is not a cell number"
    )


def test_boxed_answers_when_configured():
    env = MultiplicationEnv()
    env.answer_format = "boxed"
    problem = env.generate(1, 1)
    assert env.verify(problem, f"so \\boxed{{{problem.reference_answer}}}").reward == 1.0
    assert env.verify(problem, f"<answer>{problem.reference_answer}</answer>").reward == -1.0


# ---------------------------------------------------------------- adapters (in process)


def test_rlve_gym_difficulty_steps_the_parameter_controller():
    # Sorting's controller starts at N = 3 and updates N <- int(1.1 N + 1): 3, 4, 5, 6.
    env = verifiable_env("rlve-gym/Sorting")
    assert [env.generate(0, d).parameters["N"] for d in range(4)] == [3, 4, 5, 6]
    problem = env.generate(0, 2)
    assert env.verify(problem, f"<answer>{problem.reference_answer}</answer>") == Verdict(
        1.0, True, True
    )
    assert env.verify(problem, "no tags").reward == -1.0


def test_reasoning_gym_score_maps_to_two_score_minus_one():
    env = verifiable_env("reasoning-gym/basic_arithmetic")
    problem = env.generate(3, 1)
    ref = problem.reference_answer
    assert env.verify(problem, f"<answer>{ref}</answer>") == Verdict(1.0, True, True)
    # The default scorer gives len(oracle) / len(answer) = 0.5 when the oracle is half the answer:
    # reward 2 * 0.5 - 1 = 0.
    half = env.verify(problem, f"<answer>{'x' * len(ref)}{ref}</answer>")
    assert half.reward == 0.0 and not half.accuracy and half.format_ok
    assert env.verify(problem, "the answer is 5").reward == -1.0


def test_generation_failures_retry_then_disable():
    stats = GenerationStats()
    problem, seed = generate_with_retries(FailingEnv(works_from=13), 10, 0, stats=stats)
    assert (seed, problem.prompt, stats.failures, stats.generated) == (13, "seed 13", 3, 1)
    with pytest.raises(EnvironmentDisabled, match="5 seeds in a row \\(20..24\\)"):
        generate_with_retries(FailingEnv(works_from=99), 20, 0)


# ---------------------------------------------------------------- the pool path


@pytest.fixture(scope="module")
def gym_pool():
    pool = warmed_pool(VerifierPool(1, 180.0, 2048), WORKER_MODULES, 10.0)
    yield pool
    pool.close()


async def test_hostile_outputs_get_format_failure_without_side_effects(gym_pool, tmp_path: Path):
    env = VerifiableSingleTurnEnv(
        verifiable_env("rlve-gym/Differentiate"),
        num_examples=1,
        verify_pool=gym_pool,
        generate_pool=gym_pool,
    )
    example = env.example(0)
    sentinel = tmp_path / "sentinel"
    payload = f"__import__('os').system('touch {sentinel}')"
    with pytest.raises(UnsafeExpression):  # what stops sympify's eval from running it
        screen_expression(payload)
    hostile = [
        f"<answer>{payload}</answer>",
        "<answer>" + "x+" * 500_000 + "x</answer>",  # 1 MB answer
        "<answer>" * 130_000,  # 1 MB of unclosed tags: no answer
        "<answer>" + "(" * 100_000 + "x" + ")" * 100_000 + "</answer>",
    ]
    for text in hostile:
        metrics = await score(env, example, text)
        assert metrics["reward"] == -1.0 and metrics["reward/format_score"] == 0.0
        assert metrics["verify/timeouts"] == 0.0 and metrics["verify/crashes"] == 0.0
    assert not sentinel.exists()
    # The same pool still verifies a right answer.
    right = await score(env, example, f"<answer>{example.answer}</answer>")
    assert right["reward"] == 1.0


async def test_a_verifier_that_hangs_times_out():
    pool = warmed_pool(VerifierPool(1, 180.0, None), [__name__], 1.0)
    try:
        env = VerifiableSingleTurnEnv(
            SleepingEnv(), num_examples=1, verify_pool=pool, generate_pool=pool
        )
        metrics = await score(env, env.example(0), "<answer>x</answer>")
    finally:
        pool.close()
    assert metrics["reward"] == -1.0 and metrics["reward/format_score"] == 0.0
    assert metrics["verify/timeouts"] == 1.0 and metrics["verify/errors"] == 0.0


# ---------------------------------------------------------------- names


def test_list_environments_has_every_family():
    names = list_environments()
    assert len(names) > 500
    assert sum(n.startswith("rlve-gym/") for n in names) == 400
    assert {"rlve/sorting", "reasoning-gym/basic_arithmetic", "tictactoe"} <= set(names)


def test_expand_env_names_resolves_globs_and_refuses_unknown_patterns():
    assert expand_env_names(["rlve/s*", "rlve-gym/Sorting", "rlve/sorting"]) == [
        "rlve/sorting",
        "rlve/sorting_fine",
        "rlve-gym/Sorting",
    ]
    assert "rlve-gym/SubsetSum" in expand_env_names(["rlve-gym/Subset*"])
    with pytest.raises(ValueError, match="'rlve-gym/Zzz\\*' matches no environment"):
        expand_env_names(["rlve/sorting", "rlve-gym/Zzz*"])
    with pytest.raises(ValueError, match="rlve/sorting"):
        expand_env_names(["rlve/sortin"])  # an exact name with a typo lists close ones


def test_reasoning_gym_problems_ignore_the_global_decimal_precision():
    # decimal_arithmetic sets getcontext().prec globally; other tasks must not see it.
    import decimal

    env = verifiable_env("reasoning-gym/decimal_chain_sum")
    reference = env.generate(0, 2)
    context = decimal.getcontext()
    saved, context.prec = context.prec, 3
    try:
        assert env.generate(0, 2) == reference
    finally:
        context.prec = saved


def test_eval_parsed_answers_must_be_literals_or_unable_to_call():
    from rlve.envs.gym.reasoning_gym import screen_python_literal

    assert screen_python_literal("['a', 'b']") == "['a', 'b']"
    assert screen_python_literal("abc") == "abc"
    with pytest.raises(UnsafeExpression):
        screen_python_literal("__import__('os').system('true')")
    with pytest.raises(UnsafeExpression):
        screen_python_literal("[exit()]")
