"""FSDP2 under torchrun (2 gloo ranks on the CPU) takes the same steps as one process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parent / "scripts" / "sharded_steps.py"
sys.path.insert(0, str(SCRIPT.parent))
from sharded_steps import CASES, LR  # noqa: E402

STEPS = 3
SUM_ORDER = 1e-4
"""relative difference of fp32 sums of the same (at most ~10^3) terms in another order:
n x 2^-24 < 1e-4. Gradients are summed per rank and then across ranks instead of in one pass."""


def torchrun(nproc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", *args]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    one, two = tmp_path_factory.mktemp("one_process"), tmp_path_factory.mktemp("two_ranks")
    subprocess.run([sys.executable, str(SCRIPT), str(one)], check=True)
    subprocess.run(torchrun(2, str(SCRIPT), str(two)), check=True)
    return one, two


@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_take_the_steps_of_one_process(runs, case):
    one, two = (torch.load(run / f"{case}.pt") for run in runs)
    # from step 1 one rank has a micro-batch fewer and runs an idle one
    assert_same_steps(one, two, idle=[0, 1, 1])


def assert_same_steps(one: dict, sharded: dict, idle: list[int]) -> None:
    """The metrics and weights of a sharded run are the one process's to summation order."""
    for step, (single, split) in enumerate(zip(one["metrics"], sharded["metrics"], strict=True)):
        for key in ("train/loss", "train/grad_norm", "train/entropy", "train/num_tokens"):
            # abs: a loss near 0 (DAPO's first step is a mean of advantages) is a sum of terms
            # of size ~1, so its rounding is absolute: 1e-4 of ~1 over ~100 tokens' mean
            expected = pytest.approx(single[key], rel=SUM_ORDER, abs=1e-6)
            assert split[key] == expected, (step, key)
    assert [m["perf/idle_micro_batches"] for m in sharded["metrics"]] == idle
    assert one["weights"].keys() == sharded["weights"].keys()
    for name, single in one["weights"].items():
        # each step moves a weight by about lr x gradient (|gradient| <= 1): the gradients'
        # rounding moves it by at most lr x SUM_ORDER per step; adding the step to the weight
        # rounds at the weight's own last bits (8 units in the last place, 2^-20 relative)
        torch.testing.assert_close(sharded["weights"][name].cpu(), single.cpu(), rtol=2**-20,
                                   atol=STEPS * LR * SUM_ORDER, msg=name)  # fmt: skip


def test_bf16_mixed_precision_on_two_ranks_stays_near_fp32(runs):
    """bf16 compute with fp32 weights and reduction: the same steps to bf16's precision. bf16
    rounds each weight and activation to 2^-9 relative; the forward passes ~10 such roundings
    (4 layers, the head) before the log-probs, so ~2% on the entropy; the backward twice as
    many, and the norm of the gradient 10%."""
    fp32, bf16 = (torch.load(runs[1] / f"{case}.pt") for case in ("cispo", "cispo_bf16"))
    for step, (a, b) in enumerate(zip(fp32["metrics"], bf16["metrics"], strict=True)):
        assert b["train/entropy"] == pytest.approx(a["train/entropy"], rel=0.02), step
        assert b["train/grad_norm"] == pytest.approx(a["train/grad_norm"], rel=0.1), step
    assert all(w.dtype == torch.float32 for w in bf16["weights"].values())  # fp32 master weights
