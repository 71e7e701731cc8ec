"""FSDP2 sharding of a Hugging Face causal LM, and full tensors out of sharded ones.

Each decoder layer is its own FSDP unit (its parameters are gathered just before it runs and
freed after); the module around the model that the trainer calls is the root unit (embeddings,
final norm, head). FSDP averages gradients over the ranks, so the trainer multiplies its loss by
the number of ranks: every rank's loss is already divided by the whole step's token count.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def decoder_layers(causal_lm: nn.Module) -> nn.ModuleList:
    """The repeated transformer blocks (`model.layers` in Llama/Qwen/Mistral, `transformer.h`
    in GPT-2 style models)."""
    for path in ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers"):
        module = causal_lm
        for part in path.split("."):
            module = getattr(module, part, None)
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            return module
    raise ValueError(
        f"cannot find the decoder layers of {type(causal_lm).__name__} (looked for model.layers, "
        "transformer.h, gpt_neox.layers, model.decoder.layers): FSDP sharding needs them"
    )


def shard_model(causal_lm: nn.Module, root: nn.Module, bf16_compute: bool = False) -> None:
    """Shard `causal_lm` in place over the default process group: each decoder layer a unit,
    the rest in the unit of `root`, the module the trainer calls (it holds `causal_lm`). LoRA
    layers are included: shard after peft has injected them. `bf16_compute` gathers parameters
    in bf16 and reduces gradients in fp32; the sharded parameters keep their own dtype."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy()
    if bf16_compute:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in decoder_layers(causal_lm):
        fully_shard(layer, mp_policy=policy)
    fully_shard(root, mp_policy=policy)


def full(tensor: Tensor) -> Tensor:
    """The whole tensor behind a DTensor (a collective: every rank calls it); others as they are."""
    from torch.distributed.tensor import DTensor

    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
