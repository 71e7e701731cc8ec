"""FSDP2 under torchrun (2 gloo ranks on the CPU) takes the same steps as one process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parent / "scripts" / "sharded_steps.py"
sys.path.insert(0, str(SCRIPT.parent))
from sharded_steps import CASES  # noqa: E402


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
    # the first step starts from the same weights; later ones from weights that differ a little
    for step, (single, sharded) in enumerate(zip(one["metrics"], two["metrics"], strict=True)):
        rel = 1e-5 if step == 0 else 1e-3
        for key in ("train/loss", "train/grad_norm", "train/entropy", "train/num_tokens"):
            assert sharded[key] == pytest.approx(single[key], rel=rel, abs=1e-6), (step, key)
    assert one["weights"].keys() == two["weights"].keys()
    diffs = torch.cat([(one["weights"][n] - two["weights"][n]).abs().flatten()
                       for n in one["weights"]])  # fmt: skip
    # Summing gradients in another order changes them by ~1e-7 relative; AdamW divides by
    # sqrt(v) + 1e-8, so a parameter whose gradient is ~1e-9 can still move by up to lr (1e-2)
    # differently. Such parameters are rare: all but 1% agree to 1e-5, and none by 3 x lr / 10.
    assert float(diffs.mean()) < 1e-6
    assert float((diffs > 1e-5).float().mean()) < 0.01
    assert float(diffs.max()) < 3e-3


def test_bf16_mixed_precision_on_two_ranks_stays_near_fp32(runs):
    """bf16 compute with fp32 weights and reduction: the same steps to bf16's precision."""
    fp32, bf16 = (torch.load(runs[1] / f"{case}.pt") for case in ("cispo", "cispo_bf16"))
    for step, (a, b) in enumerate(zip(fp32["metrics"], bf16["metrics"], strict=True)):
        assert b["train/entropy"] == pytest.approx(a["train/entropy"], rel=0.02), step
        assert b["train/grad_norm"] == pytest.approx(a["train/grad_norm"], rel=0.1), step
    assert all(w.dtype == torch.float32 for w in bf16["weights"].values())  # fp32 master weights
