"""`inference.*`: how the vLLM engine is started and how new weights reach it."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlve.config.checks import require, require_choice

WEIGHT_TRANSPORTS = ("shared_memory", "nccl", "gloo")
LORA_PUSHES = ("merged", "adapter")


@dataclass
class InferenceConfig:
    """How the vLLM engine is started (`inference.*`)."""

    dtype: str = "auto"
    """weights and activations: "float32", "bfloat16", or "auto" as `trainer.dtype` (bfloat16
    where native). float32 on both sides gives the trainer vLLM's log-probs to 1e-4; bfloat16
    samples twice as fast on the CPU, its log-probs a few hundredths off (docs/benchmarks.md)"""
    max_model_len: int = 2048
    """longest sequence (prompt + completion) the engine accepts"""
    gpu_memory_utilization: float | None = None
    """share of each of vLLM's GPUs for its weights + KV cache, in (0, 1] (on the CPU vLLM reserves
    that share of RAM); None = by the layout (rlve/sync/placement.py): 0.4 on a GPU shared with
    the trainer, 0.8 on GPUs of its own, 0.2 on the CPU; an engine started outside a run (e.g.
    `rlve-eval`) takes 0.4 on a GPU, as it may share it"""
    cpu_kv_cache_gib: int = 1
    """KV cache size on CPU, whole GiB (sets VLLM_CPU_KVCACHE_SPACE)"""
    cpu_cores: str = "auto"
    """cores of vLLM's worker on CPU (sets VLLM_CPU_OMP_THREADS_BIND: "0", "0-3", "nobind");
    "vllm" = vLLM's choice: every core but one, left to its scheduler process; "auto" = every
    core on a machine of two, where it evaluated 1.8x faster than on one, unless sampling
    overlaps training (`rollout.async_level` > 0), and "vllm" elsewhere
    (rlve.inference.cpu_binding)"""
    max_num_seqs: int = 256
    """most sequences in one engine batch"""
    enforce_eager: bool = False
    """skip graph capture/compilation: faster start, slower steps"""
    enable_prefix_caching: bool = True
    """reuse the KV cache of shared prefixes (multi-turn prompts grow by appending)"""
    block_size: int | None = None
    """KV cache block size in tokens; None = 32 on CPU, vLLM's default on GPU (16). Prefix
    caching reuses whole blocks only, so each turn of a multi-turn episode recomputes the part
    of its history past the last full block: with vLLM's CPU default of 128 that is up to 127
    tokens a turn"""
    seed: int = 0
    """engine seed (requests carry their own seeds too)"""
    tensor_parallel_size: int = 1
    """GPUs per engine (per replica)"""
    replicas: int = 1
    """vLLM engines serving the same weights; a request goes to the one with the fewest in
    flight, and every push reaches all of them"""
    gpus: list[int] | None = None
    """GPUs vLLM runs on, numbered like the trainer's `cuda:N` (e.g. [0] with trainer.device
    cuda:1): `replicas` x `tensor_parallel_size` of them, replica i on the i-th run of
    `tensor_parallel_size`; None = the first `tensor_parallel_size` GPUs (one replica; GPU 0, where
    `trainer.device=auto` puts the trainer beside it on one GPU and on GPU 1 on two) or the CPU"""
    request_timeout_s: float = 600.0
    """longest wait for one generation (past it, or when the request fails, its episode ends as
    'engine_error', a fault: faults/engine_error) and for each part of a weight push"""
    start_timeout_s: float = 900.0
    """longest wait for the engine to start"""
    servers: list[str] = field(default_factory=list)
    """`python -m rlve.serve` servers to use instead of starting vLLM here, by address
    ("http://10.0.0.2:8000"); each is one replica, and the fields above are the servers' own"""
    weight_sync_host: str = "127.0.0.1"
    """this node's address as the servers reach it, for the gloo/nccl broadcast group"""
    weight_transport: str = "shared_memory"
    """how pushes reach vLLM: "shared_memory" (a safetensors file in RAM; CPU or GPU), "nccl"
    (broadcast GPU to GPU; the trainer on its own GPU) or "gloo" (broadcast through CPU memory)"""

    def __post_init__(self):  # checked when built: VLLMEngine takes one directly
        share = self.gpu_memory_utilization
        require(share is None or 0 < share <= 1,
                f"gpu_memory_utilization must be in (0, 1] or null, got {share}")  # fmt: skip
        require(
            isinstance(self.cpu_kv_cache_gib, int) and self.cpu_kv_cache_gib >= 1,
            f"cpu_kv_cache_gib must be an integer >= 1, got {self.cpu_kv_cache_gib!r}",
        )
        require_choice("weight_transport", self.weight_transport, WEIGHT_TRANSPORTS)
        require(self.replicas >= 1, f"inference.replicas must be >= 1, got {self.replicas}")
        require(self.max_model_len >= 16, f"max_model_len must be >= 16, got {self.max_model_len}")


@dataclass
class SyncConfig:
    """What a push sends into vLLM (`sync.*`)."""

    lora: str = "merged"
    """with trainer.lora.enabled: "merged" (the adapter merged into the base weights, every
    weight pushed) or "adapter" (the adapter's tensors alone, loaded by vLLM's LoRA support in
    place under one name: rlve.sync.adapter_push); "adapter" needs vLLM started by the run"""

    def validate(self) -> None:
        require_choice("sync.lora", self.lora, LORA_PUSHES)
