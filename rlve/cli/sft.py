"""`scripts/generate_sft_data.py` and `scripts/sft_warmup.py`: teacher games to SFT data, and
SFT warm-up on that data to an exported model (the library side is `rlve.training.sft`). The
warm-up is a W&B run too (job_type "sft", offline under --out by default): its settings and the
loss of every step."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rlve.config import LoraConfig, TrainerConfig
from rlve.config.run import WANDB_MODES
from rlve.config.trainer import DTYPES
from rlve.envs import load_environment
from rlve.envs.tictactoe.prompts import BOARDS
from rlve.models import load_tokenizer
from rlve.sync.placement import resolve_device
from rlve.training.sft import (
    load_examples,
    save_examples,
    sft_warmup,
    teacher_games,
    tictactoe_teacher_data,
)
from rlve.training.wandb_run import start_wandb_run


def generate_main(argv: list[str] | None = None) -> None:
    """Teacher games -> SFT data (JSON lines of token ids and loss masks)."""
    parser = argparse.ArgumentParser(description="Play teacher games and save them as SFT data.")
    parser.add_argument("--out", required=True, help="output .jsonl file")
    parser.add_argument("--model", default="tiny", help="the student (its tokenizer and format)")
    parser.add_argument("--games", type=int, default=200, help="games the teacher plays")
    parser.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="scripted teacher: share of random moves of the minimax teacher",
    )
    parser.add_argument("--teacher-url", help="OpenAI-compatible endpoint of a teacher model")
    parser.add_argument("--teacher-model", help="the teacher model's name at that endpoint")
    parser.add_argument("--min-random-move-prob", type=float, default=0.2)
    parser.add_argument("--max-random-move-prob", type=float, default=0.7)
    parser.add_argument("--rules", choices=("full", "short"), default="full",
                        help="the tic-tac-toe system prompt (make recipe: short)")  # fmt: skip
    parser.add_argument("--board", choices=sorted(BOARDS), default="grid",
                        help="how the tic-tac-toe messages show the board")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    tokenizer = load_tokenizer(args.model)
    opponent = {"min_random_move_prob": args.min_random_move_prob,
                "max_random_move_prob": args.max_random_move_prob, "rules": args.rules,
                "board": args.board}  # fmt: skip
    if args.teacher_url:
        from rlve.inference.openai_engine import OpenAIEngine

        env = load_environment("tictactoe", num_examples=args.games, seed=args.seed + 1,
                               **opponent)  # fmt: skip
        engine = OpenAIEngine(args.teacher_url, args.teacher_model)
        games, summary = teacher_games(env, engine, args.games, tokenizer, args.seed)
    else:
        games, summary = tictactoe_teacher_data(tokenizer, args.games, args.noise, args.seed,
                                                **opponent)  # fmt: skip
    count = save_examples(args.out, games)
    print(
        f"teacher: reward {summary['reward/mean']:.3f}, win/draw/loss "
        f"{summary['game/win']:.2f}/{summary['game/draw']:.2f}/{summary['game/loss']:.2f}; "
        f"kept {count} of {args.games} games -> {args.out}"
    )


def warmup_main(argv: list[str] | None = None) -> None:
    """SFT on saved data -> an exported model directory for the RL run."""
    parser = argparse.ArgumentParser(description="SFT warm-up on teacher data.")
    parser.add_argument("--data", required=True, help=".jsonl written by generate_sft_data.py")
    parser.add_argument("--out", required=True, help="directory of the exported model")
    parser.add_argument("--model", default="tiny", help="model to fine-tune")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--lora-rank", type=int, default=0, help="0: full fine-tuning")
    parser.add_argument("--device", default="auto", help="trainer.device: auto = a GPU if any")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="trainer.dtype: auto = bfloat16 where the device has it natively",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wandb-mode", choices=WANDB_MODES, default="offline",
                        help="the warm-up's W&B run (under --out/wandb when offline)")  # fmt: skip
    parser.add_argument("--wandb-project", default="rlve", help="W&B project")
    args = parser.parse_args(argv)
    examples = load_examples(args.data)
    config = TrainerConfig(
        model=args.model, lr=args.lr, max_steps=args.steps, lr_schedule="cosine",
        warmup_steps=max(1, args.steps // 10), device=resolve_device(args.device),
        dtype=args.dtype, seed=args.seed,
        lora=LoraConfig(enabled=args.lora_rank > 0, rank=max(args.lora_rank, 1)),
    )  # fmt: skip
    config.validate()
    settings = {"trainer": asdict(config), "data": args.data, "examples": len(examples),
                "batch_size": args.batch_size}  # fmt: skip
    run = start_wandb_run(args.out, args.wandb_mode, args.wandb_project,
                          f"sft-{Path(args.out).name}", "sft", settings)  # fmt: skip
    log_step = None if run is None else (lambda step, metrics: run.log(metrics, step=step))
    try:
        path, losses = sft_warmup(examples, config, args.out, args.batch_size, args.seed, log_step)
    finally:
        if run is not None:
            run.finish()
    (path / "sft_losses.json").write_text(json.dumps(losses))
    print(f"SFT: {len(examples)} games, loss {losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")
