"""`warmup.*`: the SFT warm-up a run does before RL, and `evaluation.*`: what it plays before
its first step and after its last (rlve.training.warmup, rlve.training.run_evaluation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlve.config.checks import is_int, require, require_choice

WARMUP_WHEN = ("auto", "always", "never")
WARMUP_ENVIRONMENT = "tictactoe"
"""the one environment with a scripted teacher the warm-up can learn from (noisy minimax)"""
TEACHER_REASONS = ("verdict", "lines", "threats")
"""rlve.envs.tictactoe.policies.REASONS (kept here: importing it would load the environments)"""


@dataclass
class WarmupConfig:
    """SFT on a scripted teacher's games before RL, so that the student starts from legal moves.
    Its model and data go to `<output_dir>/sft_model` and `sft_data.jsonl`; a resumed run, or a
    new one in the same directory with the same settings, reuses them."""

    when: str = "never"
    """"auto": warm up unless `trainer.model` is a directory rlve already trained on this
    environment (its `trained_on.json` names it: the warm-up's and every run's exported model
    has one); "always"; "never" (the RL run starts from `trainer.model` as it is)"""
    teacher_games: int = 600
    """games the noisy minimax teacher plays against the run's opponent range; the won and
    drawn ones with every answer well formed are kept"""
    teacher_noise: float = 0.5
    """share of the teacher's moves played at random; in [0, 1]. At 0.5 it draws 42% against
    the optimal opponent: a teacher the student can pass (docs/results.md)"""
    teacher_reasons: str = "verdict"
    """how the teacher words its think blocks: "verdict" (the cell, then why), "lines" (the two
    marks of the line first), "threats" (the position's threats first)"""
    best_moves_only: bool = True
    """the teacher's deliberate random moves stay in its games but out of the loss"""
    steps: int = 30
    """SFT optimizer steps (full fine-tuning, cosine schedule, 10% warm-up); the loss is flat
    after about 30 on SmolLM2 (docs/results.md, "The SFT student"); >= 1"""
    lr: float = 3e-5
    """SFT peak learning rate; > 0"""
    batch_size: int = 8
    """games per SFT step; >= 1"""
    seed: int = 0
    """seed of the teacher's games and of the SFT order"""

    def validate(self, env_names: list[str]) -> None:
        require_choice("warmup.when", self.when, WARMUP_WHEN)
        require_choice("warmup.teacher_reasons", self.teacher_reasons, TEACHER_REASONS)
        for name in ("teacher_games", "steps", "batch_size"):
            value = getattr(self, name)
            require(is_int(value) and value >= 1, f"warmup.{name} must be >= 1, got {value!r}")
        require(0 <= self.teacher_noise <= 1,
                f"warmup.teacher_noise must be in [0, 1], got {self.teacher_noise}")  # fmt: skip
        require(self.lr > 0, f"warmup.lr must be > 0, got {self.lr}")
        require(
            self.when == "never" or list(env_names) == [WARMUP_ENVIRONMENT],
            f"warmup.when={self.when!r} needs env.names=[{WARMUP_ENVIRONMENT}] (its scripted "
            f"teacher plays tic-tac-toe), got {list(env_names)}: set warmup.when=never, or warm "
            "up on your own data with scripts/sft_warmup.py and pass trainer.model=<its output>",
        )


@dataclass
class EvaluationConfig:
    """Games played on the run's own engine before the first step and after the last, at the
    run's temperature and token limit; written to `<output_dir>/evaluation.json` with a 95%
    interval for each rate, and printed."""

    games: int = 0
    """examples of each environment of `env.names` played once each; 0 = no evaluation"""
    env_args: dict[str, Any] = field(default_factory=dict)
    """keyword arguments that replace the run's own for the evaluation, e.g.
    {min_random_move_prob: 0.0, max_random_move_prob: 0.0}: the optimal opponent alone"""
    seed: int = 0
    """seed of the evaluation's draw of examples and of each game's own seed (`rlve.evaluate`'s);
    the examples themselves are the environment's: give it a seed of its own in `env_args` (the
    run's would replay training's examples)"""

    def validate(self) -> None:
        require(is_int(self.games) and self.games >= 0,
                f"evaluation.games must be >= 0 (0 = none), got {self.games!r}")  # fmt: skip
