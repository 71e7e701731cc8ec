"""Kill the run with SIGKILL at chosen points, resume it, and get the uninterrupted run's metrics.

Each killed run is `python -m rlve.train` with `RLVE_KILL_AT=<point>@<step>` (rlve.reliability
.kill_points): the process kills itself there, as the OOM killer or a preempted node would. The
run resumes from its newest intact checkpoint (step 2: checkpoints every 2 steps), and its
metrics.jsonl must then hold every step once, equal to the uninterrupted run's (the steps up to 2
from the killed run, the others from the resumed one; times excepted; train/* floats within
float32 summation-order noise, `test_loop.assert_same_run`). The scripted engine covers
these points; a kill during a weight push (vLLM only) is tested in test_loop_vllm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_loop  # tests/integration is on sys.path (pytest's rootdir-relative imports)

from rlve.loop import train
from rlve.train import load_run_config

STEPS = ["trainer.max_steps=4", "save_every=2"]
PIPELINES = {
    "async_level=0": ["rollout.async_level=0"],
    "async_level=1": ["rollout.async_level=1"],
    # two batches generated ahead, pushes landing while they are played (rollout.max_staleness)
    "max_staleness=2": ["rollout.async_level=0", "rollout.max_staleness=2"],
}


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [test_loop.without_time(row) for row in rows]


def killed_run(run_dir: Path, overrides: list[str], kill_at: str) -> None:
    """Runs `python -m rlve.train` until it kills itself at `kill_at`."""
    env = {**os.environ, "RLVE_KILL_AT": kill_at}
    command = [sys.executable, "-m", "rlve.train", *overrides, f"output_dir={run_dir}"]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == -9, f"the run did not reach {kill_at}:\n{result.stderr[-3000:]}"


def resume(run_dir: Path, overrides: list[str]) -> None:
    train(load_run_config([*overrides, f"output_dir={run_dir}", "resume=true"]))


FIRST_AFTER_SAVE = {"async_level=0": 4, "async_level=1": 4, "max_staleness=2": 5}
"""the first batch started after step 2's checkpoint: step 3's starts before it (async 0: right
after the push; async 1: while step 2 trains); with max_staleness 2, step 4's too, and step 2's
checkpoint waits for both and keeps them"""


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The scripted runs without a kill, one per pipeline."""
    root = tmp_path_factory.mktemp("uninterrupted")
    runs = {}
    for name, pipeline in PIPELINES.items():
        overrides = [*test_loop.FAST, *STEPS, *pipeline]
        run_dir = root / name.replace("=", "_")  # '=' in a path would split the override
        runs[name] = metrics(train(load_run_config([*overrides, f"output_dir={run_dir}"])))
    return runs


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize(
    "kill_at",
    [
        "rollout",  # in the first batch started after step 2's checkpoint (FIRST_AFTER_SAVE)
        "optimizer_step@3",
        "checkpoint@4",  # halfway through step 4's checkpoint: step 2's is the newest intact
    ],
)
def test_a_run_killed_at_a_point_resumes_to_the_uninterrupted_metrics(
    tmp_path, uninterrupted, pipeline, kill_at
):
    overrides = [*test_loop.FAST, *STEPS, *PIPELINES[pipeline]]
    run_dir = tmp_path / "run"
    if kill_at == "rollout":
        kill_at = f"rollout@{FIRST_AFTER_SAVE[pipeline]}"
    killed_run(run_dir, overrides, kill_at)
    logged_before = [row["step"] for row in metrics(run_dir)]
    assert logged_before[:2] == [1, 2]
    resume(run_dir, overrides)
    test_loop.assert_same_run(metrics(run_dir), uninterrupted[pipeline])


FADING_HINTS = [
    "rollout.scripted_policy=rlve.envs.tictactoe:minimax_policy",  # never loses: levels rise
    "+env.args.tictactoe.hint_levels=4",
    "env.curriculum.enabled=true",
    "env.curriculum.tau_acc=0.7",
    "env.curriculum.tau_num=12",  # one step's 3 x 4 games
    "env.curriculum.d_delta=1",
]


def test_the_fading_hints_curriculum_resumes_at_the_level_it_reached(tmp_path):
    """The threats line's curriculum (tictactoe's hint_levels) killed mid-run: the resumed run
    draws the same levels and games as one never killed (its window is in the checkpoint)."""
    overrides = [*test_loop.FAST, *STEPS, *FADING_HINTS]
    whole = metrics(train(load_run_config([*overrides, f"output_dir={tmp_path / 'whole'}"])))
    assert [row["curriculum/tictactoe/high"] for row in whole] == [1.0, 2.0, 3.0, 4.0]
    killed_run(tmp_path / "run", overrides, "optimizer_step@3")
    resume(tmp_path / "run", overrides)
    test_loop.assert_same_run(metrics(tmp_path / "run"), whole)
