"""Collecting a step's groups: how many dynamic sampling asks for, and the curriculum metrics
the batch carries."""

import math
import random

import rlve
from rlve.config import RolloutConfig
from rlve.curriculum import DifficultyController
from rlve.inference.engine import PromptTokenCounts
from rlve.inference.scripted import ScriptedEngine
from rlve.models import load_tokenizer
from rlve.rollout.collector import BatchCollector
from rlve.rollout.episode import EpisodeSettings
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.runner import env_sampling
from rlve.rollout.step_summary import mixed_outcome_ratio, step_metrics
from rlve.types import Fault, RolloutGroup, Trajectory


def guesser(messages, rng: random.Random) -> str:
    return f"<answer>{rng.randint(0, 9)}</answer>"


def rambler(messages, rng: random.Random) -> str:
    """One number (a list of the wrong length: -0.5 every time), then some words."""
    return "<answer>1</answer>" + " and so on" * rng.randint(0, 6)


def collector(policy=guesser, **rollout) -> BatchCollector:
    env = rlve.load_environment("rlve/sorting", num_examples=4, sandbox=False)
    sampling = {"rlve/sorting": env_sampling(env, max_tokens=rollout.get("max_tokens"))}
    sampler = ProblemSampler({"rlve/sorting": env}, None, DifficultyController(), sampling, seed=0)
    config = RolloutConfig(engine="scripted", **{"group_size": 2, **rollout})
    tokenizer = load_tokenizer("tiny") if policy is rambler else None
    return BatchCollector(ScriptedEngine(policy, tokenizer), sampler, config, EpisodeSettings())


def test_dynamic_sampling_oversamples_from_the_first_round():
    # 2 groups wanted, oversample 3: the first (and here only) round plays ceil(2 * 3) = 6
    c = collector(groups_per_step=2, dynamic_sampling=True, oversample=3.0, max_refills=0)
    batch = c.collect()
    c.close()
    assert (batch.rounds, len(batch.played)) == (1, math.ceil(2 * 3.0))
    assert len(batch.groups) <= 2


def test_without_dynamic_sampling_exactly_the_step_is_played():
    c = collector(groups_per_step=3, oversample=3.0)
    batch = c.collect()
    c.close()
    assert len(batch.played) == len(batch.groups) == 3


def test_dynamic_sampling_reads_the_task_reward_not_the_overlong_penalty():
    """Every answer is wrong alike (-0.5); their lengths, and so their overlong penalties, differ.
    DAPO drops such groups: shaping alone is no signal, and the accuracy stays the task's."""
    c = collector(rambler, group_size=4, groups_per_step=3, dynamic_sampling=True, max_refills=0,
                  max_tokens=40, overlong_buffer=36)  # fmt: skip
    batch = c.collect()
    c.close()
    assert {t.reward for g in batch.played for t in g.trajectories} == {-0.5}
    assert len({t.shaping for g in batch.played for t in g.trajectories}) > 1
    assert all(t.turn_shaping == [t.shaping] for g in batch.played for t in g.trajectories)
    assert (batch.groups, batch.effective_prompt_ratio) == ([], 0.0)
    metrics = step_metrics(batch, c.sampler, waited_s=0.0)
    assert (metrics["env/rlve/sorting/reward"], metrics["reward/mean"]) == (-0.5, -0.5)


def test_the_curriculum_counts_only_the_rollouts_no_fault_spoiled():
    c = collector(groups_per_step=1)
    c.close()
    right = Trajectory(prompt=[], completion=[], reward=1.0, metrics={"reward/accuracy": 1.0})
    timed_out = Trajectory(prompt=[], completion=[], reward=-1.0, fault=Fault("timeout", "600 s"),
                           metrics={"reward/accuracy": 0.0})  # fmt: skip
    group = RolloutGroup(0, "rlve/sorting", [right, right, timed_out, timed_out], difficulty=0)
    c.sampler.observe([group])
    window = c.sampler.controller.env_window("rlve/sorting")
    assert (window.correct, window.attempted) == (2.0, 2)


def test_step_metrics_report_the_curriculum_as_it_was_when_the_batch_was_made():
    c = collector(groups_per_step=2)
    batch = c.collect()
    c.close()
    assert batch.curriculum["curriculum/rlve/sorting/high"] == 0.0
    # the next batch, collected in the background, meets a new environment meanwhile: the
    # metrics of this step must not iterate the live windows (a race), nor report the new one
    c.sampler.controller.env_window("rlve/other")
    metrics = step_metrics(batch, c.sampler, waited_s=0.0)
    assert "curriculum/rlve/sorting/high" in metrics
    assert not any(key.startswith("curriculum/rlve/other") for key in metrics)


class CountingEngine(ScriptedEngine):
    """Counts prompt tokens as the vLLM engine does: 8 per request, 2 of them from the cache."""

    def __init__(self, policy):
        super().__init__(policy)
        self.prompt_tokens = PromptTokenCounts()

    async def generate(self, request):
        self.prompt_tokens.add(8, 2)
        return await super().generate(request)


def test_each_batch_reports_the_share_of_its_prompt_tokens_the_prefix_cache_held():
    c = collector(groups_per_step=3)
    c.engine = CountingEngine(guesser)
    first, second = c.collect(), c.collect()
    c.close()
    # 3 groups x 2 single-turn episodes a batch, counted per batch (not since the start)
    assert first.prompt_tokens == second.prompt_tokens == PromptTokenCounts(8 * 6, 2 * 6)
    assert step_metrics(second, c.sampler, waited_s=0.0)["perf/prompt_tokens_cached_frac"] == 0.25


def test_the_mixed_outcome_ratio_counts_groups_that_both_solve_and_fail():
    """Partial credit: the rewards in each group differ, so the effective prompt ratio is 1; only
    the first group both solves and fails. The third has one clean rollout: not counted."""
    env = rlve.load_environment("rlve/sorting", num_examples=1, sandbox=False)

    def rollout(reward, fault=None):
        solved = {"reward/accuracy": float(reward == 1.0)}
        return Trajectory(prompt=[], completion=[], reward=reward, fault=fault, metrics=solved)

    timeout = Fault("timeout", "600 s")
    groups = [RolloutGroup(0, "rlve/sorting", [rollout(1.0), rollout(0.2)]),
              RolloutGroup(1, "rlve/sorting", [rollout(0.1), rollout(0.3), rollout(0.6)]),
              RolloutGroup(2, "rlve/sorting", [rollout(1.0), rollout(-1.0, timeout)])]  # fmt: skip
    assert mixed_outcome_ratio(groups, {"rlve/sorting": env}) == 0.5
    assert mixed_outcome_ratio([], {}) == 0.0
