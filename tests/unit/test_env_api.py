import asyncio

import pytest

import rlve
from rlve.envs import MultiTurnEnv, Rubric, SingleTurnEnv, stop
from rlve.inference.engine import Generation
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups

ROWS = [{"question": f"q{i}", "answer": str(i)} for i in range(4)]


class CountingEnv(MultiTurnEnv):
    """Replies with the turn number; ends the game with a final message after `end_after` turns."""

    def __init__(self, end_after=None, fail_on_turn=None, **kwargs):
        super().__init__(ROWS, **kwargs)
        self.end_after = end_after
        self.fail_on_turn = fail_on_turn

    async def env_response(self, messages, state):
        if state["turn"] == self.fail_on_turn:
            raise RuntimeError("environment bug")
        if state["turn"] == self.end_after:
            self.end_episode(state, "finished")
            return [{"role": "user", "content": "final"}]
        return [{"role": "user", "content": f"turn {state['turn']}"}]


def run(env, engine, n_examples=1, group_size=1, **settings):
    jobs = [GroupJob(env, env.example(i), seed=i) for i in range(n_examples)]
    return asyncio.run(play_groups(engine, jobs, group_size, EpisodeSettings(**settings)))


def test_dataset_has_the_four_columns_and_the_system_prompt():
    env = SingleTurnEnv(ROWS, system_prompt="be brief")
    assert env.dataset.column_names == ["prompt", "answer", "info", "example_id"]
    assert env.dataset[2]["prompt"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q2"},
    ]
    assert env.example(2).answer == "2"


def test_single_turn_episode_is_one_model_message():
    env = SingleTurnEnv(ROWS, rubric=Rubric().add(lambda completion, answer: 1.0))
    (group,) = run(env, ScriptedEngine(lambda m: "hi"))
    t = group.trajectories[0]
    assert t.completion == [{"role": "assistant", "content": "hi"}]
    assert t.stop_reason == "max_turns_reached" and t.reward == 1.0 and t.num_turns == 1


def test_multi_turn_runs_to_max_turns_and_keeps_the_last_reply_as_text():
    env = CountingEnv(max_turns=3)
    (group,) = run(env, ScriptedEngine(lambda m: "move"))
    t = group.trajectories[0]
    assert [m["content"] for m in t.completion] == [
        "move", "turn 1", "move", "turn 2", "move", "turn 3",
    ]  # fmt: skip
    assert t.stop_reason == "max_turns_reached" and t.num_turns == 3


def test_final_environment_message_ends_the_episode():
    env = CountingEnv(end_after=2, max_turns=10)
    (group,) = run(env, ScriptedEngine(lambda m: "move"))
    t = group.trajectories[0]
    assert [m["content"] for m in t.completion][-1] == "final"
    assert t.stop_reason == "finished" and t.num_turns == 2


def test_stop_conditions_are_checked_by_priority():
    class Stops(CountingEnv):
        @stop(priority=5)
        def high(self, state):
            return state["turn"] >= 1

        @stop(priority=1)
        def low(self, state):
            return state["turn"] >= 1

    (group,) = run(Stops(max_turns=5), ScriptedEngine(lambda m: "x"))
    assert group.trajectories[0].stop_reason == "high"
    assert group.trajectories[0].num_turns == 1


def test_environment_error_ends_only_that_episode_and_is_counted():
    env = CountingEnv(fail_on_turn=2, max_turns=5)
    groups = run(env, ScriptedEngine(lambda m: "x"), n_examples=2)
    for g in groups:
        t = g.trajectories[0]
        assert t.stop_reason == "env_error" and t.num_turns == 2
        assert t.errors == {"env_response": 1}


class SlowEngine:
    """Hangs forever on the example whose prompt is q1; answers the others at once."""

    tokenizer = None

    async def generate(self, request):
        if request.messages[0]["content"] == "q1":
            await asyncio.sleep(3600)
        return Generation(text="ok")


def test_time_limit_truncates_one_episode_and_the_batch_goes_on():
    env = CountingEnv(max_turns=2)
    groups = run(env, SlowEngine(), n_examples=3, time_limit_s=0.5)
    reasons = [g.trajectories[0].stop_reason for g in groups]
    assert reasons == ["max_turns_reached", "timeout", "max_turns_reached"]
    assert groups[1].trajectories[0].completion == []


class InFlightEngine:
    tokenizer = None

    def __init__(self):
        self.now = 0
        self.peak = 0

    async def generate(self, request):
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        return Generation(text="ok")


def test_concurrency_limit_bounds_episodes_in_flight():
    engine = InFlightEngine()
    env = CountingEnv(max_turns=2)
    jobs = [GroupJob(env, env.example(i), seed=i) for i in range(4)]
    groups = asyncio.run(play_groups(engine, jobs, 3, max_concurrent=2))
    assert engine.peak == 2
    assert [len(g.trajectories) for g in groups] == [3, 3, 3, 3]
    assert [g.example_id for g in groups] == [0, 1, 2, 3]


def test_rollout_seeds_differ_within_a_group_and_repeat_across_runs():
    seen = []
    env = SingleTurnEnv(ROWS)
    engine = ScriptedEngine(lambda m, rng: str(rng.random()))
    first = run(env, engine, n_examples=2, group_size=3)
    second = run(env, engine, n_examples=2, group_size=3)
    for a, b in zip(first, second, strict=True):
        texts = [t.completion[0]["content"] for t in a.trajectories]
        assert len(set(texts)) == 3
        assert texts == [t.completion[0]["content"] for t in b.trajectories]
        seen += texts
    assert len(set(seen)) == 6


def test_evaluate_summary_names():
    env = SingleTurnEnv(ROWS, rubric=Rubric().add(lambda completion, answer: 0.5))
    result = rlve.evaluate(
        env, ScriptedEngine(lambda m: "x"), num_examples=4, rollouts_per_example=2
    )
    assert len(result.groups) == 4
    assert result.summary["reward/mean"] == 0.5 and result.summary["reward/std"] == 0.0
    assert result.summary["reward/<lambda>"] == 0.5
    assert result.summary["stop/max_turns_reached"] == 1.0


def test_max_turns_below_one_is_rejected():
    with pytest.raises(ValueError, match="max_turns must be >= 1, got 0"):
        CountingEnv(max_turns=0)
