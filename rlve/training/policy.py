"""The models a trainer holds: the policy (full or LoRA), its scorer, and the reference: the
starting weights that the KL penalty and a distillation teacher named "initial" read."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from torch import nn

from rlve.config import TrainerConfig
from rlve.distributed import World
from rlve.distributed.fsdp import shard_model
from rlve.models import load_causal_lm, with_lora
from rlve.training.fused import fuse_elementwise
from rlve.training.logprobs import TokenScorer
from rlve.training.sequence_attention import use_sequence_sdpa

logger = logging.getLogger(__name__)


@dataclass
class PolicyModels:
    model: nn.Module
    """what the optimizer trains: the causal LM, or the peft model around it"""
    causal_lm: nn.Module
    """the transformers model (with LoRA, peft's layers are inside it, so it runs with them)"""
    scorer: TokenScorer
    """token log-probs of `causal_lm`; under torchrun the FSDP2 root unit"""
    reference_scorer: TokenScorer | None
    """a frozen copy's scorer when the reference is needed without LoRA (kl_beta > 0, or
    trainer.distill.teacher=initial); with LoRA the reference is the policy, adapter off"""

    def reference(self) -> tuple[TokenScorer, AbstractContextManager]:
        """The reference's scorer and the context to score in: the frozen copy, or with LoRA the
        policy's own scorer with the adapter switched off."""
        if self.reference_scorer is not None:
            return self.reference_scorer, nullcontext()
        return self.scorer, self.model.disable_adapter()


def build_policy(config: TrainerConfig, world: World) -> PolicyModels:
    """Load the model on `config.device`; LoRA, gradient checkpointing and FSDP2 sharding as
    configured (sharded when `world` is). With packed micro-batches an sdpa model attends with
    SEQUENCE_SDPA (one sdpa call per packed sequence); element-wise kernels fused as
    `config.fused_kernels` says.

    Trained weights are float32 whatever `config.dtype` says: with full fine-tuning the whole
    model is, and a bf16 run computes under autocast (FSDP2's mixed precision when sharded);
    with LoRA the frozen base is stored in `config.dtype` and peft keeps the adapters float32.
    """
    bf16 = config.dtype == "bfloat16"
    stored = config.dtype if config.lora.enabled else "float32"
    base = load_causal_lm(config.model, dtype=stored, device=config.device)
    base.config.use_cache = False
    if config.packing == "packed":
        use_sequence_sdpa(base)
    if config.gradient_checkpointing:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    fused = fuse_elementwise(base, config.fused_kernels, config.device)
    if fused:
        logger.info("fused kernels (%s): %s", config.fused_kernels, fused)
    model = base
    if config.lora.enabled:
        model, coverage = with_lora(base, config.lora)
        logger.info("%s", coverage)
    model.train()
    autocast_bf16 = bf16 and stored == "float32" and not world.sharded
    scorer = TokenScorer(base, autocast_bf16=autocast_bf16)
    if autocast_bf16:
        logger.info("full fine-tuning in bfloat16: float32 weights, bf16 autocast compute")
    reference_scorer = None
    needs_reference = config.kl_beta > 0 or config.distill.teacher == "initial"
    if needs_reference and not config.lora.enabled:
        reference_scorer = frozen_scorer(config.model, config)
    if world.sharded:
        shard_model(base, scorer, bf16_compute=bf16)
        if reference_scorer is not None:
            shard_model(reference_scorer.causal_lm, reference_scorer, bf16_compute=bf16)
    return PolicyModels(model, base, scorer, reference_scorer)


def frozen_scorer(name: str, config: TrainerConfig) -> TokenScorer:
    """The scorer of model `name` loaded frozen (eval mode, no gradient) in the trainer's dtype,
    device, attention and kernels: the KL reference, a distillation teacher."""
    model = load_causal_lm(name, config.dtype, config.device).eval()
    if config.packing == "packed":
        use_sequence_sdpa(model)
    fuse_elementwise(model, config.fused_kernels, config.device)
    model.requires_grad_(False)
    return TokenScorer(model)
