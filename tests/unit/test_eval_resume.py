"""An evaluation killed with SIGKILL and started again on the same --out ends with every example
exactly once and the summary of an uninterrupted run; other settings are refused; rates come with
95% intervals and pass@k, and accuracy per difficulty level."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlve.cli.eval import main

ROOT = Path(__file__).resolve().parents[2]
RANDOM_OPPONENT = '{"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}'
FLAGS = ["--env", "tictactoe", "--env-args", RANDOM_OPPONENT, "--num-examples", "40",
         "--max-concurrent", "2"]  # fmt: skip
SLOW_MINIMAX = """
import time
from rlve.envs.tictactoe import minimax_policy

def policy(messages, rng):
    time.sleep(0.05)
    return minimax_policy(messages, rng=rng)
"""


def journal_jobs(out: Path) -> list[int]:
    lines = (out / "groups.jsonl").read_text().splitlines()
    return [json.loads(line)["job"] for line in lines]


def test_a_killed_evaluation_continues_to_the_uninterrupted_result(tmp_path):
    (tmp_path / "slow_minimax.py").write_text(SLOW_MINIMAX)
    out = tmp_path / "killed"
    command = [sys.executable, "scripts/evaluate.py", *FLAGS, "--policy", "slow_minimax:policy",
               "--out", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    while process.poll() is None:  # kill it once a quarter of the examples are done
        if (out / "groups.jsonl").exists() and len(journal_jobs(out)) >= 10:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the evaluation finished before the kill"
    done_before = len(journal_jobs(out))
    assert 10 <= done_before < 40 and not (out / "summary.json").exists()

    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert f"{done_before} of 40 examples were already played" in finished.stdout
    assert sorted(journal_jobs(out)) == list(range(40))

    main([*FLAGS, "--policy", "rlve.envs.tictactoe:minimax_policy", "--out", str(tmp_path / "w")])
    whole, resumed = (json.loads((d / "summary.json").read_text())["metrics"]
                      for d in (tmp_path / "w", out))  # fmt: skip
    assert resumed == whole
    assert (out / "rollouts.jsonl").read_text() == (tmp_path / "w" / "rollouts.jsonl").read_text()


def test_other_settings_in_the_same_folder_are_refused(tmp_path, capsys):
    flags = ["--env", "tictactoe", "--policy", "rlve.envs.tictactoe:minimax_policy",
             "--out", str(tmp_path)]  # fmt: skip
    main([*flags, "--num-examples", "4"])
    with pytest.raises(SystemExit) as stopped:
        main([*flags, "--num-examples", "5"])
    assert stopped.value.code == 2
    assert "num_examples: 4 then, 5 now" in capsys.readouterr().err


def test_rates_have_wilson_intervals_and_pass_at_k(tmp_path):
    main(["--env", "tictactoe", "--env-args", RANDOM_OPPONENT, "--policy",
          "rlve.envs.tictactoe:random_policy", "--num-examples", "30", "--rollouts", "3",
          "--out", str(tmp_path)])  # fmt: skip
    metrics = json.loads((tmp_path / "summary.json").read_text())["metrics"]
    win = metrics["game/win"]
    assert metrics["game/win/ci95_low"] < win < metrics["game/win/ci95_high"]
    rows = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    by_example: dict[int, list[float]] = {}
    for row in rows:
        by_example.setdefault(row["example_id"], []).append(row["metrics"]["game/win"])
    assert metrics["pass@3/game/win"] == pytest.approx(
        sum(max(wins) for wins in by_example.values()) / len(by_example)
    )
    assert "pass@3/reward/mean" not in metrics  # a reward is not a 0/1 outcome


def test_accuracy_per_difficulty_counts_clean_rollouts_per_level():
    from rlve.envs import SingleTurnEnv
    from rlve.evaluation import per_difficulty
    from rlve.types import Fault, RolloutGroup, Trajectory

    def rollout(difficulty, reward, fault=None):
        return Trajectory(prompt=[], completion=[], reward=reward, difficulty=difficulty,
                          fault=fault)  # fmt: skip

    env = SingleTurnEnv([{"question": "q"}])  # accuracy: reward >= 1.0
    groups = [
        RolloutGroup(0, "e", [rollout(1, 1.0), rollout(1, 1.0), rollout(1, 0.0)], 1),
        RolloutGroup(1, "e", [rollout(3, 0.5), rollout(3, 1.0),
                              rollout(3, 1.0, Fault("timeout", "t"))], 3),
        RolloutGroup(2, "e", [rollout(None, 1.0)]),
    ]  # fmt: skip
    out = per_difficulty(env, groups)
    assert out["difficulty/1/accuracy"] == pytest.approx(2 / 3)
    assert out["difficulty/1/rollouts"] == 3.0
    assert out["difficulty/3/accuracy"] == 0.5 and out["difficulty/3/rollouts"] == 2.0  # no fault
    assert out["difficulty/3/reward"] == 0.75
    assert out["difficulty/1/accuracy/ci95_low"] < 2 / 3 < out["difficulty/1/accuracy/ci95_high"]
    assert not any(key.startswith("difficulty/None") for key in out)
