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


def trainer_gpus(trainer_device: str, ranks: int = 1) -> list[int]:
    """The GPUs the trainer uses: under torchrun with trainer.device=cuda, local rank r takes
    cuda:r; otherwise the one GPU of `trainer_device`, or none on the CPU."""
    if trainer_device == "cuda" and ranks > 1:
        return list(range(ranks))
    index = cuda_index(trainer_device)
    return [] if index is None else [index]


def check_remote_placement(trainer_device: str, weight_transport: str) -> None:
    """The placement check when vLLM runs in `inference.servers` (on other nodes or in other
    processes): only the trainer's side is known here, so only NCCL's need of a GPU is checked;
    `inference.gpus` and the model config's GPU list describe no local engine and are ignored."""
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
