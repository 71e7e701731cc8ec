"""What reaches W&B, read back from the offline runs: an RL run's metrics, curriculum and rollout
tables, the SFT warm-up's losses, an evaluation's settings, summary and rollouts."""

from __future__ import annotations

import json

import pytest
from wandb_offline import read_offline_run

from rlve.cli.eval import main as evaluate_main
from rlve.cli.sft import warmup_main
from rlve.config import LoggingConfig
from rlve.sync.placement import resolve_device
from rlve.training.metrics_logger import MetricsLogger
from rlve.training.rollout_table import (
    CELL_CHARS,
    clip_text,
    pick_rollouts,
    prompt_text,
    rollout_columns,
    rollout_rows,
)
from rlve.types import RolloutGroup, Trajectory

OPTIMAL_OPPONENT = '{"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}'
MINIMAX = "rlve.envs.tictactoe:minimax_policy"
COLUMNS = ["step", "environment", "difficulty", "prompt", "completion", "reward",
           "reward/correct", "reward/format", "stop_reason"]  # fmt: skip


def rollout(reward: float, example_id: int = 0, completion: str = "<answer>4</answer>"):
    return Trajectory(
        prompt=[{"role": "system", "content": "Answer in tags."},
                {"role": "user", "content": f"problem {example_id}: 2 + 2?"}],
        completion=[{"role": "assistant", "content": completion}],
        reward=reward,
        metrics={"reward/correct": reward, "reward/format": 1.0, "game/turns": 1.0},
        stop_reason="stop",
        env_name="arith",
        example_id=example_id,
        difficulty=3,
    )  # fmt: skip


def groups() -> list[RolloutGroup]:
    rewards = [[0.2, 0.9, 0.5], [0.1, 0.3], [1.0, 0.0]]
    return [RolloutGroup(i, "arith", [rollout(r, i) for r in rs], difficulty=3)
            for i, rs in enumerate(rewards)]  # fmt: skip


def test_the_best_and_the_worst_of_the_first_groups_are_picked():
    assert [t.reward for t in pick_rollouts(groups(), 4)] == [0.9, 0.2, 0.3, 0.1]
    assert [t.reward for t in pick_rollouts(groups(), 3)] == [0.9, 0.2, 0.3]
    assert pick_rollouts(groups(), 0) == []


def test_a_long_cell_keeps_its_start_and_end_around_a_marker():
    text = "a" * 3000 + "b" * 3000
    clipped = clip_text(text, limit=4000)
    assert clipped == "a" * 2000 + "\n[... 2000 characters cut ...]\n" + "b" * 2000
    assert clip_text("short", limit=4000) == "short"
    (row,) = rollout_rows([rollout(1.0, completion="x" * 10_000)], step=7)
    completion = row[COLUMNS.index("completion")]
    assert "[... 6014 characters cut ...]" in completion  # 14 of "--- assistant\n"
    assert completion.startswith("--- assistant\n") and len(completion) < CELL_CHARS + 40


def test_a_row_holds_the_last_user_message_the_completion_and_each_score():
    t = rollout(0.5)
    assert rollout_columns([t]) == COLUMNS
    assert rollout_rows([t], step=7) == [[7, "arith", 3, "problem 0: 2 + 2?",
                                          "--- assistant\n<answer>4</answer>", 0.5, 0.5, 1.0,
                                          "stop"]]  # fmt: skip
    no_user = Trajectory(prompt=[{"role": "system", "content": "hi"}], completion=[])
    assert prompt_text(no_user) == "--- system\nhi"


def test_an_rl_run_logs_metrics_curriculum_and_a_rollout_table_every_n_steps(tmp_path):
    config = LoggingConfig(console_every=0, rollout_table_every=2, rollout_table_rows=4,
                           samples_per_step=2, project="rlve-test")  # fmt: skip
    resolved = {"trainer": {"lr": 1e-5}, "run_name": "t"}
    logger = MetricsLogger(tmp_path, config, resolved, "t", max_steps=4)
    for step in range(1, 5):
        logger.log(step, {"reward/mean": step / 10, "curriculum/arith/low": 1.0,
                          "curriculum/arith/high": float(step + 2)})  # fmt: skip
        logger.save_samples(step, groups())
    logger.close()

    run = read_offline_run(tmp_path / "wandb")
    assert run.job_type == "rl" and run.config == resolved
    assert (tmp_path / "wandb_id.txt").read_text() in run.folder.name
    by_step = {row["_step"]: row for row in run.history}
    assert [by_step[s]["curriculum/arith/high"] for s in (1, 2, 3, 4)] == [3.0, 4.0, 5.0, 6.0]
    assert [s for s, row in sorted(by_step.items()) if "rollouts" in row] == [2, 4]
    table = run.table("rollouts", step=4)
    assert table["columns"] == COLUMNS
    assert [row[COLUMNS.index("reward")] for row in table["data"]] == [0.9, 0.2, 0.3, 0.1]
    assert {row[0] for row in table["data"]} == {4}
    samples = (tmp_path / "samples" / "step_000004.txt").read_text()  # the table's first two
    assert [line.split("| reward ")[1][:5] for line in samples.splitlines()
            if line.startswith("===")] == ["0.900", "0.200"]  # fmt: skip


def test_a_disabled_run_writes_no_wandb_folder(tmp_path):
    logger = MetricsLogger(tmp_path, LoggingConfig(wandb_mode="disabled", console_every=0), {},
                           "t", max_steps=1)  # fmt: skip
    logger.log(1, {"reward/mean": 0.5})
    logger.save_samples(1, groups())
    logger.close()
    assert not (tmp_path / "wandb").exists() and (tmp_path / "samples").exists()


def test_the_sft_warmup_logs_its_settings_and_the_loss_of_every_step(tiny_path, tmp_path):
    data = tmp_path / "data.jsonl"
    sequence = {"token_ids": [10, 11, 12, 13, 14, 15], "loss_mask": [0, 0, 1, 1, 1, 1]}
    data.write_text((json.dumps(sequence) + "\n") * 4)
    out = tmp_path / "model"
    warmup_main(["--data", str(data), "--out", str(out), "--steps", "2", "--batch-size", "2"])
    run = read_offline_run(out / "wandb")
    assert run.job_type == "sft"
    assert (run.config["examples"], run.config["batch_size"]) == (4, 2)
    assert run.config["trainer"]["max_steps"] == 2 and run.config["trainer"]["model"] == "tiny"
    assert run.config["trainer"]["device"] == resolve_device("auto")  # the device it trained on
    losses = json.loads((out / "sft_losses.json").read_text())
    assert [(row["_step"], row["train/loss"]) for row in run.history] == [
        (1, pytest.approx(losses[0])), (2, pytest.approx(losses[1]))]  # fmt: skip


def test_an_evaluation_logs_its_settings_summary_and_rollouts(tmp_path):
    out = tmp_path / "eval"
    evaluate_main(["--env", "tictactoe", "--env-args", OPTIMAL_OPPONENT, "--policy", MINIMAX,
                   "--num-examples", "3", "--rollouts", "2", "--out", str(out)])  # fmt: skip
    run = read_offline_run(out / "wandb")
    assert run.job_type == "eval"
    assert (run.config["engine"], run.config["num_examples"], run.config["rollouts"]) == (
        "scripted", 3, 2)  # fmt: skip
    assert run.config["env_args"] == {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}
    (row,) = run.history
    # every game a draw with perfect format: 0.5 (draw) + 0.2 * 1.0 (format), as summary.json says
    assert row["reward/mean"] == pytest.approx(0.7) and row["game/draw"] == 1.0
    table = run.table("rollouts", step=0)
    assert table["columns"][:2] == ["environment", "difficulty"]
    assert len(table["data"]) == 3 * 2
    assert [r[table["columns"].index("reward")] for r in table["data"]] == [pytest.approx(0.7)] * 6


def test_an_evaluation_with_wandb_disabled_writes_no_run(tmp_path):
    out = tmp_path / "eval"
    evaluate_main(["--env", "tictactoe", "--policy", MINIMAX, "--num-examples", "1",
                   "--wandb-mode", "disabled", "--out", str(out)])  # fmt: skip
    assert (out / "summary.json").exists() and not (out / "wandb").exists()


def test_a_run_leaves_sys_exit_as_it_was(tmp_path):
    """wandb.init replaces sys.exit for good; a replaced one cannot be pickled by reference
    (the verifier pool sends functions to its workers that way)."""
    import pickle
    import sys

    from rlve.training.wandb_run import start_wandb_run

    before = sys.exit, sys.excepthook
    run = start_wandb_run(tmp_path, "offline", "rlve-test", "exit", "eval", {})
    run.finish()
    assert (sys.exit, sys.excepthook) == before
    assert pickle.loads(pickle.dumps(sys.exit)) is sys.exit
