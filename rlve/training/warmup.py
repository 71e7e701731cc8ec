"""The SFT warm-up a run does before RL (`warmup.*`), and the recipe's SFT student: a noisy
minimax teacher plays the run's own tic-tac-toe games, its won and drawn ones become SFT data,
and `sft_warmup` (the code behind scripts/sft_warmup.py) trains the student on them.

Its model goes to `<dir>/sft_model` with `trained_on.json`, its data to `sft_data.jsonl` and
what made it to `sft_info.json`: the same settings again reuse the model (a resumed run), other
settings make it afresh.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rlve.config import RunConfig, TrainerConfig
from rlve.config.warmup import WARMUP_ENVIRONMENT, WarmupConfig
from rlve.rollout.records import write_text_atomically

log = logging.getLogger(__name__)

TRAINED_ON = "trained_on.json"
"""the file in a model directory that names the environments rlve trained it on"""
TEACHER_ENV_ARGS = ("rules", "board", "min_random_move_prob", "max_random_move_prob")
"""the run's tic-tac-toe arguments the teacher's games follow (the rest are RL's rubric)"""


def trained_on(model: str) -> list[str]:
    """The environments rlve trained `model` on, from its directory's trained_on.json ([] for a
    name, a hub id or a directory without one)."""
    path = Path(model) / TRAINED_ON
    return list(json.loads(path.read_text())["environments"]) if path.is_file() else []


def mark_trained_on(model_dir: str | Path, environments: list[str], start: str) -> None:
    """Write trained_on.json: `environments` and what `start` model was already trained on."""
    names = list(dict.fromkeys([*trained_on(start), *environments]))
    record = {"environments": names, "started_from": str(start)}
    write_text_atomically(Path(model_dir) / TRAINED_ON, json.dumps(record, indent=1))


def needs_warmup(warmup: WarmupConfig, model: str) -> bool:
    """Whether a run with `warmup` starting from `model` warms up first."""
    if warmup.when == "auto":
        return WARMUP_ENVIRONMENT not in trained_on(model)
    return warmup.when == "always"


def warmed_up(config: RunConfig, run_dir: Path, device: str) -> RunConfig:
    """`config` starting from the SFT student the warm-up makes (or made) in `run_dir`, the
    trainer on `device` (rank 0's, resolved)."""
    log.info("warm-up: SFT of %s on a noisy minimax teacher's games", config.trainer.model)
    model = sft_student(run_dir, replace(config.trainer, device=device), config.warmup,
                        config.env.args_for(WARMUP_ENVIRONMENT))  # fmt: skip
    return replace(config, trainer=replace(config.trainer, model=str(model)))


def sft_student(
    out: Path, trainer: TrainerConfig, warmup: WarmupConfig, env_args: dict[str, Any]
) -> Path:
    """Teacher games -> SFT data -> the student `trainer.model` fine-tuned on them in
    `out/sft_model` (reused when `out/sft_info.json` holds the same settings). `env_args`: the
    run's tic-tac-toe arguments; those in TEACHER_ENV_ARGS shape the teacher's games."""
    from rlve.models import load_tokenizer
    from rlve.training.sft import SftSequence, save_examples, sft_warmup, tictactoe_teacher_data

    game_args = {k: env_args[k] for k in TEACHER_ENV_ARGS if k in env_args}
    settings = {"model": trainer.model, "dtype": trainer.dtype, "env_args": game_args,
                "max_tokens_per_microbatch": trainer.max_tokens_per_microbatch,
                "warmup": {k: v for k, v in asdict(warmup).items() if k != "when"}}  # fmt: skip
    info_path, model_dir = out / "sft_info.json", out / "sft_model"
    if info_path.exists() and (model_dir / "config.json").exists():
        if json.loads(info_path.read_text())["settings"] == settings:
            print(f"SFT student: {model_dir} (already there)", flush=True)
            return model_dir
    games, summary = tictactoe_teacher_data(
        load_tokenizer(trainer.model), warmup.teacher_games, noise=warmup.teacher_noise,
        seed=warmup.seed, best_moves_only=warmup.best_moves_only, reasons=warmup.teacher_reasons,
        **game_args,
    )  # fmt: skip
    if not games:
        raise ValueError(f"the teacher (noise {warmup.teacher_noise}) won or drew none of its "
                         f"{warmup.teacher_games} games: nothing to learn from")  # fmt: skip
    save_examples(out / "sft_data.jsonl", games)
    config = TrainerConfig(
        model=trainer.model, dtype=trainer.dtype, device=trainer.device, lr=warmup.lr,
        max_steps=warmup.steps, lr_schedule="cosine", warmup_steps=max(1, warmup.steps // 10),
        seed=warmup.seed, max_tokens_per_microbatch=trainer.max_tokens_per_microbatch,
    )  # fmt: skip
    sequences = [SftSequence.of(g) for g in games]
    path, losses = sft_warmup(sequences, config, model_dir, warmup.batch_size, seed=warmup.seed)
    mark_trained_on(path, [WARMUP_ENVIRONMENT], trainer.model)
    info = {"kept_games": len(games), "teacher_reward": summary["reward/mean"],
            "masked_turns": summary.get("sft/masked_turns", 0.0),
            "sft_loss_first": losses[0], "sft_loss_last": losses[-1]}  # fmt: skip
    print(f"teacher (minimax, {warmup.teacher_noise:.0%} noise): kept {len(games)} of "
          f"{warmup.teacher_games} games; SFT {warmup.steps} steps, loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f}; model: {path}", flush=True)  # fmt: skip
    write_text_atomically(info_path, json.dumps({**info, "settings": settings}, indent=1))
    return path
