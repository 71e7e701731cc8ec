"""Environments rlve has never seen, through real vLLM with the tiny model, from the command line:
a verifiers game installed as a package and an OpenEnv server (the guessing game of
tests/fixtures/openenv_guess), each trained with `python -m rlve.train` and evaluated with
`scripts/evaluate.py`; and a server killed in the middle of a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("verifiers")
pytest.importorskip("openenv.core.env_server", reason="openenv-core serves the test game")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit"))  # the fixture packages' installer
import verifiers_packages  # noqa: E402


@pytest.fixture(scope="module")
def vf_site(tmp_path_factory) -> Path:
    site = verifiers_packages.install(tmp_path_factory.mktemp("vf_site"))
    yield site
    sys.path.remove(str(site))


def run(command: list[str], site: Path, log: Path) -> None:
    """Run a command with the fixture packages importable; its output goes to `log`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    with open(log, "w") as out:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    assert done.returncode == 0, log.read_text()[-3000:]


def test_a_verifiers_game_trains_and_evaluates_from_the_command_line(vf_site, tmp_path):
    run_dir = tmp_path / "train"
    run([sys.executable, "-m", "rlve.train", "env.names=[verifiers:vf_nim]", "trainer.max_steps=2",
         "rollout.groups_per_step=2", "rollout.group_size=4", "logging.wandb_mode=disabled",
         f"output_dir={run_dir}"], vf_site, tmp_path / "train.log")  # fmt: skip
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        # verifiers' rubric scored every episode (its metrics: won, legal_moves, num_turns),
        # and no episode failed
        assert {"reward/won", "reward/legal_moves", "reward/num_turns"} <= set(row)
        assert row["faults/rate"] == 0.0 and row["batch/groups"] == 2.0
        assert row["episode/turns_mean"] >= 1.0

    eval_dir = tmp_path / "eval"
    run([sys.executable, "scripts/evaluate.py", "--env", "verifiers:vf_nim", "--model",
         str(run_dir / "model"), "--num-examples", "6", "--out", str(eval_dir)], vf_site,
        tmp_path / "eval.log")  # fmt: skip
    rollouts = [json.loads(line) for line in (eval_dir / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 6
    assert all("reward/won" in r["metrics"] for r in rollouts)


def metric_rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


OPENENV_RUN = ["env.names=[openenv]", "rollout.groups_per_step=2", "rollout.group_size=4",
               "rollout.max_tokens=8", "logging.wandb_mode=disabled"]  # fmt: skip


def test_an_openenv_server_trains_and_evaluates_from_the_command_line(tmp_path):
    from rlve.envs.openenv.local_server import local_server

    with local_server("openenv_guess.app:app", app_dir=ROOT / "tests" / "fixtures") as server:
        run_dir = tmp_path / "train"
        run([sys.executable, "-m", "rlve.train", *OPENENV_RUN,
             f"+env.args.openenv.url={server.url}", "trainer.max_steps=2",
             f"output_dir={run_dir}"], tmp_path, tmp_path / "train.log")  # fmt: skip
        rows = metric_rows(run_dir)
        assert [r["step"] for r in rows] == [1, 2]
        assert all(r["faults/rate"] == 0.0 and r["openenv/steps"] >= 1 for r in rows), rows
        eval_dir = tmp_path / "eval"
        run([sys.executable, "scripts/evaluate.py", "--env", "openenv", "--env-args",
             json.dumps({"url": server.url}), "--model", str(run_dir / "model"),
             "--num-examples", "4", "--max-tokens", "8", "--out", str(eval_dir)], tmp_path,
            tmp_path / "eval.log")  # fmt: skip
    summary = json.loads((eval_dir / "summary.json").read_text())["metrics"]
    assert summary["openenv/failed"] == 0.0 and summary["openenv/steps"] >= 1


def test_a_server_killed_mid_run_stops_the_run_with_a_message_that_names_it(tmp_path):
    """Two clean steps, then the server dies: each later episode is an env_error fault, and the
    fault window (16 episodes here) stops the run with a report that names the server. (With
    the default window of 512 the run goes on, counting faults, until the window fills.)"""
    from rlve.envs.openenv.local_server import local_server

    with local_server("openenv_guess.app:app", app_dir=ROOT / "tests" / "fixtures") as server:
        run_dir = tmp_path / "train"
        command = [sys.executable, "-m", "rlve.train", *OPENENV_RUN,
                   f"+env.args.openenv.url={server.url}", "trainer.max_steps=8",
                   "rollout.fault_window=16", f"output_dir={run_dir}"]  # fmt: skip
        log = tmp_path / "train.log"
        with open(log, "w") as out:
            process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            while len(metric_rows(run_dir)) < 2 and process.poll() is None:
                time.sleep(0.2)
            server.kill()
            code = process.wait(timeout=600)
    text = log.read_text()
    assert code != 0, text[-3000:]
    # the window of 16 (two clean steps) holds 8 faulty episodes as soon as step 3 is played:
    # the run stops there, before it trains on them
    assert [(r["step"], r["faults/rate"]) for r in metric_rows(run_dir)] == [(1, 0.0), (2, 0.0)]
    assert "8 of the last 16 episodes" in text and "env_error 8" in text, text[-3000:]
    assert f"OpenEnv server {server.url}" in text, text[-3000:]
