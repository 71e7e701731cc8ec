"""Where the trainer and vLLM run, checked before anything starts.

`trainer.device` is the training process's torch device ("cpu", "cuda:1"). `inference.gpus` lists
the GPUs vLLM's processes may use, in the same numbering as `cuda:N` in the training process
(so it follows that process's CUDA_VISIBLE_DEVICES); None lets vLLM take the first
`tensor_parallel_size` of them. The usual two-GPU layout is vLLM on [0] and the trainer on cuda:1.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager

log = logging.getLogger(__name__)


def cuda_index(device: str) -> int | None:
    """The GPU index of a torch device string: "cuda:1" -> 1, "cuda" -> 0, "cpu" -> None."""
    if not device.startswith("cuda"):
        return None
    _, _, index = device.partition(":")
    return int(index) if index else 0


def engine_gpus(gpus: list[int] | None, tensor_parallel_size: int) -> list[int]:
    """The GPUs (training-process numbering) vLLM will run on."""
    return list(gpus) if gpus is not None else list(range(tensor_parallel_size))


def check_placement(
    trainer_device: str,
    gpus: list[int] | None,
    tensor_parallel_size: int,
    weight_transport: str,
    gpu_memory_utilization: float,
) -> None:
    """Raise ValueError for a placement that cannot work; warn for one that may not fit."""
    if gpus is not None:
        if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
            raise ValueError(f"inference.gpus must be distinct GPU indices >= 0, got {gpus}")
        if len(gpus) < tensor_parallel_size:
            raise ValueError(
                f"inference.gpus lists {len(gpus)} GPU(s) but inference.tensor_parallel_size is "
                f"{tensor_parallel_size}"
            )
    trainer_gpu = cuda_index(trainer_device)
    vllm_gpus = engine_gpus(gpus, tensor_parallel_size)
    shared = trainer_gpu is not None and trainer_gpu in vllm_gpus
    if weight_transport == "nccl":
        if trainer_gpu is None:
            raise ValueError(
                f"inference.weight_transport=nccl sends from the trainer's GPU, but "
                f"trainer.device is {trainer_device!r}: use trainer.device=cuda:N or "
                "weight_transport=shared_memory"
            )
        if shared:
            raise ValueError(
                f"inference.weight_transport=nccl cannot connect two ranks on one GPU: the "
                f"trainer (cuda:{trainer_gpu}) and vLLM ({vllm_gpus}) share it; move one "
                "(e.g. inference.gpus=[0] trainer.device=cuda:1) or use "
                "weight_transport=shared_memory"
            )
    if shared:
        _warn_once(
            f"the trainer and vLLM share cuda:{trainer_gpu}; vLLM takes "
            f"{100 * gpu_memory_utilization:.0f}% of its memory "
            "(inference.gpu_memory_utilization), the trainer gets what is left"
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
