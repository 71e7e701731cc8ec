"""`python -m rlve.train +experiment=tictactoe_cispo` with no other argument: its sizes by device,
its warm-up decision, its plan, the first batch's check and the evaluation's summary line."""

import json

import pytest

import rlve
import rlve.train
from rlve.config.warmup import WarmupConfig
from rlve.envs.tictactoe import minimax_policy, random_policy
from rlve.inference.scripted import ScriptedEngine
from rlve.train import load_run_config
from rlve.training.playability import TINY_FIX, WARMUP_FIX, ModelCannotPlay, check_playable
from rlve.training.run_evaluation import describe
from rlve.training.run_plan import HEADLINE_SIZES, MINUTES, plan, plan_key
from rlve.training.warmup import mark_trained_on, needs_warmup, trained_on


def headline(monkeypatch, cuda: bool, *overrides):
    monkeypatch.setattr(rlve.train, "has_cuda", lambda: cuda)
    return load_run_config(["+experiment=tictactoe_cispo", *overrides])


def test_on_a_cpu_the_recipe_s_sizes_on_gpus_the_course_s_the_rest_the_same(monkeypatch):
    cpu, gpu = headline(monkeypatch, False), headline(monkeypatch, True)
    assert (cpu.trainer.max_steps, cpu.rollout.groups_per_step, cpu.rollout.async_level) == (
        6,
        8,
        0,
    )
    assert (gpu.trainer.max_steps, gpu.rollout.groups_per_step, gpu.rollout.async_level) == (
        600, 32, 1,
    )  # fmt: skip
    assert gpu.rollout.groups_per_step * gpu.rollout.group_size == 256  # the course's batch
    for config in (cpu, gpu):
        args = config.env.args["tictactoe"]
        assert config.trainer.model == "smollm2-135m" and config.warmup.when == "auto"
        assert (args["board"], args["regret_penalty"], config.trainer.credit) == (
            "threats", 1.0, "turn",
        )  # fmt: skip
        assert config.evaluation.games == 200
        assert config.evaluation.env_args["max_random_move_prob"] == 0.0  # the optimal opponent
    # every size stays overridable from the command line
    assert headline(monkeypatch, False, "trainer.max_steps=15").trainer.max_steps == 15


def test_the_default_sizes_on_a_cpu_are_the_ones_the_plan_has_a_time_for(monkeypatch):
    config = headline(monkeypatch, False)
    assert plan_key(config) == HEADLINE_SIZES
    text = plan(config, gpus=0, cpu_kind="AVX2")
    assert "warmed up first" in text and "6 steps of 8 problems x 8 rollouts" in text
    assert MINUTES[(HEADLINE_SIZES, "AVX2")] in text
    longer = plan(headline(monkeypatch, False, "trainer.max_steps=15"), 0, "AVX2")
    assert "not measured at these sizes" in longer
    one_gpu = plan(headline(monkeypatch, True), gpus=1, cpu_kind="AVX2")
    assert "600 steps of 32 problems" in one_gpu and "trainer on cuda:0" in one_gpu
    assert "time on this CPU" not in one_gpu


def test_the_warm_up_is_skipped_for_a_model_rlve_trained_on_the_game(tmp_path):
    auto = WarmupConfig(when="auto")
    assert needs_warmup(auto, "smollm2-135m") and needs_warmup(auto, str(tmp_path))
    (tmp_path / "sft").mkdir(), (tmp_path / "rl").mkdir()
    mark_trained_on(tmp_path / "sft", ["tictactoe"], "smollm2-135m")
    mark_trained_on(tmp_path / "rl", ["other"], str(tmp_path / "sft"))  # inherits tictactoe
    assert trained_on(str(tmp_path / "rl")) == ["tictactoe", "other"]
    assert not needs_warmup(auto, str(tmp_path / "rl"))
    assert needs_warmup(WarmupConfig(when="always"), str(tmp_path / "rl"))
    assert not needs_warmup(WarmupConfig(when="never"), "smollm2-135m")


def test_the_warm_up_s_reasons_are_the_teacher_s():
    from rlve.config.warmup import TEACHER_REASONS
    from rlve.envs.tictactoe.policies import REASONS

    assert set(TEACHER_REASONS) == set(REASONS)


def test_a_warm_up_for_an_environment_without_a_teacher_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match="warmup.when='auto' needs env.names=\\[tictactoe\\]"):
        load_run_config(["+experiment=tictactoe_cispo", "env.names=[reverse_text]"])
    with pytest.raises(ValueError, match="warmup.when must be one of"):
        load_run_config(["warmup.when=sometimes"])


def test_legal_answers_per_game_by_hand():
    """A policy that answers "hello" once, then plays minimax: each game has one invalid answer
    before its first legal move, so its share is (answers - 1) / answers."""

    def hello_first(messages):
        answered = sum(m["role"] == "assistant" for m in messages)
        return "hello" if answered == 0 else minimax_policy(messages)

    env = rlve.load_environment("tictactoe", min_random_move_prob=0.0, max_random_move_prob=0.0)
    for policy, expected in ((minimax_policy, 1.0), (lambda m: "hello", 0.0)):
        summary = rlve.evaluate(env, ScriptedEngine(policy), 8, seed=0).summary
        assert summary["game/legal_answers"] == expected
    result = rlve.evaluate(env, ScriptedEngine(hello_first), 8, seed=0)
    for t in (t for g in result.groups for t in g.trajectories):
        answers = sum(m["role"] == "assistant" for m in t.completion)
        assert t.metrics["game/legal_answers"] == pytest.approx((answers - 1) / answers)


def test_a_first_batch_without_legal_answers_stops_the_run_and_names_the_fix():
    env = rlve.load_environment("tictactoe")
    envs = {"tictactoe": env}
    batch = {"game/legal_answers": 0.02, "game/invalid": 1.0, "game/malformed": 0.9}
    with pytest.raises(ModelCannotPlay, match="2.0% of the first batch's answers") as error:
        check_playable(batch, envs, "smollm2-135m", 0.05, warmed_up=False)
    assert WARMUP_FIX in str(error.value) and "game/invalid 1.00" in str(error.value)
    with pytest.raises(ModelCannotPlay) as error:
        check_playable(batch, envs, "tiny", 0.05, warmed_up=True)
    assert TINY_FIX in str(error.value) and "after its SFT warm-up" in str(error.value)
    check_playable({**batch, "game/legal_answers": 0.05}, envs, "tiny", 0.05, False)  # at the bar
    reverse = {"reverse_text": rlve.load_environment("reverse_text")}
    check_playable({"reward/mean": -1.0}, reverse, "tiny", 0.05, False)  # declares no metric


def test_the_random_policy_plays_legal_moves_only():
    env = rlve.load_environment("tictactoe")
    summary = rlve.evaluate(env, ScriptedEngine(random_policy), 8, seed=0).summary
    assert summary["game/legal_answers"] == 1.0


def test_the_evaluation_line_shows_the_rates_that_occurred_with_their_intervals():
    scores = {"tictactoe/reward/mean": 0.5125, "tictactoe/game/draw": 0.51,
              "tictactoe/game/draw/ci95_low": 0.441, "tictactoe/game/draw/ci95_high": 0.579,
              "tictactoe/game/win": 0.0, "tictactoe/game/win/ci95_low": 0.0,
              "tictactoe/game/win/ci95_high": 0.019, "tictactoe/game/zz": 0.25,
              "tictactoe/game/zz/ci95_low": 0.2, "tictactoe/game/zz/ci95_high": 0.3}  # fmt: skip
    assert describe(scores) == (
        "tictactoe: reward 0.512; game/draw 51.0% (44-58), game/zz 25.0% (20-30)"
    )


def test_a_stage_played_at_the_same_step_is_read_back_not_played_again(tmp_path):
    from rlve.training.run_evaluation import evaluate_stage

    stored = {"start": {"step": 0, "scores": {"x/reward/mean": 0.25}}}
    (tmp_path / "evaluation.json").write_text(json.dumps(stored))
    config = load_run_config(["evaluation.games=4"])
    assert evaluate_stage(config, None, tmp_path, "start", step=0) == {"x/reward/mean": 0.25}
    with pytest.raises(ValueError, match="stage must be one of"):
        evaluate_stage(config, None, tmp_path, "middle", step=0)
