"""Training in bfloat16 keeps float32 weights, so updates smaller than a bf16 step are not lost.

AdamW moves a weight by about lr per step. At lr 2e-6, ten steps move a weight near 0.02 by
2e-5, under half the bf16 spacing there (2^-13 = 1.2e-4): weights stored in bf16 and updated in
place would not move. Only weights close to 0, where bf16 numbers lie denser, would.
"""

import pytest
import torch
from test_trainer import LORA, trainable, two_groups

from rlve.config import TrainerConfig
from rlve.training.trainer import Trainer

STEPS, LR = 10, 2e-6


def trained(dtype: str, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Every trained weight, flattened, before and after STEPS CISPO steps (on the CPU)."""
    config = TrainerConfig(loss="cispo", lr=LR, dtype=dtype, max_steps=STEPS, device=device)
    trainer = Trainer(config)
    before = trainable(trainer)
    for _ in range(STEPS):
        trainer.train_step(two_groups())
    after = trainable(trainer)
    assert all(w.dtype == torch.float32 for w in after.values())
    return (torch.cat([before[n].flatten() for n in before]).cpu(),
            torch.cat([after[n].flatten() for n in before]).cpu())  # fmt: skip


def half_bf16_spacing(weights: torch.Tensor) -> torch.Tensor:
    """Half the distance from each weight to the next bf16 number above its magnitude."""
    magnitude = weights.abs().to(torch.bfloat16)
    return (torch.nextafter(magnitude, torch.tensor(float("inf"), dtype=torch.bfloat16))
            - magnitude).float() / 2  # fmt: skip


@pytest.fixture(scope="module")
def runs():
    return trained("float32"), trained("bfloat16")


def test_the_updates_are_below_half_a_bf16_step(runs):
    """The premise: stored in bf16, most of these updates would round away."""
    (start, end), _ = runs
    moved = end != start
    assert float(moved.float().mean()) > 0.5
    below = (end - start).abs()[moved] < half_bf16_spacing(start)[moved]
    assert float(below.float().mean()) > 0.5


def test_full_finetuning_in_bf16_moves_the_weights_as_fp32_does(runs):
    (start32, end32), (start16, end16) = runs
    assert torch.equal(start16, start32)  # the same float32 initial weights
    moved32, moved16 = end32 != start32, end16 != start16
    # a weight moves unless its gradient is exactly 0 (embeddings of tokens never seen): the
    # same weights in both runs
    assert float((moved16 == moved32).float().mean()) > 0.999
    # AdamW's step is about lr x sign(gradient) per weight, whatever the gradient's precision;
    # bf16 compute flips the sign only of gradients near 0
    delta32, delta16 = (end32 - start32)[moved32], (end16 - start16)[moved32]
    assert float((delta32.sign() == delta16.sign()).float().mean()) > 0.9
    assert float(delta16.abs().mean()) == pytest.approx(float(delta32.abs().mean()), rel=0.1)


def test_bf16_lora_keeps_the_base_in_bf16_and_trains_float32_adapters():
    trainer = Trainer(TrainerConfig(loss="cispo", lr=1e-3, dtype="bfloat16", lora=LORA))
    dtypes = {p.requires_grad: p.dtype for p in trainer.model.parameters()}
    assert dtypes == {True: torch.float32, False: torch.bfloat16}
