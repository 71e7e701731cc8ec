"""The real loop: vLLM on the CPU samples, the trainer learns, the weights go back into vLLM."""

import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import torch
from test_chaos import metrics  # metrics.jsonl rows without times

from rlve.loop import build_engine, train
from rlve.models import load_tokenizer
from rlve.reliability.processes import run_processes
from rlve.train import load_run_config

pytestmark = pytest.mark.vllm

SMALL = [
    "+experiment=tictactoe_course",
    "stop_if_unplayable=false",  # the tiny model never plays a legal move
    "rollout.groups_per_step=4",
    "rollout.group_size=4",
    "rollout.max_tokens=32",
    "rollout.async_level=0",
    "env.args.tictactoe.max_turns=4",
    "logging.wandb_mode=disabled",
    "logging.console_every=0",
    "trainer.lr=1e-3",
    "inference.max_model_len=1024",
]


PROBE = (
    "<|im_start|>user\n 0 | 1 | 2\n---------\n 3 | 4 | 5\n---------\n 6 | 7 | 8"
    "<|im_end|>\n<|im_start|>assistant\n<think>x</think>\n<move>4</move><|im_end|>"
)
"""a fixed sequence to compare served and trained log-probs on: a game's prompt and a move"""


def trainer_logprobs(trainer, ids: list[int]) -> list[float]:
    """Per-token log-probs of `ids` under the trainer's model (LoRA active), temperature 1."""
    with torch.no_grad():
        logits = trainer.model(torch.tensor([ids])).logits[0, :-1].double()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


@pytest.mark.parametrize(
    ("transport", "replicas"), [("shared_memory", 1), ("gloo", 1), ("gloo", 2)]
)
def test_three_cispo_steps_push_weights_that_vllm_serves_exactly(
    tmp_path, warm_model, transport, replicas, capfd
):
    """Every replica serves the trainer's weights after every push (with 2 replicas: one gloo
    broadcast group holding both engines' workers), and every replica gets requests."""
    probe = None
    served_by_step = []
    gaps = []
    requests = []

    def check(step, trainer, engine, metrics):
        nonlocal probe
        assert math.isfinite(metrics["train/loss"])
        if probe is None:
            probe = trainer.tokenizer.encode(PROBE)
        mine = trainer_logprobs(trainer, probe)
        for replica in range(replicas):
            served = engine.prompt_logprobs(probe, replica)
            gaps.append(max(abs(a - b) for a, b in zip(served, mine, strict=True)))
        served_by_step.append(served)
        requests.append(list(engine.requests_per_replica))

    config = load_run_config(
        [
            *SMALL,
            f"trainer.model={warm_model}",
            "trainer.max_steps=3",
            f"output_dir={tmp_path}",
            f"inference.weight_transport={transport}",
            f"inference.replicas={replicas}",
        ]
    )
    train(config, on_step=check)
    assert len(requests[0]) == replicas and all(n > 0 for n in requests[0]), requests
    # the served model changes with every push and matches the trainer (tied lm_head included);
    # vLLM's CPU kernels keep their own packed copy of linear weights, so the check is on outputs
    assert len(served_by_step) == 3
    for before, after in zip(served_by_step, served_by_step[1:], strict=False):
        assert max(abs(a - b) for a, b in zip(before, after, strict=True)) > 1e-5
    assert len(gaps) == 3 * replicas and max(gaps) < 1e-4, gaps
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["perf/sync_s"] > 0 and math.isfinite(r["train/loss"]) for r in rows)
    assert all(r["reward/std"] > 0 for r in rows)  # the warm model gives a learning signal
    # vLLM's log lines (its engine and worker processes' too) are in the run's folder, not on
    # the console: "INFO 12-01 16:45:31 [core.py:133] ..." is vLLM's own line format
    assert re.search(r"INFO \d+ EngineCore|INFO \d+ vllm", (tmp_path / "vllm.log").read_text())
    console = "".join(capfd.readouterr())
    assert not re.search(r"(INFO|WARNING) \d\d-\d\d \d\d:", console), console[-2000:]


def test_an_engine_started_on_the_base_model_serves_the_run_s_model_before_step_one(
    tmp_path, warm_model
):
    """An engine started before the run (say, while an SFT made its model) on the base model
    is handed to train(), which pushes the run's weights into it before anything else and shuts
    it down at the end."""
    config = load_run_config(
        [*SMALL, f"trainer.model={warm_model}", "trainer.max_steps=1", f"output_dir={tmp_path}"]
    )
    on_base = replace(config, trainer=replace(config.trainer, model="tiny"))
    engine = build_engine(on_base, load_tokenizer("tiny"))
    probe = engine.tokenizer.encode(PROBE)
    served_before = engine.prompt_logprobs(probe, 0)
    gaps = []

    def check(trainer, engine_seen):
        assert engine_seen is engine
        served = engine.prompt_logprobs(probe, 0)
        for other in (trainer_logprobs(trainer, probe), served_before):
            gaps.append(max(abs(a - b) for a, b in zip(served, other, strict=True)))

    train(config, on_start=check, engine=engine)
    assert gaps[0] < 1e-4, gaps  # the student's weights, not the base model's
    assert gaps[1] > 0.1, gaps  # the SFT moved the model that far from the base
    assert engine._replicas == []  # shut down with the run


def killed_run(run_dir, overrides: list[str], kill_at: str):
    """Runs `python -m rlve.train` until it kills itself at `kill_at`, watching the run's processes
    meanwhile. Returns its pid, every process of the run seen while it ran, and how long those
    took to end after the kill (None: some were still there after 60 s)."""
    env = {**os.environ, "RLVE_KILL_AT": kill_at}
    command = [sys.executable, "-m", "rlve.train", *overrides, f"output_dir={run_dir}"]
    log = run_dir.parent / f"{run_dir.name}.log"
    seen = {}
    with log.open("w") as out:
        run = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        while run.poll() is None:
            seen.update((p.pid, p) for p in run_processes(run_dir=run_dir))
            time.sleep(0.5)
    assert run.returncode == -9, f"the run did not reach {kill_at}:\n{log.read_text()[-3000:]}"
    killed = time.monotonic()
    while run_processes(run_dir=run_dir):
        if time.monotonic() - killed > 60:
            return run.pid, list(seen.values()), None
        time.sleep(0.1)
    ended_after_s = time.monotonic() - killed
    while watchdog_of(run.pid) and time.monotonic() - killed < 60:  # it removes the files last
        time.sleep(0.1)
    return run.pid, list(seen.values()), ended_after_s


def watchdog_of(pid: int) -> list[psutil.Process]:
    """The watchdog process of the run whose main process is `pid`, while it runs."""
    found = []
    for process in psutil.process_iter():
        try:
            if f"rlve.reliability.watchdog {pid} " in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.parametrize("async_level", [0, 1])
def test_a_run_killed_during_a_weight_push_leaves_nothing_behind_and_resumes_exactly(
    tmp_path, warm_model, async_level
):
    """SIGKILL of the main process while step 3's weights go into vLLM: the watchdog ends vLLM's
    engine core and workers and removes the weight file; the resume from step 2's checkpoint logs
    steps 3 and 4 as the uninterrupted run did (async 1: the checkpoint holds the batch already
    generated for step 3 by step 1's weights)."""
    small = [o for o in SMALL if not o.startswith("rollout.async_level")]
    common = [*small, f"rollout.async_level={async_level}", f"trainer.model={warm_model}"]
    common += ["save_every=2", "trainer.max_steps=4"]
    whole = train(load_run_config([*common, f"output_dir={tmp_path / 'whole'}"]))
    run_dir = tmp_path / "killed"
    pid, seen, ended_after_s = killed_run(run_dir, common, "weight_push@3")
    commands = " ".join(p.command for p in seen)
    assert "VLLM::EngineCore" in commands and "VLLM::Worker" in commands, commands
    assert ended_after_s is not None, run_processes(run_dir=run_dir)
    print(f"{len(seen)} processes of the killed run ended {ended_after_s:.1f} s after the kill")
    assert not list(Path("/dev/shm").glob(f"rlve-weights-{pid}-*"))
    train(load_run_config([*common, f"output_dir={run_dir}", "resume=true"]))

    # every rollout of a step was sampled by the weights of one version: the trainer's (async 0),
    # or the one before it from step 2 on (async 1)
    lags = [(r["sampling/weight_lag_min"], r["sampling/weight_lag_max"]) for r in metrics(whole)]
    assert lags == ([(0, 0)] * 4 if async_level == 0 else [(0, 0)] + [(1, 1)] * 3)
    expected, resumed = metrics(whole), metrics(run_dir)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    for a, b in zip(expected, resumed, strict=True):
        assert a.keys() == b.keys()
        mismatched = {
            k: (a[k], b[k]) for k in a if not math.isclose(a[k], b[k], rel_tol=1e-4, abs_tol=1e-6)
        }
        assert not mismatched, (a["step"], mismatched)


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_dead_engine_stops_the_run_with_a_clear_error_and_the_checkpoint_intact(
    tmp_path, replicas
):
    """With two replicas only the second dies, and the error names it."""

    from rlve.inference.vllm_engine import EngineDiedError
    from rlve.training.checkpoint import load_trainer_state

    def kill_engine_after_step_1(step, trainer, engine, metrics):
        if step == 1:
            cores = [p for p in psutil.Process().children(recursive=True)
                     if p.name() == "VLLM::EngineCore"]  # fmt: skip
            assert len(cores) == replicas
            cores[-1].kill()

    overrides = ["trainer.max_steps=4", "save_every=1", f"inference.replicas={replicas}"]
    config = load_run_config([*SMALL, *overrides, f"output_dir={tmp_path}"])
    which = r"\(replica 1 of 2\) " if replicas == 2 else ""
    with pytest.raises(EngineDiedError, match=f"engine process {which}died.*resume=true continues"):
        train(config, on_step=kill_engine_after_step_1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000001"]
    assert load_trainer_state(str(tmp_path / "checkpoints" / "step_00000001"))["step"] == 1
    rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(row)["step"] for row in rows] == [1]
