"""`python -m rlve.cli.export_checkpoint CHECKPOINT --out DIR`: a run's checkpoint as a model
directory, for `scripts/evaluate.py`, `scripts/play.py`, vLLM or transformers.

A checkpoint (`<run>/checkpoints/step_<N>`) holds the trainer's shards and optimizer state, to
resume from; the rest of rlve reads model directories. This rebuilds the trainer the checkpoint
was saved by, from the config the checkpoint keeps (its starting model must still be where it
was), on the CPU and without a teacher or a KL reference (an export needs neither), loads the
checkpoint (read as data: docs/security.md) and writes the merged model (LoRA merged) with its
tokenizer:

    python -m rlve.cli.export_checkpoint runs/x/checkpoints/step_00000003 --out runs/x/step3_model
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace


def export_checkpoint(checkpoint: str, out: str) -> str:
    """Write the model of `checkpoint` to `out` and return `out`."""
    from omegaconf import OmegaConf

    from rlve.config import TrainerConfig
    from rlve.config.distill import DistillConfig
    from rlve.training.checkpoint import load_trainer_state
    from rlve.training.trainer import Trainer

    saved = load_trainer_state(checkpoint)["config"]
    config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainerConfig), saved))
    config = replace(config, device="cpu", distill=DistillConfig(), kl_beta=0.0)
    trainer = Trainer(config)
    trainer.resume(checkpoint)
    return trainer.export(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a checkpoint directory, <run>/checkpoints/step_<N>")
    parser.add_argument("--out", required=True, help="the model directory to write")
    args = parser.parse_args(argv)
    try:
        print(export_checkpoint(args.checkpoint, args.out))
    except (FileNotFoundError, ValueError) as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
