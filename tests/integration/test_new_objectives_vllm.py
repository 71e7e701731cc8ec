"""The 2026 objectives run end to end through vLLM on the tiny model, from the command line's
overrides alone: DPPO (both masks) on `make smoke`'s vowels task, whose reward is graded, and
MaxRL on the calculator, whose exact-answer reward is 0 or 1 (MaxRL refuses any other)."""

import json

import pytest

from rlve.loop import train
from rlve.train import load_run_config

pytestmark = pytest.mark.vllm


@pytest.mark.parametrize(
    "overrides",
    [
        ["trainer.loss=dppo_tv"],
        ["trainer.loss=dppo_kl"],
        [
            "trainer.advantage=maxrl",
            "env.names=[calculator]",
            "+env.args.calculator.num_examples=16",
            "inference.max_model_len=1024",
        ],
    ],
    ids=["dppo_tv", "dppo_kl", "maxrl"],
)
def test_a_two_step_tiny_run_trains(tmp_path, overrides):
    config = load_run_config(["+experiment=smoke", f"output_dir={tmp_path}", "trainer.max_steps=2",
                              "logging.console_every=0", *overrides])  # fmt: skip
    train(config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert all(row["train/skipped_groups"] == 0.0 and row["faults/rate"] == 0.0 for row in rows)
