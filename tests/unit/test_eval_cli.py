"""The evaluation command: scripted runs end to end into a folder, and one-line usage errors."""

from __future__ import annotations

import argparse
import json

import pytest

from rlve.cli.eval import build_parser, engine_kind, main, metrics_table

OPTIMAL_OPPONENT = '{"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}'
MINIMAX = "rlve.envs.tictactoe:minimax_policy"


def test_minimax_against_the_optimal_opponent_draws_every_game(tmp_path, capsys):
    out = tmp_path / "eval"
    main(["--env", "tictactoe", "--env-args", OPTIMAL_OPPONENT, "--policy", MINIMAX,
          "--num-examples", "12", "--rollouts", "2", "--seed", "0", "--api-key", "sk-secret",
          "--out", str(out)])  # fmt: skip
    written = json.loads((out / "summary.json").read_text())
    metrics, config = written["metrics"], written["config"]
    # every game a draw with perfect format: reward 0.5 (draw) + 0.2 * 1.0 (format)
    assert metrics["game/draw"] == 1.0
    assert metrics["game/win"] == metrics["game/loss"] == metrics["game/invalid"] == 0.0
    assert metrics["reward/mean"] == pytest.approx(0.7)
    assert config["engine"] == "scripted" and config["num_examples"] == 12
    assert config["env_args"] == {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}
    assert config["sampling"]["max_tokens"] == 128  # the environment's default
    assert "api_key" not in config and "sk-secret" not in (out / "summary.json").read_text()
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 12 * 2
    assert {round(r["reward"], 6) for r in rows} == {0.7}
    assert all(r["completion"][-1]["content"].startswith("It's a draw.") for r in rows)
    printed = capsys.readouterr().out
    assert "game/draw                        1.0000" in printed
    assert "12 examples x 2 rollouts" in printed


def test_the_same_seed_writes_the_same_rollouts(tmp_path):
    args = ["--env", "tictactoe", "--policy", MINIMAX, "--num-examples", "5", "--seed", "3"]
    main([*args, "--out", str(tmp_path / "a")])
    main([*args, "--out", str(tmp_path / "b")])
    first = (tmp_path / "a" / "rollouts.jsonl").read_text()
    assert first == (tmp_path / "b" / "rollouts.jsonl").read_text()
    assert len(first.splitlines()) == 5


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--env", "tictacto"], "unknown environment 'tictacto'; did you mean ['tictactoe']?"),
        (["--env", "tictactoe", "--env-args", "{bad"], "--env-args is not valid JSON"),
        (["--env", "tictactoe", "--env-args", "[1]"], "--env-args must be a JSON object"),
        (["--env", "tictactoe", "--env-args", '{"foo": 1}'], "has no argument(s) ['foo']"),
        (["--env", "tictactoe", "--env-args", '{"min_random_move_prob": 2}'],
         "min_random_move_prob must be a probability in [0, 1], got 2"),
        (["--env", "tictactoe", "--engine", "scripted"], "--engine scripted needs --policy"),
        (["--env", "tictactoe", "--policy", "nowhere:x"], "cannot import 'nowhere'"),
        (["--env", "tictactoe", "--policy", "minimax_policy"], "must look like 'package.module"),
        (["--env", "tictactoe", "--engine", "openai", "--base-url", "http://127.0.0.1:1/v1"],
         "--engine openai needs --model"),
        (["--env", "tictactoe", "--policy", MINIMAX, "--temperature", "-1"],
         "temperature must be >= 0, got -1.0"),
        (["--env", "tictactoe", "--policy", MINIMAX, "--rollouts", "0"],
         "--rollouts must be >= 1, got 0"),
        (["--env", "tictactoe", "--model", "./no/such/dir"], "model directory './no/such/dir'"),
    ],
)  # fmt: skip
def test_bad_arguments_exit_2_with_one_line_that_says_why(extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*extra, "--out", str(tmp_path / "never")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evaluate.py: error: ")
    assert message in err
    assert not (tmp_path / "never").exists()


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--env", "tictactoe", *argv])


def test_the_engine_follows_from_the_flags_given(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert engine_kind(_args("--policy", MINIMAX)) == "scripted"
    assert engine_kind(_args("--base-url", "http://127.0.0.1:8000/v1", "--model", "m")) == "openai"
    assert engine_kind(_args()) == "vllm"
    assert engine_kind(_args("--model", "tiny")) == "vllm"


def test_the_table_shows_the_main_metrics_present_in_order():
    summary = {"reward/mean": 0.7, "reward/std": 0.0, "reward/max": 0.7, "reward/win_reward": 0.5,
               "game/draw": 1.0, "stop/game_over": 1.0, "errors/win_reward": 2.0,
               "game/draw/ci95_low": 0.8389, "game/draw/ci95_high": 1.0}  # fmt: skip
    lines = metrics_table(summary).splitlines()
    assert [line.split()[0] for line in lines[2:]] == [
        "reward/mean",
        "reward/std",
        "reward/win_reward",
        "game/draw",
        "errors/win_reward",
    ]
    assert lines[2] == f"{'reward/mean':<28} {'0.7000':>10}"
    assert lines[5] == f"{'game/draw':<28} {'1.0000':>10}  0.839-1.000"  # 20 of 20 games


@pytest.mark.vllm
def test_the_tiny_model_on_vllm_writes_token_exact_rollouts(tmp_path):
    out = tmp_path / "eval"
    main(["--env", "tictactoe", "--model", "tiny", "--num-examples", "2", "--max-tokens", "8",
          "--max-model-len", "1024", "--out", str(out)])  # fmt: skip
    metrics = json.loads((out / "summary.json").read_text())["metrics"]
    rows = (out / "rollouts.jsonl").read_text().splitlines()
    assert len(rows) == 2
    # Token-exact rollouts from vLLM: completion lengths are counted, each turn at most 8 tokens.
    assert 0 < metrics["completion/len_mean"] <= 8 * 7
    assert metrics["game/win"] + metrics["game/draw"] + metrics["game/loss"] <= 1.0
