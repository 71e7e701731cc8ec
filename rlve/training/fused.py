"""Fused element-wise kernels for the trainer's decoder (`trainer.fused_kernels`).

A decoder layer's matrix products are a small part of its kernel launches: RMSNorm (a cast, a
square, a mean, a reciprocal root, two products), the SwiGLU product and rotary each run as
several element-wise passes over the activations, which on a GPU cost about half the step's
time (docs/benchmarks.md, "On one H200"). Two ways to fuse them:

- "compile": `torch.compile` of every RMSNorm and SwiGLU MLP module (any device; Inductor emits
  C++ on the CPU, Triton on a GPU). Attention is left as it is: rlve's prefix-tree attention
  chooses its kernel in Python.
- "liger": liger-kernel's Triton RMSNorm, rotary and SwiGLU patched into the model (a CUDA
  device and `pip install liger-kernel`). Its fused linear + cross-entropy is not used: rlve's
  head needs each token's log-prob and entropy, and already never holds more than
  `logprob_chunk_tokens` rows of logits.
"""

from __future__ import annotations

from collections import Counter

from torch import nn

from rlve.config.trainer import FUSED_KERNELS

_MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def fuse_elementwise(model: nn.Module, how: str, device: str) -> dict[str, int]:
    """Fuse `model`'s element-wise kernels in place as `how` names (FUSED_KERNELS); returns how
    many modules of each class were fused (empty for "none").

    Raises:
        ValueError: an unknown `how`, "liger" off a CUDA device, or a model with no RMSNorm
            or SwiGLU module to fuse (named by its class).
        ImportError: "liger" without liger-kernel installed.
    """
    if how not in FUSED_KERNELS:
        raise ValueError(f"trainer.fused_kernels must be one of {list(FUSED_KERNELS)}, got {how!r}")
    if how == "none":
        return {}
    fusable = [m for m in model.modules() if _is_rms_norm(m) or _is_swiglu_mlp(m)]
    if not fusable:
        raise ValueError(f"trainer.fused_kernels={how!r}: {type(model).__name__} has no "
                         "RMSNorm or SwiGLU MLP module to fuse")  # fmt: skip
    if how == "liger":
        _apply_liger(model, device)
    else:
        for module in fusable:
            module.compile(dynamic=True)
    return dict(Counter(type(m).__name__ for m in fusable))


def _is_rms_norm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm")


def _is_swiglu_mlp(module: nn.Module) -> bool:
    silu = "SiLU" in type(getattr(module, "act_fn", None)).__name__  # torch's or transformers'
    return silu and all(hasattr(module, name) for name in _MLP_PROJECTIONS)


def _apply_liger(model: nn.Module, device: str) -> None:
    if not device.startswith("cuda"):
        raise ValueError(f"trainer.fused_kernels='liger' runs Triton kernels on a CUDA device; "
                         f"trainer.device is {device!r} (use 'compile' there)")  # fmt: skip
    try:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
    except ImportError as error:
        raise ImportError("trainer.fused_kernels='liger' needs liger-kernel: "
                          "pip install liger-kernel") from error  # fmt: skip
    kernels = {"rope": True, "rms_norm": True, "swiglu": True}
    unfused_head = {"cross_entropy": False, "fused_linear_cross_entropy": False}
    _apply_liger_kernel_to_instance(model=model, **kernels, **unfused_head)
