"""Self-play tic-tac-toe through real vLLM with the tiny model: both seats are sampled, scored
and trained, and the trained model is evaluated against the scripted opponents."""

import json
from dataclasses import replace

import pytest

import rlve
from rlve.loop import build_engine, train
from rlve.models import load_tokenizer
from rlve.train import load_run_config

pytestmark = pytest.mark.vllm

RUN = [
    "+experiment=tictactoe_course",
    "stop_if_unplayable=false",  # the tiny model never plays a legal move
    "+env.args.tictactoe.opponent=self",
    "+env.args.tictactoe.scripted_fraction=0.25",
    "rollout.groups_per_step=4",
    "rollout.group_size=4",
    "rollout.max_tokens=24",
    "rollout.async_level=0",
    "env.args.tictactoe.max_turns=4",
    "trainer.max_steps=2",
    "logging.wandb_mode=disabled",
    "logging.console_every=0",
    "inference.max_model_len=1024",
]


def test_self_play_trains_both_seats_and_evaluates_against_the_scripted_opponents(tmp_path):
    config = load_run_config([*RUN, f"output_dir={tmp_path}"])
    train(config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        # a quarter of the dataset's games are scripted; the O seats of the others (those that
        # got to move: the untrained model's X may never play a valid move) are scored and
        # trained with the X seats (16 games a step)
        assert row["faults/rate"] == 0.0
        main_tokens = row["completion/len_mean"] * 16
        seats = row.get("seat/per_episode", 0.0)
        seat_tokens = row["seat/completion/len_mean"] * 16 * seats if seats else 0.0
        assert seats <= row["game/self_play"]
        assert row["train/num_tokens"] == pytest.approx(main_tokens + seat_tokens)
    assert any({"seat/reward/mean", "seat/game/win"} <= set(row) for row in rows)
    samples = "".join(path.read_text() for path in (tmp_path / "samples").glob("*.txt"))
    assert "=== seat 2 | reward" in samples  # the O seat's conversation, after X's

    env = rlve.load_environment("tictactoe", num_examples=4, max_turns=4)
    trained = replace(config, trainer=replace(config.trainer, model=str(tmp_path / "model")))
    engine = build_engine(trained, load_tokenizer(trained.trainer.model))
    try:
        result = rlve.evaluate(env, engine, 4)
    finally:
        engine.shutdown()
    assert len(result.groups) == 4
    assert all(not t.seats for g in result.groups for t in g.trajectories)  # scripted opponents
