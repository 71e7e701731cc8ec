"""LoRA adapters (peft) on the linear layers a config names, checked against the model.

A target names a linear layer by its last name (`q_proj`, LFM2's `in_proj` or `w1`), or is
`all-linear` (every linear layer but the output head). A target that matches no layer is an error
that lists the model's linear layers: otherwise adapters would silently land on fewer layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn
from transformers import PreTrainedModel

ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class LoraCoverage:
    """How much of a model the adapters reach."""

    layers: int
    """linear layers with an adapter"""
    covered_params: int
    """weights of those layers"""
    linear_params: int
    """weights of every linear layer but the output head"""
    adapter_params: int
    """trainable parameters of the adapters"""

    def __str__(self) -> str:
        share = 100 * self.covered_params / max(self.linear_params, 1)
        return (
            f"LoRA on {self.layers} linear layers: {self.covered_params:,} of "
            f"{self.linear_params:,} linear weights ({share:.1f}%), "
            f"{self.adapter_params:,} adapter parameters"
        )


def linear_layers(model: nn.Module) -> dict[str, int]:
    """Full name -> weight count of every nn.Linear but the output head."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return {
        name: module.weight.numel()
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and module is not head
    }


def targeted_layers(model: nn.Module, targets: Sequence[str]) -> dict[str, int]:
    """The linear layers `targets` reach (by last name, or all with `all-linear`).

    Raises:
        ValueError: a target matches no linear layer; the message lists the model's names.
    """
    layers = linear_layers(model)
    if list(targets) == [ALL_LINEAR]:
        return layers
    last_names = sorted({name.rsplit(".", 1)[-1] for name in layers})
    unknown = [t for t in targets if t not in last_names]
    if unknown:
        raise ValueError(
            f"lora.target_modules {unknown} match no linear layer of this model; its linear "
            f"layers are {last_names} (or use [{ALL_LINEAR!r}])"
        )
    return {name: n for name, n in layers.items() if name.rsplit(".", 1)[-1] in targets}


def with_lora(model: PreTrainedModel, lora) -> tuple[PreTrainedModel, LoraCoverage]:
    """`model` with peft LoRA adapters (`lora`: rlve.config.LoraConfig) on its target layers,
    and what they cover."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    covered = targeted_layers(model, lora.target_modules)
    linear_params = sum(linear_layers(model).values())
    targets = ALL_LINEAR if list(lora.target_modules) == [ALL_LINEAR] else list(covered)
    peft_config = PeftLoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    wrapped = get_peft_model(model, peft_config)
    adapters = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    coverage = LoraCoverage(len(covered), sum(covered.values()), linear_params, adapters)
    return wrapped, coverage
