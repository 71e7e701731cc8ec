"""What the embedded tiny model learns in a few hundred SFT steps, on two synthetic tasks.

    python benchmarks/probe_tiny_capacity.py [--steps 300]

1. copy: a digit marked by "Cell " somewhere after 400 random tokens must be repeated after
   "<move>" (the think-then-move copy of the tic-tac-toe answers). Printed: the loss of that digit.
2. choose: "Available positions: [0, 2, 5]" after 100 distractor digits; the answer is any listed
   digit (a legal tic-tac-toe move needs exactly this). Printed: the probability the model puts
   on digits that are not listed, among the digits 0-8 (0 = always legal; uniform = unlisted
   share, about 0.55).

Both are the same architecture and optimizer as the recipe's SFT (lr 3e-3, batch 16).
"""

from __future__ import annotations

import argparse
import random

import torch

from rlve.config import TrainerConfig
from rlve.models import load_tokenizer
from rlve.training.trainer import Trainer


def copy_example(tok, rng: random.Random) -> tuple[list[int], list[int], int]:
    digit = str(rng.randrange(9))
    filler = " keeps the game safe. blocks O's line."[: rng.randrange(6, 30)]
    prefix = [rng.randrange(100, 2000) for _ in range(400)]
    ids = prefix + tok.encode(f"Cell {digit}{filler}</think>\n<move>{digit}")
    return ids, [0] * (len(ids) - 1) + [1], len(ids) - 2


def choose_example(tok, rng: random.Random) -> tuple[list[int], list[int], list[int]]:
    free = sorted(rng.sample(range(9), rng.randrange(2, 7)))
    noise = " ".join(str(rng.randrange(9)) for _ in range(100))
    prompt = tok.encode(f"Noise: {noise}\nAvailable positions: {free}\nYour turn.")
    answer = tok.encode(f"<move>{rng.choice(free)}</move>")
    return prompt + answer, [0] * len(prompt) + [1] * len(answer), free


@torch.no_grad()
def unlisted_share(trainer, tok, batch) -> float:
    digits = [tok.convert_tokens_to_ids(str(d)) for d in range(9)]
    move_close = len(tok.encode("</move>"))
    shares = []
    for ids, _, free in batch:
        probs = torch.softmax(trainer.model(torch.tensor([ids])).logits[0].float(), -1)
        at_digit = probs[len(ids) - move_close - 2, digits]
        shares.append(1 - at_digit[free].sum().item() / at_digit.sum().item())
    return sum(shares) / len(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    tok = load_tokenizer("tiny")
    for task in ("copy", "choose"):
        rng = random.Random(0)
        trainer = Trainer(TrainerConfig(model="tiny", lr=3e-3, max_steps=args.steps))
        for step in range(1, args.steps + 1):
            if task == "copy":
                batch = [copy_example(tok, rng) for _ in range(16)]
            else:
                batch = [choose_example(tok, rng) for _ in range(16)]
            metrics = trainer.sft_step([(ids, mask) for ids, mask, _ in batch])
            if step % 50 == 0:
                line = f"{task} step {step}: loss {metrics['train/loss']:.3f}"
                if task == "choose":
                    line += f", unlisted share {unlisted_share(trainer, tok, batch):.3f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
