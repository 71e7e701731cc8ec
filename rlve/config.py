"""Every configuration of rlve, as dataclasses with one docstring under each field.

`RunConfig` is the schema of `python -m rlve.train` (Hydra fills it from `rlve/configs/` and the
command line); its parts: `TrainerConfig`, `InferenceConfig` (vLLM), `RolloutConfig`, `EnvConfig`
(with `CurriculumConfig`), `LoggingConfig`. Each `validate()` raises ValueError naming the field
and its allowed range, so a bad value fails at start, not in the middle of a run.

May import `rlve.sync.placement` and, inside `validate`, `rlve.algorithms` (the tables of losses
and schedules): only there, so that importing this module stays free of torch (environments
import `require`, and verifier workers import environments).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlve.sync.placement import check_placement

DTYPES = ("float32", "bfloat16")
OLD_LOGPROBS = ("sampler", "recompute")
TRAINER_COUNTS = ("max_steps", "max_tokens_per_microbatch", "logprob_chunk_tokens", "mini_batches",
                  "num_iterations", "max_bad_steps", "keep_checkpoints")  # fmt: skip
ASYNC_LEVELS = (0, 1)
ENGINES = ("vllm", "scripted")
WANDB_MODES = ("offline", "online", "disabled")
WEIGHT_TRANSPORTS = ("shared_memory", "nccl", "gloo")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def require(condition: bool, message: str) -> None:
    """Raise ValueError(message) unless `condition`: validation in one line."""
    if not condition:
        raise ValueError(message)


def require_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise ValueError naming `name` unless `value` is one of `allowed`."""
    require(value in allowed, f"{name} must be one of {list(allowed)}, got {value!r}")


def is_int(value: object) -> bool:
    """An int that is not a bool (True is an int to Python, never a count to us)."""
    return isinstance(value, int) and not isinstance(value, bool)


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
    longer sequence gets a micro-batch of its own (see rlve.algorithms.packing)"""
    logprob_chunk_tokens: int = 1024
    """tokens per chunk of the vocabulary projection, so [tokens, vocab] logits never exist at
    once for the whole micro-batch; >= 1"""

    loss: str = "cispo"
    """policy loss: "grpo", "dapo" or "cispo" (rlve.algorithms.LOSSES)"""
    old_logprobs: str = "recompute"
    """the behaviour policy of the ratio r = pi_theta / pi_old: "sampler" (vLLM's log-probs of
    the sampled tokens, so r also spans the weight lag of an async run; MiniMax-M1, prime-rl) or
    "recompute" (a no-grad trainer pass before the first update; `tis_cap` corrects the gap)"""
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

        require_choice("dtype", self.dtype, DTYPES)
        self.lora.validate()
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
        from rlve.algorithms import LOSSES, check_hyperparameters

        require_choice("loss", self.loss, sorted(LOSSES))
        check_hyperparameters(self.eps_low, self.eps_high, self.is_cap, self.tis_cap,
                              self.tis_mode, num_tokens=None)  # fmt: skip
        require_choice("old_logprobs", self.old_logprobs, OLD_LOGPROBS)
        require(
            self.tis_cap is None or self.old_logprobs == "recompute",
            f"tis_cap={self.tis_cap} corrects recomputed old log-probs against the sampler's; "
            "with old_logprobs=sampler the ratio is already against the sampler: set tis_cap=null",
        )
        require(self.kl_beta >= 0.0, f"kl_beta must be >= 0, got {self.kl_beta}")
        require(self.temperature > 0.0, f"temperature must be > 0, got {self.temperature}")


@dataclass
class InferenceConfig:
    """How the vLLM engine is started (`inference.*`)."""

    dtype: str = "float32"
    """weights and activations: float32 on CPU (exact log-prob parity), bfloat16 on GPU"""
    max_model_len: int = 2048
    """longest sequence (prompt + completion) the engine accepts"""
    gpu_memory_utilization: float = 0.2
    """share of GPU memory for weights + KV cache (on CPU vLLM reads it as a share of RAM)"""
    cpu_kv_cache_gib: int = 1
    """KV cache size on CPU, whole GiB (sets VLLM_CPU_KVCACHE_SPACE)"""
    max_num_seqs: int = 256
    """most sequences in one engine batch"""
    enforce_eager: bool = False
    """skip graph capture/compilation: faster start, slower steps"""
    enable_prefix_caching: bool = True
    """reuse the KV cache of shared prefixes (multi-turn prompts grow by appending)"""
    seed: int = 0
    """engine seed (requests carry their own seeds too)"""
    tensor_parallel_size: int = 1
    """GPUs per engine"""
    gpus: list[int] | None = None
    """GPUs vLLM runs on, numbered like the trainer's `cuda:N` (e.g. [0] with trainer.device
    cuda:1); None = the first `tensor_parallel_size` GPUs; ignored on CPU"""
    request_timeout_s: float = 600.0
    """longest wait for one generation before the run is stopped with an error"""
    start_timeout_s: float = 900.0
    """longest wait for the engine to start"""
    weight_transport: str = "shared_memory"
    """how pushes reach vLLM: "shared_memory" (a safetensors file in RAM; CPU or GPU), "nccl"
    (broadcast GPU to GPU; the trainer on its own GPU) or "gloo" (broadcast through CPU memory)"""

    def __post_init__(self):  # checked when built: VLLMEngine takes one directly
        require(
            0 < self.gpu_memory_utilization <= 1,
            f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}",
        )
        require(
            isinstance(self.cpu_kv_cache_gib, int) and self.cpu_kv_cache_gib >= 1,
            f"cpu_kv_cache_gib must be an integer >= 1, got {self.cpu_kv_cache_gib!r}",
        )
        require_choice("weight_transport", self.weight_transport, WEIGHT_TRANSPORTS)
        require(self.max_model_len >= 16, f"max_model_len must be >= 16, got {self.max_model_len}")


@dataclass
class RolloutConfig:
    """How rollouts are generated each step."""

    engine: str = "vllm"
    """"vllm" (the model) or "scripted" (a scripted policy named by `scripted_policy`, for tests)"""
    scripted_policy: str = "rlve.envs.tictactoe:random_policy"
    """module:function of the policy when engine is "scripted\""""
    group_size: int = 8
    """rollouts per problem (the group of group-relative advantages); >= 2"""
    groups_per_step: int = 32
    """problems per optimizer step; games per step = groups_per_step * group_size"""
    max_tokens: int | None = None
    """most tokens per model turn; None = each environment's own default"""
    top_p: float = 1.0
    """nucleus mass; 1.0 (the trainer's log-probs are of the whole distribution; temperature:
    `trainer.temperature`)"""
    max_concurrent: int = 256
    """most episodes in flight at once"""
    episode_time_limit_s: float | None = 600.0
    """wall-clock limit per episode; a timed-out episode ends as truncated; None = no limit"""
    async_level: int = 0
    """0: strictly on-policy; 1: generate step n+1 while the trainer trains step n"""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample more until the batch is full"""
    max_refills: int = 4
    """most extra sampling rounds per step when dynamic sampling is on; >= 0"""
    oversample: float = 1.0
    """with dynamic sampling, each refill asks for missing * oversample groups; >= 1"""
    overlong_buffer: int | None = None
    """DAPO overlong shaping: penalise completions in the last N tokens before max_tokens"""

    def validate(self) -> None:
        require_choice("rollout.engine", self.engine, ENGINES)
        require(self.group_size >= 2, f"rollout.group_size must be >= 2, got {self.group_size}")
        require(
            self.groups_per_step >= 1,
            f"rollout.groups_per_step must be >= 1, got {self.groups_per_step}",
        )
        require(
            self.max_tokens is None or self.max_tokens >= 1,
            f"rollout.max_tokens must be None or >= 1, got {self.max_tokens}",
        )
        require(self.top_p == 1.0, f"rollout.top_p must be 1.0, got {self.top_p}: vLLM's log-probs "
                "would be the nucleus's, the trainer's the whole distribution's")  # fmt: skip
        require(
            self.max_concurrent >= 1,
            f"rollout.max_concurrent must be >= 1, got {self.max_concurrent}",
        )
        require_choice("rollout.async_level", self.async_level, ASYNC_LEVELS)
        require(self.max_refills >= 0, f"rollout.max_refills must be >= 0, got {self.max_refills}")
        require(self.oversample >= 1, f"rollout.oversample must be >= 1, got {self.oversample}")
        require(
            self.overlong_buffer is None or self.overlong_buffer >= 1,
            f"rollout.overlong_buffer must be None or >= 1, got {self.overlong_buffer}",
        )


@dataclass
class CurriculumConfig:
    """Adaptive difficulty (RLVE): a window [low, high] per environment (rlve.curriculum)."""

    enabled: bool = False
    """draw each problem's difficulty from its environment's adaptive window"""
    tau_acc: float = 0.9
    """accuracy at `high` that raises the window; in (0, 1]"""
    tau_num: int = 128
    """rollouts at `high` counted before each check; >= 1"""
    d_delta: int = 4
    """widest window (high - low + 1); >= 1"""
    lower_floor: float | None = None
    """beyond the paper: lower `low` when accuracy there falls under this; None = off"""
    variance_weighting: bool = False
    """beyond the paper: favour environments whose recent groups had the most reward variance"""


@dataclass
class EnvConfig:
    """The environments to train on, and how problems are drawn from them."""

    names: list[str] = field(default_factory=lambda: ["tictactoe"])
    """environment names or globs (`rlve-gym/*`); see rlve.list_environments()"""
    weights: list[float] | None = None
    """sampling weight per entry of `names` (a glob's weight is shared by its matches); None =
    uniform over environments"""
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """keyword arguments per environment name, e.g. {tictactoe: {max_turns: 7}}"""
    default_args: dict[str, Any] = field(default_factory=dict)
    """keyword arguments for every environment of `names` (per-name `args` override them),
    e.g. {num_examples: 4} for a whole family loaded by a glob"""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """adaptive difficulty for environments that have one"""
    seed: int = 0
    """seed of the problem sampler (which environment, which example, which difficulty)"""

    def validate(self) -> None:
        require(len(self.names) > 0, "env.names must name at least one environment")
        if self.weights is not None:
            require(
                len(self.weights) == len(self.names),
                f"env.weights has {len(self.weights)} entries but env.names has {len(self.names)}",
            )
            require(all(w >= 0 for w in self.weights), f"env.weights must be >= 0: {self.weights}")
            require(sum(self.weights) > 0, "env.weights must not all be 0")
        c = self.curriculum
        require(0 < c.tau_acc <= 1, f"env.curriculum.tau_acc must be in (0, 1], got {c.tau_acc}")
        require(c.tau_num >= 1, f"env.curriculum.tau_num must be >= 1, got {c.tau_num}")
        require(c.d_delta >= 1, f"env.curriculum.d_delta must be >= 1, got {c.d_delta}")


@dataclass
class LoggingConfig:
    """Where metrics go: metrics.jsonl always, W&B, the console."""

    wandb_mode: str = "offline"
    """"offline" (files under the run directory, sync later), "online" or "disabled\""""
    project: str = "rlve"
    """W&B project"""
    tags: list[str] = field(default_factory=list)
    """W&B tags"""
    samples_per_step: int = 2
    """rollouts written as readable text to samples/step_<n>.txt each step; 0 = none"""
    console_every: int = 1
    """print a progress line every N steps"""

    def validate(self) -> None:
        require_choice("logging.wandb_mode", self.wandb_mode, WANDB_MODES)


@dataclass
class RunConfig:
    """A training run: `python -m rlve.train +experiment=tictactoe_cispo`."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """the learning side: model, LoRA, optimizer, loss, temperature, max_steps"""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """rollout generation"""
    env: EnvConfig = field(default_factory=EnvConfig)
    """environments and curriculum"""
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    """the vLLM engine"""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics sinks"""
    run_name: str = "run"
    """name of the run (W&B run name; part of the default output directory)"""
    output_dir: str = "runs/${run_name}"
    """run directory: metrics.jsonl, samples/, checkpoints/, wandb/, config.yaml"""
    save_every: int = 10
    """checkpoint every N steps (and at the end, and on Ctrl-C); >= 1"""
    resume: bool = False
    """continue the run in output_dir from its latest checkpoint"""

    def validate(self) -> None:
        self.trainer.validate()
        self.rollout.validate()
        self.env.validate()
        self.logging.validate()
        require(self.save_every >= 1, f"save_every must be >= 1, got {self.save_every}")
        if self.rollout.engine == "vllm":
            i = self.inference
            check_placement(self.trainer.device, i.gpus, i.tensor_parallel_size,
                            i.weight_transport, i.gpu_memory_utilization)  # fmt: skip
