"""`trainer.*`: the model, LoRA, precision, optimizer, schedule, micro-batching and RL loss."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlve.config.checks import require, require_choice
from rlve.config.distill import DistillConfig

DTYPES = ("auto", "float32", "bfloat16")
OLD_LOGPROBS = ("sampler", "recompute")
CREDITS = ("episode", "turn")
"""whose advantage a token gets: its episode's, or its turn's (TrainerConfig.credit)"""
TURN_BASELINES = ("turn", "position")
"""which turns a turn's return is compared with (TrainerConfig.turn_baseline)"""
TRAINER_COUNTS = ("max_steps", "max_tokens_per_microbatch", "logprob_chunk_tokens", "mini_batches",
                  "num_iterations", "max_bad_steps", "keep_checkpoints")  # fmt: skip
FUSED_KERNELS = ("none", "compile", "liger")
"""the values of TrainerConfig.fused_kernels (rlve/training/fused.py)"""
TREE_ATTENTIONS = ("auto", "segments", "buckets", "flex")
"""the values of TrainerConfig.tree_attention"""
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


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
    target_modules: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    """last names of the linear layers that get adapters (default: Qwen/Llama naming; LFM2 has
    in_proj, out_proj, w1-w3), or ["all-linear"]; one that matches no layer is an error"""

    def validate(self) -> None:
        require(self.rank >= 1, f"lora.rank must be >= 1, got {self.rank}")
        require(self.alpha > 0, f"lora.alpha must be > 0, got {self.alpha}")
        require(0.0 <= self.dropout < 1.0, f"lora.dropout must be in [0, 1), got {self.dropout}")
        targets = list(self.target_modules)
        require(len(targets) > 0 and ("all-linear" not in targets or len(targets) == 1),
                f"lora.target_modules: names, or 'all-linear' alone; got {targets}")  # fmt: skip


@dataclass
class TrainerConfig:
    """The torch trainer: model, precision, optimizer, schedule, micro-batching and RL loss."""

    model: str = "tiny"
    """model to train: "tiny" (built-in, no download), a local directory or a hub id"""
    dtype: str = "auto"
    """dtype the model computes in: "float32", "bfloat16", or "auto": bfloat16 where the device
    computes it natively (a CUDA GPU from Ampere on, a CPU with AVX512-BF16 or AMX), float32
    elsewhere (rlve/models/precision.py; RLVE_AUTO_DTYPE=float32 makes every "auto" float32).
    Trained weights and their optimizer state stay float32 either way (AdamW steps below half a
    bf16 step would round away): full fine-tuning in bf16 keeps float32 weights and computes
    under bf16 autocast (under torchrun: FSDP2 gathers them in bf16 and reduces gradients in
    fp32); LoRA keeps the frozen base in bf16 and the adapters in float32. Log-probs are always
    float32"""
    device: str = "auto"
    """torch device of the trainer: "cpu", "cuda:N", "cuda" (under torchrun: rank r on cuda:r) or
    "auto": the CPU without a GPU; with GPUs, in a run the first GPU vLLM leaves free (GPU 1 of
    two), on one GPU vLLM's own, shared (under torchrun "cuda"), and outside a run (SFT) the
    current GPU. Resolved at start and logged (rlve/sync/placement.py)"""
    cpu_threads: int | None = None
    """torch threads of a trainer on the CPU (torch.set_num_threads); None = torch's default,
    one per core, also those vLLM runs on (docs/benchmarks.md "Threads" measures the split)"""
    cpu_keep_freed_memory: bool = False
    """RL on the CPU: glibc's malloc keeps freed memory for the next step instead of unmapping
    it (rlve.training.allocator, set by the RL loop, process-wide). The recipe's RL step ran
    1.09-1.31x faster, but in the demo's RL run the process grew about 1 GB a step (8.1 -> 13.0
    GB over 5 steps) without levelling off, so it is off unless asked for (docs/benchmarks.md
    "Allocator")"""
    peak_tflops: float | None = None
    """the device's peak TFLOP/s in the run's dtype, the denominator of perf/mfu; None: a GPU's
    from its name (rlve/training/peak.py lists the cards), a CPU's measured by a short matrix
    product at start; 0: no perf/mfu. perf/train_tflops is logged either way"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass: less memory, about a third more compute"""
    fused_kernels: str = "none"
    """the decoder's element-wise kernels (rlve/training/fused.py): "none"; "compile" (torch.compile
    of each RMSNorm and SwiGLU MLP, any device); "liger" (liger-kernel's Triton RMSNorm, rotary
    and SwiGLU: a CUDA device and `pip install liger-kernel`). Same log-probs and gradients up
    to float rounding (tests/unit/test_fused.py); speed in docs/benchmarks.md"""
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
    """train steps of the run (one rollout batch each; the loop stops there); >= 1. A train step
    takes num_iterations x mini_batches optimizer steps; the cosine schedule spans all of them"""
    min_lr_ratio: float = 0.0
    """the cosine schedule's final lr as a share of lr; in [0, 1]"""
    max_grad_norm: float = 1.0
    """clip the global gradient norm to this; 0 turns clipping off (the norm is still logged)"""

    max_tokens_per_microbatch: int = 8192
    """token budget of one forward pass: rows x row length stays under it; >= 1. A single
    longer sequence gets a micro-batch of its own (see rlve.algorithms.packing)"""
    packing: str = "packed"
    """micro-batch layout: "packed" (sequences end to end in rows, attention kept inside each
    sequence; with flash attention one unpadded row of up to max_tokens_per_microbatch per
    micro-batch, with sdpa/eager rows no longer than the step's longest sequence, as their
    block-diagonal mask costs the row length squared) or "padded" (one right-padded sequence per
    row). Same log-probs and gradients up to float rounding; packed needs a model with only
    full-attention layers (docs/algorithms.md, "Micro-batches")"""
    share_prefixes: bool = True
    """packed rows with sdpa attention: forward each distinct prefix of a micro-batch's
    sequences once (a group's prompt, the system prompt, repeated first turns), through a prefix
    tree of up to max_tokens_per_microbatch nodes; same log-probs and gradients up to float
    rounding. Ignored where the attention cannot read a tree (padded rows, flash, eager)"""
    tree_attention: str = "auto"
    """how a prefix tree's attention runs: "segments" (one sdpa call per segment), "buckets"
    (segments of like shapes batched, a few masked calls a layer), "flex" (one FlexAttention
    call a layer; GPUs only) or "auto" (segments on the CPU, where buckets were no faster;
    buckets on a GPU). Same outputs up to float rounding (rlve/training/tree_plan.py)"""
    logprob_chunk_tokens: int = 1024
    """tokens per chunk of the vocabulary projection, so [tokens, vocab] logits never exist at
    once for the whole micro-batch; >= 1"""

    loss: str = "cispo"
    """policy loss: "grpo", "dapo", "cispo", "dr_grpo" (GRPO without the length bias), "gspo",
    "gmpo" (sequence-level ratios; gmpo reads eps_low / eps_high as bounds of the log-ratio),
    "dppo_tv", "dppo_kl" (a mask from the sampled token's probability move; eps_low / eps_high
    are its thresholds), or a loss of your own by import path ("package.module:function",
    decorated with `rlve.algorithms.register_loss`)"""
    old_logprobs: str = "recompute"
    """the behaviour policy of the ratio r = pi_theta / pi_old: "sampler" (vLLM's log-probs of
    the sampled tokens, so r also spans the weight lag of an async run; MiniMax-M1, prime-rl) or
    "recompute" (a no-grad trainer pass before the first update; `tis_cap` corrects the gap)"""
    std_normalize: bool | None = None
    """divide group advantages by the group's reward std (GRPO); None = the loss's own (on for
    grpo, dapo, gspo, gmpo; off for cispo, dr_grpo, dppo_tv, dppo_kl; docs/algorithms.md,
    "Losses")"""
    advantage: str = "group"
    """how a group's rewards become advantages: "group" (R - the group's mean, divided by its
    std with `std_normalize`) or "maxrl" ((R - p) / p for 0/1 rewards, p the group's success
    rate: MaxRL, arXiv 2602.02710; whole-episode credit; `std_normalize` is not read; a reward
    other than 0 and 1 stops the run; docs/algorithms.md, "Advantages")"""
    credit: str = "episode"
    """"episode": every token of a rollout gets its episode's advantage; "turn": each model turn
    gets its own, from the return of the rewards after it (rlve.algorithms.turn_credit)"""
    turn_gamma: float = 1.0
    """discount of later turns' rewards in a turn's return (credit "turn"); in [0, 1]"""
    turn_baseline: str = "turn"
    """what a turn's return is compared with (credit "turn"): "turn", the same turn of the
    group's other rollouts; "position", the group's turns after the same conversation (the same
    board, in a game), a turn alone at its position falling back to "turn"\""""
    eps_low: float | None = None
    """lower clip range of the clipping losses: ratio >= 1 - eps_low; in [0, 1). None = the
    loss's own (docs/algorithms.md, "Losses"), and stays None for a loss that reads no clip
    range (cispo); setting it for such a loss is an error"""
    eps_high: float | None = None
    """upper clip range of the clipping losses: ratio <= 1 + eps_high; >= 0. None as eps_low"""
    is_cap: float | None = None
    """cap on CISPO's importance weight (absolute); > 0. None = the loss's own (cispo: 5.0),
    and stays None for a loss that reads no cap; setting it for such a loss is an error"""
    length_norm: int = 1024
    """dr_grpo's constant in place of a sequence's length: each sequence's token losses are
    summed and divided by it (the paper: the longest generation allowed); >= 1"""
    tis_cap: float | None = None
    """truncated importance sampling cap C against the sampler's log-probs; None = off; > 1"""
    tis_mode: str = "truncate"
    """"truncate" (weight min(w, C)) or "mask" (drop tokens with w outside [1/C, C])"""
    entropy_quantile: float = 1.0
    """the share of each micro-batch's trained tokens that keep their advantage, highest entropy
    first (the "forking" tokens; TRL's top_entropy_quantile; the paper kept 0.2); the others
    add no gradient but still count in the denominators. 1.0 trains on every token; in (0, 1]"""
    tis_level: str = "token"
    """where the sampler ratio w is taken: "token", "sequence" (the product of a sequence's token
    ratios) or "geometric" (their geometric mean); a sequence's w weighs all its tokens"""
    kl_beta: float = 0.0
    """weight of the k3 KL penalty to the reference model; 0 = off (no reference is loaded)"""
    distill: DistillConfig = field(default_factory=DistillConfig)
    """on-policy distillation: a teacher's score of each sampled token added to its advantage
    (rlve/config/distill.py)"""
    temperature: float = 1.0
    """sampling temperature of the rollouts: log-probs are log_softmax(logits / temperature)"""
    num_iterations: int = 1
    """passes over the same rollouts per train_step (PPO epochs); >= 1"""
    mini_batches: int = 1
    """optimizer steps per pass: the step's sequences are split into this many parts, so from the
    second on r != 1 and the clip acts; >= 1. A train_step takes num_iterations x mini_batches
    optimizer steps, and the lr schedule counts those"""
    max_bad_steps: int = 3
    """consecutive skipped steps (NaN/inf loss or gradient, nothing to train) before
    TrainingDiverged is raised; >= 1"""

    seed: int = 0
    """seed of python, numpy and torch rngs (LoRA init, dropout)"""
    keep_checkpoints: int = 3
    """checkpoints kept in a checkpoint directory; older ones are deleted; >= 1"""

    def validate(self) -> None:
        from rlve.algorithms import SCHEDULES
        from rlve.algorithms.advantages import ADVANTAGES
        from rlve.algorithms.packing import PACKINGS

        require_choice("dtype", self.dtype, DTYPES)
        require_choice("packing", self.packing, PACKINGS)
        require_choice("trainer.tree_attention", self.tree_attention, TREE_ATTENTIONS)
        require_choice("trainer.fused_kernels", self.fused_kernels, FUSED_KERNELS)
        require_choice("credit", self.credit, CREDITS)
        require_choice("trainer.advantage", self.advantage, ADVANTAGES)
        require(self.advantage == "group" or self.credit == "episode",
                "trainer.advantage=maxrl gives whole episodes their advantage: set "
                "trainer.credit=episode")  # fmt: skip
        require_choice("trainer.turn_baseline", self.turn_baseline, TURN_BASELINES)
        require(
            self.turn_baseline == "turn" or self.credit == "turn",
            "trainer.turn_baseline=position compares turns: it needs trainer.credit=turn",
        )
        require(0.0 <= self.turn_gamma <= 1.0,
                f"trainer.turn_gamma must be in [0, 1], got {self.turn_gamma}")  # fmt: skip
        require(self.cpu_threads is None or self.cpu_threads >= 1,
                f"trainer.cpu_threads must be None or >= 1, got {self.cpu_threads}")  # fmt: skip
        require(self.peak_tflops is None or self.peak_tflops >= 0,
                f"trainer.peak_tflops must be None or >= 0, got {self.peak_tflops}")  # fmt: skip
        self.lora.validate()
        self.distill.validate()
        require(self.lr > 0, f"lr must be > 0, got {self.lr}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value}")
        require(self.adam_eps > 0, f"adam_eps must be > 0, got {self.adam_eps}")
        require(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        require_choice("lr_schedule", self.lr_schedule, SCHEDULES)
        require(self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}")
        require(
            0.0 <= self.min_lr_ratio <= 1.0,
            f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}",
        )
        require(self.max_grad_norm >= 0, f"max_grad_norm must be >= 0, got {self.max_grad_norm}")
        for name in TRAINER_COUNTS:
            value = getattr(self, name)
            require(value >= 1, f"{name} must be >= 1, got {value}")
        self._validate_loss()

    def _validate_loss(self) -> None:
        from rlve.algorithms import check_hyperparameters
        from rlve.algorithms.mismatch import TIS_LEVELS
        from rlve.config.loss_settings import fill_loss_settings

        fill_loss_settings(self)
        require(self.length_norm >= 1, f"trainer.length_norm must be >= 1, got {self.length_norm}")
        check_hyperparameters(self.eps_low, self.eps_high, self.is_cap, self.tis_cap,
                              self.tis_mode, num_tokens=None)  # fmt: skip
        require_choice("old_logprobs", self.old_logprobs, OLD_LOGPROBS)
        require_choice("tis_level", self.tis_level, TIS_LEVELS)
        quantile = self.entropy_quantile
        require(
            0.0 < quantile <= 1.0, f"trainer.entropy_quantile must be in (0, 1], got {quantile}"
        )
        require(
            quantile == 1.0 or self.loss not in ("gspo", "gmpo"),
            f"entropy_quantile={quantile} zeroes the advantage of low-entropy tokens, which "
            f"{self.loss}'s per-sequence advantage (their mean) would shrink: use a token-ratio "
            "loss (cispo, dapo, grpo, dr_grpo) or entropy_quantile=1.0",
        )
        require(self.tis_level == "token" or self.tis_cap is not None,
                f"tis_level={self.tis_level!r} sets where the sampler correction acts, and there "
                "is none: set trainer.tis_cap (e.g. 2.0)")  # fmt: skip
        require(
            self.tis_cap is None or self.old_logprobs == "recompute",
            f"tis_cap={self.tis_cap} corrects recomputed old log-probs against the sampler's; "
            "with old_logprobs=sampler the ratio is already against the sampler: set tis_cap=null",
        )
        require(self.kl_beta >= 0.0, f"kl_beta must be >= 0, got {self.kl_beta}")
        require(self.temperature > 0.0, f"temperature must be > 0, got {self.temperature}")
