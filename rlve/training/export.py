"""The trained model as the sampler and Hugging Face see it: base-model names, LoRA merged.

Works on a plain model and on an FSDP2-sharded one: a sharded tensor is gathered whole one at a
time (every rank must read the same tensors in the same order), so no rank ever holds a second
full copy of the model, only the tensor in flight.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from rlve.distributed.fsdp import full
from rlve.models import TINY_MARKER_FILE, resolve_model_path
from rlve.sync.shared_memory import write_safetensors
from rlve.sync.weight_stream import WeightStream


def _lora_layers(causal_lm: nn.Module) -> dict[str, nn.Module]:
    """`<module>.weight` -> the LoRA layer on that module (layers with an active adapter)."""
    from peft.tuners.lora import LoraLayer

    return {
        f"{name}.weight": module
        for name, module in causal_lm.named_modules()
        if isinstance(module, LoraLayer) and not module.merged and not module.disable_adapters
    }


def _merged(weight: Tensor, layer: nn.Module) -> Tensor:
    """`weight` plus B A * alpha / r of each of the layer's active adapters (transposed for
    fan-in-fan-out layers): what merging would make of it, in one new tensor (addmm)."""
    merged = weight
    for adapter in layer.active_adapters:
        if adapter not in layer.lora_A:
            continue
        a, b = full(layer.lora_A[adapter].weight), full(layer.lora_B[adapter].weight)
        if getattr(layer, "fan_in_fan_out", False):
            a, b = b.T, a.T  # (B A)^T = A^T B^T
        merged = torch.addmm(merged, b.to(weight.dtype), a.to(weight.dtype),
                             alpha=layer.scaling[adapter])  # fmt: skip
    return merged


def _base_weights(causal_lm: nn.Module) -> Iterator[tuple[str, Tensor, nn.Module | None]]:
    """(HF name, the tensor as held (a shard under FSDP), its LoRA layer or None) of every
    tensor the base model's state dict has, then `lm_head.weight` if the state dict lacks it
    (tied to the embedding: vLLM keeps its own copy of the output head)."""
    lora_layers = _lora_layers(causal_lm)
    names = set()
    for name, tensor in causal_lm.state_dict().items():
        if "lora_" in name:
            continue
        name = name.replace(".base_layer.", ".")
        names.add(name)
        yield name, tensor, lora_layers.get(name)
    head = causal_lm.get_output_embeddings()
    if "lm_head.weight" not in names and head is not None:
        yield "lm_head.weight", head.weight.detach(), None


@torch.no_grad()
def _merged_tensors(entries: list[tuple[str, Tensor, nn.Module | None]]):
    for name, tensor, layer in entries:
        whole = full(tensor)
        yield name, whole if layer is None else _merged(whole, layer)


def merged_named_weights(causal_lm: nn.Module) -> WeightStream:
    """Every tensor of the base model in its HF names, one at a time, with their layout read
    from the state dict first (a sharded tensor's shape is the whole one's: nothing gathered).

    For a peft-wrapped model pass `peft_model.get_base_model()`: each LoRA layer's
    `base_layer.weight` comes out as `weight` plus the adapter's delta (computed here, so the
    trained weights are never merged and unmerged in place), adapter tensors are left out.
    `lm_head.weight` comes too even when tied to the embedding.
    """
    entries = list(_base_weights(causal_lm))  # the state dict read once: shards, no copies
    layout = tuple((name, tensor.dtype, tuple(tensor.shape)) for name, tensor, _ in entries)
    return WeightStream(layout, _merged_tensors(entries))


def export_model(
    path: str,
    weights: WeightStream,
    causal_lm: nn.Module,
    tokenizer,
    model_name: str,
) -> str:
    """Write an HF model directory (config, generation config, model.safetensors, tokenizer) of
    `weights` (HF names, LoRA merged) at `path`, one tensor at a time; the tiny model's
    tokenizer marker goes too."""
    os.makedirs(path, exist_ok=True)
    if getattr(causal_lm.config, "tie_word_embeddings", False):
        weights = weights.without("lm_head.weight")  # the loader ties it back to the embedding
    write_safetensors(os.path.join(path, "model.safetensors"), weights)
    causal_lm.config.save_pretrained(path)
    if getattr(causal_lm, "generation_config", None) is not None:
        causal_lm.generation_config.save_pretrained(path)
    tokenizer.save_pretrained(path)
    marker = os.path.join(resolve_model_path(model_name), TINY_MARKER_FILE)
    if os.path.isfile(marker):  # keeps the tiny tokenizer loading exactly as saved
        shutil.copy(marker, path)
    return path
