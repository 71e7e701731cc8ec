"""The training loop end to end with a scripted policy as the inference engine (no vLLM):
checkpoints, exact resume, Ctrl-C, dynamic sampling, config errors."""

import json
import math

import pytest
import torch

from rlve.envs.tictactoe import random_policy
from rlve.loop import train
from rlve.train import load_run_config
from rlve.training.hacking_monitor import RewardHackingSuspected

FAST = [
    "+experiment=tictactoe_course",
    "rollout.engine=scripted",
    "rollout.scripted_policy=rlve.envs.tictactoe:random_policy",
    "rollout.groups_per_step=3",
    "rollout.group_size=4",
    "rollout.async_level=0",
    "logging.wandb_mode=disabled",
    "logging.console_every=0",
    "trainer.lora.enabled=false",
    "trainer.lr=1e-3",
]


def run(tmp_path, name, *overrides, on_step=None):
    config = load_run_config([*FAST, f"output_dir={tmp_path / name}", *overrides])
    return train(config, on_step=on_step)


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def final_weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(run_dir / "model" / "model.safetensors"))


def without_time(row):
    return {k: v for k, v in row.items() if k != "time" and not k.startswith("perf/")}


TRAIN_REL_TOL = 1e-4
"""train/* floats come from float32 sums of up to ~1,000 terms (a step's tokens, a layer's width),
whose order a CPU's BLAS may change between two processes (MKL and oneDNN promise the same bits
only under conditional-reproducibility settings: a run beside other work may get a different
thread split); such a sum moves by at most n * eps32 = 1,000 * 1.2e-7 ~ 1e-4 of its terms' sum.
A resume that lost state moves them far more: one step taken at lr 1.1e-3 instead of 1e-3 moves
the next step's train/ratio_mean by 2e-3 and train/grad_norm by 9e-3 of their values (measured)."""
TRAIN_ABS_TOL = 1e-8
"""the same bound for values near 0 (the loss, a difference of terms): 1e-4 of this run's
largest loss, about 2e-4"""


def assert_same_run(actual: list[dict], expected: list[dict]) -> None:
    """`actual` logged what `expected` did: the same steps and keys, every rollout, game and
    curriculum figure exactly, the train/* floats within float32 summation-order noise."""
    assert [row["step"] for row in actual] == [row["step"] for row in expected]
    for got, want in zip(actual, expected, strict=True):
        assert got.keys() == want.keys(), f"step {want['step']}"
        for key, value in want.items():
            if key.startswith("train/"):
                assert math.isclose(
                    got[key], value, rel_tol=TRAIN_REL_TOL, abs_tol=TRAIN_ABS_TOL
                ), f"step {want['step']} {key}: {got[key]} != {value}"
            else:
                assert got[key] == value, f"step {want['step']} {key}: {got[key]} != {value}"


def assert_same_weights(actual: dict, expected: dict) -> None:
    """Every tensor of `expected` in `actual` within float32 noise (assert_close's float32 default:
    rtol 1.3e-6, atol 1e-5), for the reason TRAIN_REL_TOL gives; one Adam step at lr 1e-3 moves
    a weight by ~1e-3, 100x atol, so a resume that lost a step's state still fails."""
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, msg=name)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    whole = run(tmp_path, "whole", "trainer.max_steps=4", "save_every=2")
    part = run(tmp_path, "part", "trainer.max_steps=2", "save_every=2")
    part = run(tmp_path, "part", "trainer.max_steps=4", "save_every=2", "resume=true")
    rows_whole, rows_part = metrics(whole), metrics(part)
    assert [r["step"] for r in rows_part] == [1, 2, 3, 4]
    assert_same_run([without_time(rows_part[3])], [without_time(rows_whole[3])])
    assert_same_weights(final_weights(part), final_weights(whole))


def test_interrupt_saves_a_checkpoint_and_the_run_resumes(tmp_path):
    def interrupt_at_3(step, trainer, engine, metrics):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "r", "trainer.max_steps=6", "save_every=100", on_step=interrupt_at_3)
    checkpoints = sorted(p.name for p in (tmp_path / "r" / "checkpoints").iterdir())
    assert checkpoints == ["step_00000003"]
    resumed = run(tmp_path, "r", "trainer.max_steps=6", "save_every=100", "resume=true")
    assert [r["step"] for r in metrics(resumed)] == [1, 2, 3, 4, 5, 6]


def test_existing_run_needs_resume_and_resume_needs_a_checkpoint(tmp_path):
    run(tmp_path, "r", "trainer.max_steps=1")
    with pytest.raises(FileExistsError, match="resume=true"):
        run(tmp_path, "r", "trainer.max_steps=2")
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        run(tmp_path, "empty", "trainer.max_steps=2", "resume=true")


def test_metrics_use_the_design_names_and_dynamic_sampling_drops_flat_groups(tmp_path):
    # minimax against a perfect opponent draws every game: every group is flat (no signal)
    run_dir = run(
        tmp_path, "flat", "trainer.max_steps=1", "rollout.dynamic_sampling=true",
        "rollout.max_refills=2", "rollout.scripted_policy=rlve.envs.tictactoe:minimax_policy",
        "env.args.tictactoe.min_random_move_prob=0.0",
        "env.args.tictactoe.max_random_move_prob=0.0",
    )  # fmt: skip
    (row,) = metrics(run_dir)
    assert row["batch/effective_prompt_ratio"] == 0.0
    assert row["batch/groups_dropped"] == 9.0  # 3 groups, then 2 refills of 3
    assert row["batch/rounds"] == 3.0 and row["batch/groups"] == 0.0
    assert row["game/draw"] == 1.0 and row["train/skipped_steps"] == 1.0
    assert row["faults/rate"] == 0.0 and row["faults/env_error"] == 0.0  # 36 clean games
    names = {"reward/mean", "reward/std", "game/win", "game/draw", "game/loss", "game/invalid",
             "game/format", "perf/step_s", "perf/rollout_s", "perf/train_s", "perf/sync_s",
             "completion/len_mean", "completion/truncated_frac",
             "env/tictactoe/reward"}  # fmt: skip
    assert names <= set(row)


ESCAPING = {"now": False}


def stops_playing(messages, rng=None):
    """Random legal moves until `ESCAPING["now"]`, then an answer that names no free cell."""
    return "<think>.</think><move>9</move>" if ESCAPING["now"] else random_policy(messages, rng)


def test_a_policy_that_stops_playing_trips_the_monitor_which_stops_the_run(tmp_path):
    """From step 3 every answer is invalid: games with an invalid move and unfinished games go
    from 0 to 1, so do episodes stopped at max_turns, and the answers lengthen, while the reward
    falls; the monitor trips at step 3 (its baseline is steps 1-2) and hacking.action=stop saves
    a checkpoint and ends the run."""

    def escape_after_2(step, trainer, engine, metrics):
        ESCAPING["now"] = step >= 2

    ESCAPING["now"] = False
    with pytest.raises(RewardHackingSuspected, match="step 3: .*game/invalid rose from 0.000"):
        run(tmp_path, "r", "trainer.max_steps=6", "save_every=100", "hacking.action=stop",
            f"rollout.scripted_policy={__name__}:stops_playing",
            on_step=escape_after_2)  # fmt: skip
    rows = metrics(tmp_path / "r")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[2]["hacking/rise/game/invalid"] == 1.0
    assert rows[2]["hacking/rise/game/unfinished"] == 1.0 and rows[2]["hacking/tripped"] == 4.0
    checkpoints = sorted(p.name for p in (tmp_path / "r" / "checkpoints").iterdir())
    assert checkpoints == ["step_00000003"]


def test_samples_and_config_are_written(tmp_path):
    run_dir = run(tmp_path, "r", "trainer.max_steps=2", "logging.samples_per_step=2")
    sample = (run_dir / "samples" / "step_000002.txt").read_text()
    assert sample.startswith("=== tictactoe example") and "--- assistant" in sample
    assert "lr: 0.001" in (run_dir / "config.yaml").read_text()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.lrr=1", "lrr"),
        ("trainer.loss=ppo", "trainer.loss: unknown loss .ppo."),
        ("rollout.group_size=1", "rollout.group_size must be >= 2, got 1"),
        ("rollout.async_level=2", "rollout.async_level must be one of"),
    ],
)
def test_config_errors_name_the_field(override, message):
    with pytest.raises(Exception, match=message):
        load_run_config([*FAST, override])
