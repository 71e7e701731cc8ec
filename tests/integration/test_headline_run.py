"""The headline command's run on the tiny model: the warm-up made once and reused on resume, the
evaluation before and after, the exported model marked as trained on the game; and through real
vLLM, a model that cannot play stopped at its first batch with the fix named."""

import json

import pytest
from omegaconf import OmegaConf

from rlve.loop import train
from rlve.train import load_run_config
from rlve.training.playability import TINY_FIX, ModelCannotPlay
from rlve.training.warmup import trained_on

SMALL = [
    "+experiment=tictactoe_cispo",
    "model=tiny",
    "warmup.teacher_games=24",
    "warmup.steps=2",
    "warmup.batch_size=4",
    "rollout.groups_per_step=2",
    "rollout.group_size=2",
    "evaluation.games=4",
    "evaluation.env_args.num_examples=4",
    "logging.wandb_mode=disabled",
    "logging.console_every=0",
]
MINIMAX = ["rollout.engine=scripted", "rollout.scripted_policy=rlve.envs.tictactoe:minimax_policy"]


def test_the_warm_up_is_made_once_and_the_start_is_evaluated_once(tmp_path, capsys):
    out = tmp_path / "run"
    config = load_run_config([*SMALL, *MINIMAX, "trainer.max_steps=1", f"output_dir={out}"])
    train(config)
    sft = out / "sft_model"
    assert trained_on(str(sft)) == ["tictactoe"] and trained_on(str(out / "model")) == ["tictactoe"]
    assert json.loads((out / "sft_info.json").read_text())["settings"]["warmup"]["steps"] == 2
    stages = json.loads((out / "evaluation.json").read_text())
    # the scripted minimax plays both stages: every game against the optimal opponent a draw
    start, end = stages["start"]["scores"], stages["end"]["scores"]
    assert start["tictactoe/game/draw"] == end["tictactoe/game/draw"] == 1.0
    assert (stages["start"]["step"], stages["end"]["step"]) == (0, 1)
    games = stages["end"]["games"]["tictactoe"]  # kept game by game, to pair two runs
    assert sorted(g["example_id"] for g in games) == sorted({g["example_id"] for g in games})
    assert len(games) == 4 and all(g["game/draw"] == 1.0 for g in games)
    made = sft.stat().st_mtime_ns
    capsys.readouterr()
    resumed = load_run_config([*SMALL, *MINIMAX, "trainer.max_steps=2", "resume=true",
                               f"output_dir={out}"])  # fmt: skip
    train(resumed)
    assert f"SFT student: {sft} (already there)" in capsys.readouterr().out
    assert sft.stat().st_mtime_ns == made
    again = json.loads((out / "evaluation.json").read_text())
    assert again["start"] == stages["start"] and again["end"]["step"] == 2  # the end played again
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert OmegaConf.load(out / "config.yaml").trainer.model == str(sft)  # what it trained


@pytest.mark.vllm
def test_the_tiny_model_is_stopped_at_its_first_batch_and_told_the_fix(tmp_path):
    out = tmp_path / "tiny"
    config = load_run_config([*SMALL, "warmup.when=never", "evaluation.games=0",
                              "rollout.max_tokens=16", f"output_dir={out}"])  # fmt: skip
    with pytest.raises(ModelCannotPlay, match="0.0% of the first batch's answers") as error:
        train(config)
    assert TINY_FIX in str(error.value)
    assert (out / "metrics.jsonl").read_text() == ""  # no step was logged, none trained
    assert not (out / "checkpoints").exists() and not (out / "model").exists()
