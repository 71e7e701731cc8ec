"""`torchrun -m rlve.train` with two gloo ranks: the run of one process, and resumes across world
sizes (2 -> 1 and 1 -> 2) that continue with its metrics. The scripted engine plays the games:
what is tested here is the trainer side (FSDP2 steps, sharded checkpoints, rank 0's orders)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import test_loop  # tests/integration is on sys.path (pytest's rootdir-relative imports)

from rlve.loop import train
from rlve.train import load_run_config

FAST = [*test_loop.FAST, "save_every=2", "trainer.lr=0.1", "trainer.adam_eps=1.0"]
"""adam_eps above every gradient element: AdamW steps by about lr x gradient, so the runs' weights
differ by the rounding of their gradients only (see test_sharded_trainer.py)"""
SUM_ORDER = 1e-4
"""fp32 sums of the same terms in another order (per rank, then across ranks): n x 2^-24"""
TRAIN_KEYS = ("train/loss", "train/grad_norm", "train/entropy", "train/num_tokens")
ROLLOUT_KEYS = ("reward/mean", "reward/std", "completion/len_mean", "batch/groups")


def in_one_process(run_dir, *overrides):
    train(load_run_config([*FAST, f"output_dir={run_dir}", *overrides]))


def on_two_ranks(run_dir, *overrides):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=2", "-m", "rlve.train", *FAST, f"output_dir={run_dir}",
               *overrides]  # fmt: skip
    subprocess.run(command, check=True)


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def assert_same_steps(rows, reference):
    """Rollouts are the same to the bit (same sampler, same scripted games); the trainer's
    numbers to float tolerance (gradients summed in another order)."""
    for row, expected in zip(rows, reference, strict=True):
        assert row["step"] == expected["step"]
        for key in ROLLOUT_KEYS:
            assert row[key] == expected[key], (row["step"], key)
        for key in TRAIN_KEYS:
            want = pytest.approx(expected[key], rel=SUM_ORDER, abs=1e-6)
            assert row[key] == want, (row["step"], key)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    in_one_process(run_dir, "trainer.max_steps=6")
    return metrics(run_dir)


def test_two_ranks_run_the_steps_of_one_process(tmp_path, whole):
    on_two_ranks(tmp_path / "run", "trainer.max_steps=2")
    assert_same_steps(metrics(tmp_path / "run"), whole[:2])
    meta = json.loads((tmp_path / "run/checkpoints/step_00000002/meta.json").read_text())
    assert meta["world_size"] == 2
    assert (tmp_path / "run/model/model.safetensors").is_file()


def test_ranks_with_uneven_work_run_the_steps_of_one_process(tmp_path):
    """Three games on two ranks, each game a micro-batch of its own: one rank trains two, the
    other one and an idle micro-batch that keeps it in FSDP's collectives."""
    uneven = ("rollout.groups_per_step=1", "rollout.group_size=3",
              "trainer.max_tokens_per_microbatch=32", "trainer.max_steps=2")  # fmt: skip
    in_one_process(tmp_path / "one", *uneven)
    on_two_ranks(tmp_path / "two", *uneven)
    rows = metrics(tmp_path / "two")
    assert_same_steps(rows, metrics(tmp_path / "one"))
    assert [row["perf/idle_micro_batches"] for row in rows] == [1.0, 1.0]


def test_a_two_rank_checkpoint_resumes_in_one_process(tmp_path, whole):
    on_two_ranks(tmp_path / "run", "trainer.max_steps=2")
    in_one_process(tmp_path / "run", "trainer.max_steps=4", "resume=true")
    assert_same_steps(metrics(tmp_path / "run")[-2:], whole[2:4])


def test_a_one_process_checkpoint_resumes_on_two_ranks(tmp_path, whole):
    in_one_process(tmp_path / "run", "trainer.max_steps=2")
    on_two_ranks(tmp_path / "run", "trainer.max_steps=4", "resume=true")
    assert_same_steps(metrics(tmp_path / "run")[-2:], whole[2:4])


def test_a_killed_rank_stops_the_run_with_its_name_and_the_run_resumes(tmp_path, whole):
    import time

    import psutil

    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=2", "-m", "rlve.train", *FAST, f"output_dir={run_dir}",
               "trainer.max_steps=40"]  # fmt: skip
    launcher = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    log = run_dir / "metrics.jsonl"
    while not (log.exists() and len(log.read_text().splitlines()) >= 3):  # past a checkpoint
        assert launcher.poll() is None, launcher.stderr.read()
        time.sleep(0.2)
    rank_1 = [p for p in psutil.Process(launcher.pid).children(recursive=True)
              if p.environ().get("RANK") == "1"]  # fmt: skip
    assert len(rank_1) == 1
    rank_1[0].kill()
    _, report = launcher.communicate(timeout=600)
    assert launcher.returncode != 0
    assert "rank      : 1" in report and "SIGKILL" in report, report[-3000:]
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert saved and all(name.startswith("step_") for name in saved)

    last = int(saved[-1].removeprefix("step_"))
    in_one_process(run_dir, f"trainer.max_steps={last + 1}", "resume=true")
    resumed = metrics(run_dir)[-1]
    assert resumed["step"] == last + 1
    assert resumed["reward/mean"] == metrics_of_step(whole, last + 1)["reward/mean"]


def metrics_of_step(rows, step):
    return next(row for row in rows if row["step"] == step)
