"""The FLOPs a train step computes, from the model's shape and the tokens it forwarded.

Model FLOPs, as MFU counts them (PaLM, appendix B): a matrix product of [n, k] by [k, m] is
2nkm; the decoder's projections cost 2 x their weights per forwarded position; causal attention
costs 4 x heads x head_dim per key a query reads (QK^T and the weighted sum of V), and a query at
position p reads p + 1 keys of its sequence; the output head runs only on the positions that
predict a trained token (rlve.training.logprobs). A backward pass costs twice its forward. Not
counted: padding, norms, rotary and other element-wise work, recomputation under gradient
checkpointing, and the weight gradients LoRA does not compute (a LoRA step is counted as full
fine-tuning: an upper bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from rlve.types import MicroBatch


@dataclass(frozen=True)
class ModelShape:
    """What a decoder's FLOPs depend on (a Llama/Qwen/Mistral-style model: gated MLP)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def of(cls, config) -> ModelShape:
        """From a transformers config."""
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(
            hidden=config.hidden_size,
            intermediate=config.intermediate_size,
            layers=config.num_hidden_layers,
            heads=heads,
            kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            vocab=config.vocab_size,
        )

    @property
    def layer_weights(self) -> int:
        """Weights of one layer's matrix products: q, k, v, o and the gated MLP's three."""
        q_and_o = 2 * self.hidden * self.heads * self.head_dim
        k_and_v = 2 * self.hidden * self.kv_heads * self.head_dim
        return q_and_o + k_and_v + 3 * self.hidden * self.intermediate


def forward_flops(shape: ModelShape, positions: Tensor, head_tokens: int) -> float:
    """FLOPs of one forward pass over tokens at `positions` (any shape, each token's position
    in its own sequence), with the output head on `head_tokens` of them."""
    tokens = positions.numel()
    keys_read = float((positions.to(torch.float64) + 1).sum())
    projections = 2 * shape.layers * shape.layer_weights * tokens
    attention = 4 * shape.layers * shape.heads * shape.head_dim * keys_read
    head = 2 * shape.hidden * shape.vocab * head_tokens
    return projections + attention + head


def forwarded_positions(micro: MicroBatch) -> Tensor:
    """[N] the position in its sequence of each token the decoder ran on: a prefix tree's nodes
    (a shared prefix once), else each real (unpadded) token of the rows."""
    if micro.prefix_tree is not None:
        return micro.prefix_tree.position_ids.flatten()
    real = micro.attention_mask.bool()
    if micro.position_ids is not None:
        return micro.position_ids[real]
    return (micro.attention_mask.cumsum(dim=1) - 1)[real]


def step_flops(
    shape: ModelShape, micro_batches: Sequence[MicroBatch], trained_passes: int,
    forward_passes: int = 0,
) -> float:  # fmt: skip
    """FLOPs of `trained_passes` forward-and-backward passes (3x a forward) and
    `forward_passes` no-grad ones (old or reference log-probs) over `micro_batches`."""
    one_forward = sum(
        forward_flops(shape, forwarded_positions(m), int(m.loss_mask.sum())) for m in micro_batches
    )
    return one_forward * (3 * trained_passes + forward_passes)
