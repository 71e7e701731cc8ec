"""Rollouts that span weight pushes (`rollout.max_staleness`) through vLLM on the tiny model.

Each model turn is held back by 0.5 s before it reaches vLLM, so a batch of 4-turn games takes
seconds to play while the tiny model's optimizer step takes a fraction of that: the trainer's
pushes land while the batches ahead are played, between their turns."""

import asyncio
import json

import pytest
from test_loop_vllm import SMALL

from rlve.loop import build_engine, train
from rlve.models import load_tokenizer
from rlve.train import load_run_config

pytestmark = pytest.mark.vllm

TURN_DELAY_S = 0.5


class SlowTurns:
    """The run's vLLM engine, each turn sent 0.5 s late (pushes and the rest as they are)."""

    def __init__(self, engine):
        self.engine = engine

    def __getattr__(self, name):
        return getattr(self.engine, name)

    async def generate(self, request):
        await asyncio.sleep(TURN_DELAY_S)
        return await self.engine.generate(request)

    def push_weights(self, named_tensors, version):
        return self.engine.push_weights(named_tensors, version)

    def shutdown(self):
        self.engine.shutdown()


def test_rollouts_span_pushes_and_stay_within_two_versions(tmp_path, warm_model):
    overrides = [*SMALL, f"trainer.model={warm_model}", "trainer.max_steps=5",
                 "rollout.max_staleness=2", f"output_dir={tmp_path}"]  # fmt: skip
    config = load_run_config(overrides)
    engine = SlowTurns(build_engine(config, load_tokenizer(warm_model)))
    train(config, engine=engine)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5]
    # the two batches ahead start under version 0; from step 2 on every batch was being played
    # when the step before it pushed
    assert rows[0]["async/version_span_max"] == 1 and rows[0]["sampling/weight_lag_max"] == 0
    assert max(row["async/version_span_max"] for row in rows[1:]) >= 2
    for row in rows:
        assert row["sampling/weight_lag_max"] <= 2 and row["async/staleness_over"] == 0
        assert row["async/dropped_rollouts"] == 0 and row["batch/stale_groups_dropped"] == 0
        shares = sum(row[f"async/staleness_{j}"] for j in range(3))
        assert shares == pytest.approx(1.0)
    print([(row["step"], row["async/version_span_mean"], row["sampling/weight_lag_mean"])
           for row in rows])  # fmt: skip
