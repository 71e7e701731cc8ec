"""Three train steps on fixed rollout groups, in one process or under torchrun (FSDP2).

    python tests/integration/scripts/sharded_steps.py OUT_DIR [--device cuda]
    torchrun --standalone --nproc-per-node 2 tests/integration/scripts/sharded_steps.py OUT_DIR

For every case (loss x full/LoRA, and gradient checkpointing once) rank 0 writes
OUT_DIR/<case>.pt: the trained parameters, whole, and each step's metrics. test_sharded_trainer
compares the two runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rlve.config import LoraConfig, TrainerConfig
from rlve.distributed import init_world
from rlve.distributed.fsdp import full
from rlve.distributed.world import close_world
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory

CASES = {
    "dapo": dict(loss="dapo"),
    "cispo": dict(loss="cispo"),
    "grpo": dict(loss="grpo"),
    "dapo_lora": dict(loss="dapo", lora=LoraConfig(enabled=True, rank=4, alpha=8.0)),
    "cispo_lora": dict(loss="cispo", lora=LoraConfig(enabled=True, rank=4, alpha=8.0)),
    "grpo_lora": dict(loss="grpo", lora=LoraConfig(enabled=True, rank=4, alpha=8.0)),
    "cispo_checkpointing": dict(loss="cispo", gradient_checkpointing=True),
}
LR, ADAM_EPS = 0.1, 1.0
"""AdamW with an epsilon above every gradient element (the norm is clipped to 1): its step is
about lr x gradient, a smooth function of the gradient, so the runs' weights differ only by the
rounding of their gradients. With the default 1e-8, a weight whose gradient is near 0 steps by
up to lr in either direction, and which way depends on the gradient's last bits."""
MIXED_PRECISION_CASE = {"cispo_bf16": dict(loss="cispo", dtype="bfloat16")}
"""run under torchrun only (mixed precision is FSDP2's); compared with the fp32 case"""


def groups(step: int) -> list[RolloutGroup]:
    """Three groups of four rollouts with prompts and completions of different lengths, sampler
    log-probs included. From step 1 on one answer is long (126 tokens, a micro-batch of its
    own): on two ranks (each group's prompt shared in a prefix tree of at most 48 nodes) one runs
    2 micro-batches and the other 3, so the first adds an idle one."""
    generator = torch.Generator().manual_seed(step)
    made = []
    for g in range(3):
        prompt = torch.randint(5, 400, (4 + 3 * g,), generator=generator).tolist()
        trajectories = []
        for i in range(4):
            length = 2 + 2 * i + g + (120 if step > 0 and g == i == 0 else 0)
            completion = torch.randint(5, 400, (length,), generator=generator).tolist()
            sampler = (-torch.rand(len(completion), generator=generator) * 3 - 2).tolist()
            trajectories.append(Trajectory(
                prompt=[], completion=[], token_ids=prompt + completion,
                loss_mask=[0] * len(prompt) + [1] * len(completion),
                sampler_logprobs=[0.0] * len(prompt) + sampler,
                reward=float((i + g + step) % 3 == 0),
            ))  # fmt: skip
        made.append(RolloutGroup(example_id=g, env_name="test", trajectories=trajectories))
    return made


def main(out: Path, device: str) -> None:
    world, device = init_world(device)
    out.mkdir(parents=True, exist_ok=True)
    cases = {**CASES, **(MIXED_PRECISION_CASE if world.sharded else {})}
    for name, fields in cases.items():
        config = TrainerConfig(lr=LR, adam_eps=ADAM_EPS, max_tokens_per_microbatch=48, max_steps=3,
                               device=device, old_logprobs="recompute", **fields)  # fmt: skip
        trainer = Trainer(config, world)
        metrics = [trainer.train_step(groups(step)) for step in range(3)]
        weights = {n: full(p.detach()).clone() for n, p in trainer.model.named_parameters()
                   if p.requires_grad}  # fmt: skip
        if world.is_main:
            torch.save({"weights": weights, "metrics": metrics}, out / f"{name}.pt")
    close_world()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cpu", help='"cpu", or "cuda" (rank r on cuda:r)')
    args = parser.parse_args()
    main(args.out, args.device)
