"""The ranks' process group: its backend serves the CPU tensors of rlve's own collectives.

A GPU run's group must route CPU tensors (counts, flags, pickled orders) to gloo and CUDA tensors
(FSDP) to NCCL. NCCL cannot start without GPUs, so the CPU test runs every collective of `World`
on two processes joined with the device-keyed form ("cpu:gloo") that the GPU backend string is
made of; `tests/integration/test_gpu_paths.py` runs a real NCCL step (marker gpu).
"""

import multiprocessing
import socket
from datetime import timedelta

import pytest
import torch.distributed as dist

from rlve.distributed.world import World, process_group_backend


@pytest.mark.parametrize(
    "device, backend",
    [("cpu", "gloo"), ("cuda", "cpu:gloo,cuda:nccl"), ("cuda:1", "cpu:gloo,cuda:nccl")],
)
def test_a_gpu_trainer_joins_a_group_with_a_cpu_backend(device, backend):
    assert process_group_backend(device) == backend


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_process(rank: int, port: int, backend: str, results) -> None:
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=timedelta(seconds=60))  # fmt: skip
    world = World(rank, 2, rank, sharded=True)
    outcome = {
        "sum": world.sum([1.0, 10.0 * (rank + 1)]),
        "max": world.max(3 + 4 * rank),
        "all": (world.all(True), world.all(rank == 0)),
        "broadcast": world.broadcast(("train_step", [1, 2]) if rank == 0 else None),
        "gather": world.gather(f"rank {rank}"),
    }
    world.barrier()
    dist.destroy_process_group()
    results.put((rank, outcome))


def test_every_collective_runs_on_a_device_keyed_cpu_backend():
    backend = process_group_backend("cuda").split(",")[0]  # "cpu:gloo": NCCL needs GPUs
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_port()
    ranks = [context.Process(target=rank_process, args=(r, port, backend, results)) for r in (0, 1)]
    for process in ranks:
        process.start()
    outcomes = dict(results.get(timeout=120) for _ in ranks)
    for process in ranks:
        process.join(30)
        assert process.exitcode == 0
    for outcome in outcomes.values():
        assert outcome["sum"] == [2.0, 30.0]
        assert outcome["max"] == 7
        assert outcome["all"] == (True, False)
        assert outcome["broadcast"] == ("train_step", [1, 2])
        assert outcome["gather"] == ["rank 0", "rank 1"]


def test_a_one_process_gpu_trainer_makes_its_own_gpu_the_current_one(monkeypatch):
    # CUDA calls that name no device (torch.cuda.synchronize after an NCCL push) then reach the
    # trainer's GPU, not cuda:0, where vLLM runs in the two-GPU layout
    import torch

    from rlve.distributed.world import init_world

    current = []
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    assert init_world("cuda:1")[1] == "cuda:1" and current == [torch.device("cuda:1")]
    assert init_world("cpu")[1] == "cpu" and len(current) == 1
    assert init_world("cuda")[1] == "cuda" and len(current) == 1  # the current GPU, left as it is
