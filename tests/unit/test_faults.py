"""Faults in the middle of a run: a generator, a verifier, an environment and an engine that fail
or hang on known problems are counted exactly, the batch completes, and past
`rollout.max_fault_rate` the collector stops with a message that names each kind."""

import asyncio
import time

import pytest

from rlve.config import RolloutConfig
from rlve.curriculum import DifficultyController
from rlve.envs.base import MultiTurnEnv
from rlve.envs.gym.builtin import SortingEnv
from rlve.envs.gym.verifiable import Problem, VerifiableEnv
from rlve.envs.gym.wrapper import VerifiableSingleTurnEnv
from rlve.evaluation import evaluate
from rlve.inference.engine import Generation
from rlve.inference.scripted import ScriptedEngine
from rlve.inference.vllm_engine import EngineDiedError
from rlve.rollout.chat_tokens import ChatTokens
from rlve.rollout.collector import BatchCollector
from rlve.rollout.episode import EpisodeSettings
from rlve.rollout.faults import TooManyFaults
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.runner import GroupJob, play_groups
from rlve.rollout.step_summary import step_metrics
from rlve.types import Fault

EVERY_KIND = {
    1: "generator_error",
    2: "env_error",
    3: "generator_hang",
    4: "verifier_error",
    5: "verifier_hang",
    6: "engine_error",
    7: "timeout",
}
"""what goes wrong with the n-th problem the sampler asks for (from 0); the others are clean.
With groups of 2, a step of 7 groups asks for 9 problems (two generations fail) and plays 14
episodes: 4 clean (problems 0 and 8), 2 env_error, 4 verifier_error, 2 engine_error, 2 timeout."""

LIMIT_S = 2.0
"""every time limit of these tests: a clean call stays far below it even on a loaded machine"""
HANG_S = 30.0
"""how long a hung generator or verifier sleeps (in a daemon thread): far past LIMIT_S"""


class FaultyEnv(VerifiableSingleTurnEnv):
    """rlve/sorting with the faults of `plan` injected, by the order problems are generated."""

    def __init__(self, plan: dict[int, str]):
        super().__init__(SortingEnv(), num_examples=1, sandbox=False)
        self.rubric.add(self.checked_twice, 0.0)
        self.rubric.time_limit_s = LIMIT_S
        self.plan = plan
        self.asked = 0

    def make_example(self, seed, difficulty, example_id=None):
        if example_id is not None:  # the fixed dataset, made by __init__
            return super().make_example(seed, difficulty, example_id)
        fault = self.plan.get(self.asked, "")
        self.asked += 1
        if fault == "generator_error":
            raise RuntimeError(f"no problem for seed {seed}")
        if fault == "generator_hang":
            time.sleep(HANG_S)
        example = super().make_example(seed, difficulty)
        example.info["inject"] = fault
        example.prompt[-1]["content"] += f" [{fault}]"  # what the engine sees
        return example

    async def env_response(self, messages, state):
        if state["info"]["inject"] == "env_error":
            raise RuntimeError("the environment lost its board")
        if state["info"]["inject"] == "timeout":
            await asyncio.sleep(3600)
        return []

    def checked_twice(self, info) -> float:
        """A second verifier: raises or hangs where the plan says so."""
        if info["inject"] == "verifier_error":
            raise ValueError("the checker fell over")
        if info["inject"] == "verifier_hang":
            time.sleep(HANG_S)
        return 1.0


def policy(messages) -> str:
    if "[engine_error]" in messages[-1]["content"]:
        raise ConnectionError("the engine dropped the request")
    return "<answer>1 2 3</answer>"


def faulty_collector(plan: dict[int, str], **rollout) -> BatchCollector:
    env = FaultyEnv(plan)
    sampler = ProblemSampler({env.name: env}, controller=DifficultyController(), seed=0)
    config = RolloutConfig(engine="scripted", group_size=2, generate_time_limit_s=LIMIT_S,
                           **rollout)  # fmt: skip
    settings = EpisodeSettings(time_limit_s=LIMIT_S)
    return BatchCollector(ScriptedEngine(policy), sampler, config, settings)


def test_every_injected_fault_is_counted_and_the_batch_completes():
    # a window of 17 is not full after 16 entries (14 episodes + 2 failed generations): not judged
    collector = faulty_collector(EVERY_KIND, groups_per_step=7, max_fault_rate=0.5,
                                 fault_window=17)  # fmt: skip
    batch = collector.collect()
    collector.close()
    assert len(batch.groups) == 7 and collector.sampler.envs["rlve/sorting"].asked == 9
    metrics = step_metrics(batch, collector.sampler, waited_s=0.0)
    assert {k: v for k, v in metrics.items() if k.startswith("faults/")} == {
        "faults/generator_error": 2.0,
        "faults/env_error": 2.0,
        "faults/engine_error": 2.0,
        "faults/timeout": 2.0,
        "faults/verifier_error": 4.0,
        "faults/rate": 12 / 16,
    }
    stops = [g.trajectories[0].stop_reason for g in batch.groups]
    assert stops == ["max_turns_reached", "env_error", "max_turns_reached", "max_turns_reached",
                     "engine_error", "timeout", "max_turns_reached"]  # fmt: skip
    # the second verifier scores 0 where it raised or hung, 1 where it worked
    checked = [g.trajectories[0].metrics["reward/checked_twice"] for g in batch.groups]
    assert checked == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    hung = batch.groups[3].trajectories[0].fault
    assert hung == Fault("verifier_error", "checked_twice: no value within 2.0 s (the rubric's "
                         "time limit)")  # fmt: skip
    late = batch.groups[5].trajectories[0].fault
    assert late == Fault("timeout", "no end within the episode time limit (2.0 s)")


def test_past_the_fault_rate_the_collector_stops_and_names_each_kind():
    # 6 problems asked for, one fails: 10 episodes, 6 of them faulty, + 1 = 7 faults of 11 entries
    plan = {1: "generator_error", 2: "env_error", 3: "verifier_error", 4: "engine_error"}
    collector = faulty_collector(plan, groups_per_step=5, max_fault_rate=0.5, fault_window=11)
    with pytest.raises(TooManyFaults) as stopped:
        collector.collect()
    collector.close()
    message = str(stopped.value)
    assert message.startswith(
        "7 of the last 11 episodes and problem generations were faulty (63.6%), more than "
        "rollout.max_fault_rate=0.5 allows over rollout.fault_window=11: generator_error 1 (e.g. "
        "'rlve/sorting (seed "
    )
    for part in [
        "RuntimeError: no problem for seed",
        "; env_error 2 (e.g. 'RuntimeError: the environment lost its board')",
        "; engine_error 2 (e.g. 'ConnectionError: the engine dropped the request')",
        "; verifier_error 2 (e.g. 'checked_twice: ValueError: the checker fell over')",
    ]:
        assert part in message


def play_one(env, engine, **settings):
    jobs = [GroupJob(env, env.example(0), seed=0)]
    (group,) = asyncio.run(play_groups(engine, jobs, 1, EpisodeSettings(**settings)))
    return group.trajectories[0]


class FailingEngine:
    """An engine whose every request raises `error`."""

    tokenizer = None

    def __init__(self, error: Exception):
        self.error = error

    async def generate(self, request) -> Generation:
        raise self.error


def test_an_engine_request_that_times_out_ends_its_episode_but_a_dead_engine_stops_the_batch():
    env = VerifiableSingleTurnEnv(SortingEnv(), num_examples=1, sandbox=False)
    late = play_one(env, FailingEngine(TimeoutError("no answer within 600 s")), time_limit_s=60.0)
    assert late.stop_reason == "engine_error"
    assert late.fault == Fault("engine_error", "TimeoutError: no answer within 600 s")
    with pytest.raises(EngineDiedError, match="the engine process died"):
        play_one(env, FailingEngine(EngineDiedError("the engine process died")))


class RaisingChecker(VerifiableEnv):
    """A generator that works and a verifier that raises."""

    name = "test/raising-checker"

    def generate(self, seed, difficulty):
        return Problem("Say 1.", {})

    def check(self, problem, answer):
        raise ZeroDivisionError("division by zero")


def test_an_in_process_verifier_that_raises_is_a_verifier_error_with_the_format_penalty():
    env = VerifiableSingleTurnEnv(RaisingChecker(), num_examples=1, sandbox=False)
    t = play_one(env, ScriptedEngine(lambda messages: "<answer>1</answer>"))
    assert t.reward == -1.0  # the wrapper's format failure, as for a sandboxed verifier's crash
    assert t.fault == Fault(
        "verifier_error", "verifier raised ZeroDivisionError('division by zero')"
    )


class SurrogateReplyEnv(MultiTurnEnv):
    """Replies with a lone surrogate, as a REPL cell that prints '\\ud800' does: text a
    tokenizer refuses, and a forged log line in its errors."""

    async def env_response(self, messages, state):
        if state["turn"] == 2:
            raise RuntimeError("\x1b[2K\rINFO rlve.loop: step 9 reward 1.000")
        return [{"role": "user", "content": "the cell printed: \ud800"}]


def test_a_reply_with_a_lone_surrogate_is_read_as_a_replacement_character(tiny_tokenizer):
    env = SurrogateReplyEnv([{"question": "print something"}], max_turns=3)
    engine = ScriptedEngine(lambda messages: "print('\\ud800')", tiny_tokenizer)
    (trajectory,) = evaluate(env, engine, 1, 1).groups[0].trajectories
    assert trajectory.completion[1]["content"] == "the cell printed: \ufffd"
    assert trajectory.num_turns == 2  # the second turn was played on the cleaned reply


def test_an_exception_inside_an_episode_is_its_env_error_logged_without_escapes(
    tiny_tokenizer, monkeypatch, caplog
):
    """The environment's error text tries to forge a log line; a tokenizer that raises on a
    reply (any exception there) ends the episode as well, never the batch."""
    env = SurrogateReplyEnv([{"question": "print something"}], max_turns=3)
    engine = ScriptedEngine(lambda messages: "print(1)", tiny_tokenizer)
    (forged,) = evaluate(env, engine, 1, 1).groups[0].trajectories
    assert forged.stop_reason == "env_error"
    assert forged.fault.message == "RuntimeError: \\x1b[2K\\rINFO rlve.loop: step 9 reward 1.000"
    assert "\x1b" not in caplog.text and "\\x1b[2K" in caplog.text

    def refuse(self, last_ids, reply):
        raise TypeError("TextEncodeInput must be Union[...]")

    monkeypatch.setattr(ChatTokens, "reply_ids", refuse)
    (refused,) = evaluate(env, engine, 1, 1).groups[0].trajectories
    assert refused.fault == Fault(
        "env_error",
        "tokenizing the environment's reply: TypeError: TextEncodeInput must be Union[...]",
    )
    assert refused.num_turns == 1  # the first turn stays, trained on as played
