"""Fused element-wise kernels (rlve.training.fused): which modules are fused, the errors, and the
same log-probs, entropies and gradients as the plain model on the trainer's path (packed rows,
a prefix tree).

Tolerances. In float32 a fused RMSNorm sums its squares in another order and a fused SwiGLU
computes SiLU with another vectorised exp, so only rounding moves: the float32 bounds derived
in test_packed_parity (fp32_tolerances) hold. Under bf16 autocast a fused kernel keeps its
intermediates in float32 and rounds once where the plain path rounds after each op, so it may
move a log-prob away from the float32 result by no more than twice what the plain bf16 path
moves it (rounding errors of the same size, at most as many of them).
"""

import importlib.util

import pytest
import torch
from torch import nn

from rlve.training.fused import fuse_elementwise
from tests.unit.test_packed_parity import fp32_tolerances
from tests.unit.test_prefix_sharing import grouped_sequences, run, tiny


def logprobs_and_grads(model, autocast=False):
    """The trained tokens' log-probs and entropies of grouped_sequences() through a prefix tree
    (300-token micro-batches), and every parameter's gradient of the CISPO loss."""
    per_sequence, _, grads, _ = run(model, grouped_sequences(), True, "cispo", max_tokens=300,
                                    autocast=autocast)  # fmt: skip
    order = sorted(per_sequence)
    logps = torch.cat([per_sequence[i][0] for i in order])
    return logps, torch.cat([per_sequence[i][1] for i in order]), grads


def test_compile_fuses_every_rms_norm_and_swiglu_mlp_of_the_tiny_model(tiny_path):
    model = tiny(tiny_path)
    layers = model.config.num_hidden_layers
    # two norms a layer (before attention, before the MLP) and the final one; an MLP a layer
    assert fuse_elementwise(model, "compile", "cpu") == {"Qwen2RMSNorm": 2 * layers + 1,
                                                          "Qwen2MLP": layers}  # fmt: skip
    assert fuse_elementwise(tiny(tiny_path), "none", "cpu") == {}


def test_bad_settings_are_named(tiny_path):
    with pytest.raises(ValueError, match="'fast'"):
        fuse_elementwise(tiny(tiny_path), "fast", "cpu")
    with pytest.raises(ValueError, match="Sequential has no RMSNorm"):
        fuse_elementwise(nn.Sequential(nn.Linear(4, 4)), "compile", "cpu")
    with pytest.raises(ValueError, match="trainer.device is 'cpu'"):
        fuse_elementwise(tiny(tiny_path), "liger", "cpu")


def test_compiled_kernels_give_the_plain_float32_logprobs_and_gradients(tiny_path):
    plain = logprobs_and_grads(tiny(tiny_path))
    model = tiny(tiny_path)
    fuse_elementwise(model, "compile", "cpu")
    fused = logprobs_and_grads(model)
    value_tol, grad_tol = fp32_tolerances(model.config)
    assert (fused[0] - plain[0]).abs().max().item() <= value_tol
    assert (fused[1] - plain[1]).abs().max().item() <= value_tol
    for name, grad in plain[2].items():
        scale = grad.abs().max().item()
        assert (fused[2][name] - grad).abs().max().item() <= grad_tol * scale, name


def bf16_noises(tiny_path, how, device):
    """How far bf16 autocast moves the log-probs from float32: (plain path, fused path)."""
    exact = logprobs_and_grads(tiny(tiny_path).to(device))[0]
    plain = logprobs_and_grads(tiny(tiny_path).to(device), autocast=True)[0]
    model = tiny(tiny_path).to(device)
    fuse_elementwise(model, how, device)
    fused = logprobs_and_grads(model, autocast=True)[0]
    return (plain - exact).abs().max().item(), (fused - exact).abs().max().item()


def test_under_bf16_autocast_compiled_kernels_move_logprobs_no_more_than_bf16_does(tiny_path):
    plain_noise, fused_noise = bf16_noises(tiny_path, "compile", "cpu")
    assert 0 < plain_noise < 0.1
    assert fused_noise <= 2 * plain_noise


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("how", ["compile", "liger"])
def test_fused_kernels_on_cuda_move_bf16_logprobs_no_more_than_bf16_does(tiny_path, how):
    if how == "liger" and importlib.util.find_spec("liger_kernel") is None:
        pytest.skip("liger-kernel is not installed")
    plain_noise, fused_noise = bf16_noises(tiny_path, how, "cuda")
    assert fused_noise <= 2 * plain_noise
