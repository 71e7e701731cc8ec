import asyncio
import threading

import pytest

from rlve.envs.parsers import XMLParser
from rlve.envs.rubric import Rubric


def score(rubric, n=1, **columns):
    defaults = dict(
        prompts=[[{"role": "user", "content": "q"}]] * n,
        completions=[[{"role": "assistant", "content": "<answer>4</answer>"}]] * n,
        answers=["4"] * n,
        states=[{} for _ in range(n)],
        infos=[{}] * n,
    )
    defaults.update(columns)
    return asyncio.run(rubric.score_group(**defaults))


def test_weighted_sum_and_raw_values_as_metrics():
    def correct(completion, answer, parser):
        return float(parser.parse_answer(completion) == answer)

    def length(completion):
        return float(len(completion[0]["content"]))

    rubric = Rubric([correct, length], weights=[1.0, 0.5], parser=XMLParser(["answer"]))
    (s,) = score(rubric)
    # correct = 1, length = len("<answer>4</answer>") = 8 + 1 + 9 = 18: reward = 1 + 0.5 * 18 = 10
    assert s.reward == 10.0
    assert s.metrics == {"reward/correct": 1.0, "reward/length": 18.0}
    assert s.errors == {}


def test_zero_weight_function_is_a_metric_only():
    def one():
        return 1.0

    def seven():
        return 7.0

    (s,) = score(Rubric().add(one, 1.0).add(seven, 0.0))
    assert s.reward == 1.0
    assert s.metrics["reward/seven"] == 7.0


def test_raising_function_scores_zero_and_is_counted():
    def broken(state):
        raise RuntimeError("boom")

    def nan(state):
        return float("nan")

    def fine():
        return 2.0

    rubric = Rubric().add(broken).add(nan).add(fine, 0.5)
    scores = score(rubric, n=3)
    assert [s.reward for s in scores] == [1.0, 1.0, 1.0]
    assert all(s.errors == {"broken": 1, "nan": 1} for s in scores)
    assert scores[0].metrics["reward/broken"] == 0.0
    assert scores[0].error == "broken: RuntimeError: boom"  # the first failure's message


def test_a_function_that_hangs_scores_zero_after_the_time_limit():
    released = threading.Event()

    def stuck():  # a plain function: cut off in its thread (the test would wait an hour if not)
        released.wait(3600)
        return 9.0

    async def stalled():
        await asyncio.sleep(3600)
        return 9.0

    def fine():
        return 2.0

    try:
        (s,) = score(Rubric(time_limit_s=1.0).add(stuck).add(stalled).add(fine, 0.5))
    finally:
        released.set()
    assert s.reward == 1.0 and s.errors == {"stuck": 1, "stalled": 1}  # 0 + 0 + 0.5 * 2
    assert s.error == "stuck: no value within 1.0 s (the rubric's time limit)"


def test_the_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="time_limit_s must be None or > 0, got 0"):
        Rubric(time_limit_s=0)


def test_async_functions_and_state_info_arguments():
    async def from_state(state, info):
        return state["x"] * info["scale"]

    (s,) = score(Rubric().add(from_state), states=[{"x": 3}], infos=[{"scale": 2}])
    assert s.reward == 6.0


def test_group_function_sees_the_whole_group():
    def rank(completions, answers):
        lengths = [len(c[0]["content"]) for c in completions]
        return [float(sorted(lengths).index(n)) for n in lengths]

    completions = [[{"role": "assistant", "content": "x" * n}] for n in (3, 1, 2)]
    rubric = Rubric().add_group(rank, 2.0)
    scores = score(rubric, n=3, completions=completions)
    assert [s.reward for s in scores] == [4.0, 0.0, 2.0]


def test_group_function_returning_the_wrong_count_is_an_error_not_a_crash():
    def short(completions):
        return [1.0]

    scores = score(Rubric().add_group(short), n=2)
    assert [s.errors for s in scores] == [{"short": 1}, {"short": 1}]


def test_unknown_parameter_name_is_rejected_with_the_allowed_names():
    def bad(response):
        return 1.0

    with pytest.raises(
        ValueError, match=r"\[.response.\]; it may ask for any of \[.prompt., .completion."
    ):
        Rubric().add(bad)


def test_weights_must_match_functions():
    with pytest.raises(ValueError, match="2 reward functions but 1 weights"):
        Rubric([lambda: 1.0, lambda: 2.0], weights=[1.0])
