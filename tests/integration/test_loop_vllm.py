"""The real loop: vLLM on the CPU samples, the trainer learns, the weights go back into vLLM."""

import json
import math

import pytest
import torch

from rlve.loop import train
from rlve.train import load_run_config

pytestmark = pytest.mark.vllm

SMALL = [
    "+experiment=tictactoe_cispo",
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
    tmp_path, warm_model, transport, replicas
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
        if probe is None:  # a fixed sequence: the chat prompt of a game and a few moves
            probe = trainer.tokenizer.encode(
                "<|im_start|>user\n 0 | 1 | 2\n---------\n 3 | 4 | 5\n---------\n 6 | 7 | 8"
                "<|im_end|>\n<|im_start|>assistant\n<think>x</think>\n<move>4</move><|im_end|>"
            )
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


@pytest.mark.parametrize("async_level", [0, 1])
def test_resume_gives_the_same_step_4_metrics(tmp_path, warm_model, async_level):
    # async 1: the checkpoint holds the batch already generated for step 3 (by step 1's weights)
    small = [o for o in SMALL if not o.startswith("rollout.async_level")]
    common = [*small, f"rollout.async_level={async_level}", f"trainer.model={warm_model}"]
    common.append("save_every=2")
    whole = train(load_run_config([*common, "trainer.max_steps=4", f"output_dir={tmp_path / 'a'}"]))
    part = [*common, f"output_dir={tmp_path / 'b'}"]
    train(load_run_config([*part, "trainer.max_steps=2"]))
    resumed = train(load_run_config([*part, "trainer.max_steps=4", "resume=true"]))

    def rows(run_dir):
        return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]

    def step4(run_dir):
        return {
            k: v for k, v in rows(run_dir)[-1].items() if k != "time" and not k.startswith("perf/")
        }

    # every rollout of a step was sampled by the weights of one version: the trainer's (async 0),
    # or the one before it from step 2 on (async 1)
    lags = [(r["sampling/weight_lag_min"], r["sampling/weight_lag_max"]) for r in rows(whole)]
    expected = [(0, 0)] * 4 if async_level == 0 else [(0, 0)] + [(1, 1)] * 3
    assert lags == expected
    a, b = step4(whole), step4(resumed)
    assert a["step"] == b["step"] == 4
    assert a.keys() == b.keys()
    mismatched = {
        k: (a[k], b[k]) for k in a if not math.isclose(a[k], b[k], rel_tol=1e-4, abs_tol=1e-6)
    }
    assert not mismatched


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_dead_engine_stops_the_run_with_a_clear_error_and_the_checkpoint_intact(
    tmp_path, replicas
):
    """With two replicas only the second dies, and the error names it."""
    import psutil

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
