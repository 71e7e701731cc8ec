"""This process's place among torchrun's ranks, and the few collectives rlve needs.

Without torchrun (no WORLD_SIZE in the environment) the world is one process and every collective
here returns its input, so single-process code calls them unconditionally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_S = 2 * 3600.0
"""how long a rank waits in a collective: the other ranks wait there while rank 0 plays rollouts"""


@dataclass(frozen=True)
class World:
    """Rank and size of the training job (1 process without torchrun)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    sharded: bool = False
    """started by torchrun (even with one rank): parameters are FSDP2-sharded DTensors and the
    collectives below really communicate"""

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that drives rollouts, the engine, logging and the checkpoint's state."""
        return self.rank == 0

    @classmethod
    def from_env(cls) -> World:
        """This process's rank as torchrun's environment says (before or after joining)."""
        return cls(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
                   _local_rank(), sharded="WORLD_SIZE" in os.environ)  # fmt: skip

    # ---- collectives (the identity for one process) -------------------------------------------

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0's `obj` on every rank (pickled)."""
        if not self.sharded:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank (pickled)."""
        if not self.sharded:
            return [obj]
        boxes: list[Any] = [None] * self.size
        dist.all_gather_object(boxes, obj)
        return boxes

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums over the ranks (float64, so counts stay exact)."""
        if not self.sharded:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def max(self, value: int) -> int:
        if not self.sharded:
            return value
        tensor = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return int(tensor.item())

    def all(self, flag: bool) -> bool:
        """True on every rank when it is true on every rank."""
        return self.sum([0.0 if flag else 1.0])[0] == 0

    def barrier(self) -> None:
        if self.sharded:
            dist.barrier()


def init_world(device: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[World, str]:
    """Join torchrun's process group when started by torchrun; returns the world and this rank's
    torch device: "cuda" becomes cuda:<LOCAL_RANK> under torchrun, a CPU trainer uses gloo.

    Raises:
        ValueError: a fixed GPU ("cuda:1") for several ranks, which would all land on it.
    """
    if dist.is_available() and dist.is_initialized():  # joined already (a second run, tests)
        world = World(dist.get_rank(), dist.get_world_size(), _local_rank(), sharded=True)
        return world, _rank_device(device, world)
    if "WORLD_SIZE" not in os.environ:
        if device.startswith("cuda:"):  # CUDA calls without a device (synchronize...) mean this
            torch.cuda.set_device(torch.device(device))  # GPU, not cuda:0, which may be vLLM's
        # plain "cuda" is the current GPU already (set_device refuses a device without an index)
        return World(), device
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    world = World(rank, size, _local_rank(), sharded=True)
    device = _rank_device(device, world)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(process_group_backend(device), timeout=timedelta(seconds=timeout_s))
    return world, device


def process_group_backend(device: str) -> str:
    """The backend of the ranks' process group for a trainer on `device`.

    A GPU trainer needs two: NCCL for FSDP's CUDA tensors, and gloo for the CPU tensors of the
    collectives above (counts, flags, pickled orders), which NCCL alone refuses ("No backend type
    associated with device type cpu"). torch routes each tensor by its device.
    """
    return "cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo"


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def _rank_device(device: str, world: World) -> str:
    if device == "cuda":
        return f"cuda:{world.local_rank}"
    if device.startswith("cuda:") and world.size > 1:
        raise ValueError(
            f"trainer.device={device!r} would put all {world.size} ranks on one GPU; under "
            "torchrun use trainer.device=cuda (rank r takes cuda:<LOCAL_RANK>)"
        )
    return device


def close_world() -> None:
    """Leave the process group (at the end of a run; safe without one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
