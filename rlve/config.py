"""Structured configs of rlve's components, as plain dataclasses with one docstring per field.

Each `validate()` raises ValueError naming the field and its allowed range, so a bad value fails
at start, not in the middle of a run. Later sessions register these with Hydra.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlve.algorithms.loss_inputs import TIS_MODES
from rlve.algorithms.losses import LOSSES
from rlve.algorithms.schedule import SCHEDULES

DTYPES = ("float32", "bfloat16")
LR_SCHEDULES = SCHEDULES


def require(condition: bool, message: str) -> None:
    """Raise ValueError(message) unless `condition`: config validation in one line."""
    if not condition:
        raise ValueError(message)


@dataclass
class LoraConfig:
    """Low-rank adapters (peft) instead of full fine-tuning."""

    enabled: bool = False
    """train LoRA adapters on a frozen base model instead of all weights"""
    rank: int = 16
    """rank r of each adapter (the low-rank matrices are [r, in] and [out, r]); >= 1"""
    alpha: float = 32.0
    """scaling numerator: the adapter's update is multiplied by alpha / rank; > 0"""
    dropout: float = 0.0
    """dropout on the adapter's input while training; in [0, 1)"""
    target_modules: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )
    """names of the linear layers that get adapters (Qwen/Llama naming); at least one"""

    def validate(self) -> None:
        require(self.rank >= 1, f"lora.rank must be >= 1, got {self.rank}")
        require(self.alpha > 0, f"lora.alpha must be > 0, got {self.alpha}")
        require(0.0 <= self.dropout < 1.0, f"lora.dropout must be in [0, 1), got {self.dropout}")
        require(len(self.target_modules) > 0, "lora.target_modules must name at least one module")


@dataclass
class TrainerConfig:
    """The torch trainer: model, precision, optimizer, schedule, micro-batching and RL loss."""

    model: str = "tiny"
    """model to train: "tiny" (built-in, no download), a local directory or a hub id"""
    dtype: str = "float32"
    """dtype of the trained weights: "float32" or "bfloat16" (log-probs are always fp32)"""
    device: str = "cpu"
    """torch device of the trainer, e.g. "cpu" or "cuda:1\""""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass: less memory, about a third more compute"""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """LoRA settings; `lora.enabled=false` means full fine-tuning"""

    lr: float = 1e-5
    """peak learning rate of AdamW; > 0"""
    beta1: float = 0.9
    """AdamW's first-moment decay; in [0, 1)"""
    beta2: float = 0.999
    """AdamW's second-moment decay; in [0, 1)"""
    adam_eps: float = 1e-8
    """AdamW's denominator epsilon; > 0"""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay; >= 0"""
    lr_schedule: str = "constant"
    """"constant" or "cosine" (decays to min_lr_ratio * lr at max_steps), after the warmup"""
    warmup_steps: int = 0
    """optimizer steps of linear warmup from lr / warmup_steps up to lr; >= 0"""
    max_steps: int = 1000
    """optimizer steps of the run (the training loop stops there; the cosine schedule spans
    them); >= 1"""
    min_lr_ratio: float = 0.0
    """the cosine schedule's final lr as a share of lr; in [0, 1]"""
    max_grad_norm: float = 1.0
    """clip the global gradient norm to this; 0 turns clipping off (the norm is still logged)"""

    max_tokens_per_microbatch: int = 8192
    """token budget of one forward pass: rows x padded length stays under it; >= 1. A single
    longer sequence gets a micro-batch of its own (see rlve.train_batch)"""
    logprob_chunk_tokens: int = 1024
    """tokens per chunk of the vocabulary projection, so [tokens, vocab] logits never exist at
    once for the whole micro-batch; >= 1"""

    loss: str = "cispo"
    """policy loss: "grpo", "dapo" or "cispo" (rlve.algorithms.LOSSES)"""
    std_normalize: bool = False
    """divide group advantages by the group's reward std (GRPO); off for Dr. GRPO / CISPO"""
    eps_low: float = 0.2
    """lower clip range of grpo/dapo: ratio >= 1 - eps_low; in [0, 1)"""
    eps_high: float = 0.28
    """upper clip range of grpo/dapo: ratio <= 1 + eps_high; >= 0"""
    is_cap: float = 5.0
    """cap on CISPO's importance weight (absolute); > 0"""
    tis_cap: float | None = None
    """truncated importance sampling cap C against the sampler's log-probs; None = off; > 1"""
    tis_mode: str = "truncate"
    """"truncate" (weight min(w, C)) or "mask" (drop tokens with w outside [1/C, C])"""
    kl_beta: float = 0.0
    """weight of the k3 KL penalty to the reference model; 0 = off (no reference is loaded)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts: log-probs are log_softmax(logits / temperature)"""
    num_iterations: int = 1
    """optimizer steps per train_step on the same rollouts (PPO epochs); >= 1"""
    max_bad_steps: int = 3
    """consecutive skipped steps (NaN/inf loss or gradient, nothing to train) before
    TrainingDiverged is raised; >= 1"""

    seed: int = 0
    """seed of python, numpy and torch rngs (LoRA init, dropout)"""
    keep_checkpoints: int = 3
    """checkpoints kept in a checkpoint directory; older ones are deleted; >= 1"""

    def validate(self) -> None:
        require(self.dtype in DTYPES, f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        self.lora.validate()
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")
        require(self.adam_eps > 0, f"adam_eps must be > 0, got {self.adam_eps}")
        require(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        require(
            self.lr_schedule in LR_SCHEDULES,
            f"lr_schedule must be one of {list(LR_SCHEDULES)}, got {self.lr_schedule!r}",
        )
        require(self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}")
        require(self.max_steps >= 1, f"max_steps must be >= 1, got {self.max_steps}")
        require(
            0.0 <= self.min_lr_ratio <= 1.0,
            f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}",
        )
        require(self.max_grad_norm >= 0, f"max_grad_norm must be >= 0, got {self.max_grad_norm}")
        for name in ("max_tokens_per_microbatch", "logprob_chunk_tokens", "num_iterations"):
            value = getattr(self, name)
            require(value >= 1, f"{name} must be >= 1, got {value}")
        self._validate_loss()
        require(self.max_bad_steps >= 1, f"max_bad_steps must be >= 1, got {self.max_bad_steps}")
        require(
            self.keep_checkpoints >= 1,
            f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}",
        )

    def _validate_loss(self) -> None:
        require(self.loss in LOSSES, f"loss must be one of {sorted(LOSSES)}, got {self.loss!r}")
        require(0.0 <= self.eps_low < 1.0, f"eps_low must be in [0, 1), got {self.eps_low}")
        require(self.eps_high >= 0.0, f"eps_high must be >= 0, got {self.eps_high}")
        require(self.is_cap > 0.0, f"is_cap must be > 0, got {self.is_cap}")
        require(
            self.tis_cap is None or self.tis_cap > 1.0,
            f"tis_cap must be None or > 1, got {self.tis_cap}",
        )
        require(
            self.tis_mode in TIS_MODES,
            f"tis_mode must be one of {list(TIS_MODES)}, got {self.tis_mode!r}",
        )
        require(self.kl_beta >= 0.0, f"kl_beta must be >= 0, got {self.kl_beta}")
        require(self.temperature > 0.0, f"temperature must be > 0, got {self.temperature}")
