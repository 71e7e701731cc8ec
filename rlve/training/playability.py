"""The first batch's check (`stop_if_unplayable`): a model that almost never gives an answer the
environment can act on (a legal move) learns nothing from RL, every episode scoring the same
penalty, so the run stops before its first optimizer step and names the warm-up that fixes it."""

from __future__ import annotations

from collections.abc import Mapping

from rlve.envs.base import Environment

WARMUP_FIX = ("warm it up first: add warmup.when=always to this command (tic-tac-toe: SFT on a "
              "noisy minimax teacher's games), or run scripts/sft_warmup.py on your own data and "
              "pass trainer.model=<its output>")  # fmt: skip
TINY_FIX = ("the embedded tiny model cannot learn tic-tac-toe (docs/results.md, section 5): "
            "use model=smollm2_135m, or a model of your own (trainer.model=<dir>)")  # fmt: skip


class ModelCannotPlay(RuntimeError):
    """The first batch's answers were (almost) never legal."""


def legal_answer_shares(
    metrics: Mapping[str, float], envs: Mapping[str, Environment]
) -> dict[str, float]:
    """metric name -> the batch's mean, for each `legal_answer_metric` the environments declare."""
    names = dict.fromkeys(e.legal_answer_metric for e in envs.values() if e.legal_answer_metric)
    return {name: metrics[name] for name in names if name in metrics}


def check_playable(
    metrics: Mapping[str, float],
    envs: Mapping[str, Environment],
    model: str,
    min_legal: float,
    warmed_up: bool,
) -> None:
    """Raise ModelCannotPlay when a legal-answer share of the first batch is under `min_legal`,
    with the batch's escape metrics (invalid, malformed answers...) and the fix."""
    for name, share in legal_answer_shares(metrics, envs).items():
        if share >= min_legal:
            continue
        escapes = dict.fromkeys(m for e in envs.values() for m in e.escape_metrics)
        seen = ", ".join(f"{m} {metrics[m]:.2f}" for m in escapes if m in metrics)
        if model == "tiny":
            fix = TINY_FIX
        elif warmed_up:
            fix = "give the warm-up more steps (warmup.steps, warmup.lr) or take a larger model"
        else:
            fix = WARMUP_FIX
        who = f"model {model!r}" + (" after its SFT warm-up" if warmed_up else "")
        raise ModelCannotPlay(
            f"{who} cannot play: {share:.1%} of the first batch's answers were legal ({name}; "
            f"under min_legal_answers={min_legal}); {seen}. RL from here would train on one "
            f"penalty for every episode. Fix: {fix}. stop_if_unplayable=false trains on "
            "regardless."
        )
