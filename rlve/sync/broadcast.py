"""Weight sync by collective broadcast: no file, no second full copy of the model in memory.

The trainer is rank 0 of a small process group whose other ranks are vLLM's workers. Each push
first tells the workers which tensors follow (name, dtype, shape), then broadcasts them one by
one; the workers feed them to vLLM's in-place reload as they arrive. NCCL moves GPU tensors from
device to device; gloo moves CPU tensors (a CPU engine, and the tests that run this very code
without a GPU). The group is stand-alone, with its own TCPStore, so it never touches
torch.distributed's default group, which vLLM keeps for its own workers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from rlve.sync.weight_stream import NamedTensors, WeightStream, as_stream

BACKENDS = ("nccl", "gloo")
STORE_PREFIX = "rlve-weights"


@dataclass(frozen=True)
class TensorSpec:
    """What the workers allocate before a tensor arrives."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @classmethod
    def of(cls, name: str, tensor: torch.Tensor) -> TensorSpec:
        return cls(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape))

    def to_wire(self) -> list:
        """Plain lists: vLLM's RPC serialiser passes them without pickling."""
        return [self.name, self.dtype, list(self.shape)]

    @classmethod
    def from_wire(cls, row: list) -> TensorSpec:
        name, dtype, shape = row
        return cls(name, dtype, tuple(shape))


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(
            f"weight broadcast backend must be one of {list(BACKENDS)}, got {backend!r}"
        )


def open_group(store: dist.Store, rank: int, world_size: int, backend: str, timeout_s: float):
    """Join the weight group; blocks until all `world_size` ranks have joined."""
    _check_backend(backend)
    prefixed = dist.PrefixStore(STORE_PREFIX, store)
    timeout = timedelta(seconds=timeout_s)
    if backend == "gloo":
        return dist.ProcessGroupGloo(prefixed, rank, world_size, timeout)
    if not torch.cuda.is_available() or not hasattr(dist, "ProcessGroupNCCL"):
        raise RuntimeError(
            "weight_transport 'nccl' needs CUDA in the trainer and in vLLM's workers, and this "
            "process has none: use 'shared_memory' or 'gloo'"
        )
    options = dist.ProcessGroupNCCL.Options()
    options._timeout = timeout
    return dist.ProcessGroupNCCL(prefixed, rank, world_size, options)


def _broadcast_from_trainer(group, tensor: torch.Tensor):
    """Start one broadcast from rank 0 (on rank 0 it sends `tensor`, elsewhere it fills it)."""
    options = dist.BroadcastOptions()
    options.rootRank = 0
    return group.broadcast([tensor], options)


RECEIVERS_DONE_GRACE_S = 10.0
"""how long a send may still take to complete once the receiving side has returned: gloo marks
the sender's work completed a moment after the receivers have their bytes, and on loaded cores
the receivers' answer can arrive first"""


def _finish(work, given_up: Callable[[], bool], grace_s: float = RECEIVERS_DONE_GRACE_S) -> None:
    """Wait for a transfer, polling `given_up`: a receiver that died ends the push within
    `grace_s` instead of at the group's time-out."""
    pause, deadline = 1e-5, None
    while not work.is_completed():
        if deadline is None and given_up():
            deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
            raise RuntimeError("the receiving side stopped in the middle of a weight push")
        time.sleep(pause)
        pause = min(2 * pause, 1e-3)
    try:
        work.wait()  # raises the transfer's own error, if any
    except Exception as exc:
        if deadline is not None:  # the receivers had stopped: that is why it failed
            raise RuntimeError("the receiving side stopped in the middle of a weight push") from exc
        raise


def listening_socket(host: str) -> socket.socket:
    """A socket listening on `host` only, on a free port. TCPStore given a host name still listens
    on every interface; given this socket, it takes the connections of `host` alone."""
    family, kind, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(address)
    listener.listen(128)
    return listener


class WeightBroadcaster:
    """The trainer's end (rank 0). `store_port` goes to the workers, then `connect` while they
    join; each push is `plan` (tell the workers what follows), then `send`."""

    def __init__(self, backend: str, world_size: int, timeout_s: float, host: str = "127.0.0.1"):
        _check_backend(backend)
        if world_size < 2:
            raise ValueError(f"a weight group needs the trainer and >= 1 worker, got {world_size}")
        self.backend = backend
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.host = host
        listener = listening_socket(host)
        self.store_port: int = listener.getsockname()[1]
        self._store = dist.TCPStore(
            host,
            self.store_port,
            None,
            True,
            timedelta(seconds=timeout_s),
            wait_for_workers=False,
            master_listen_fd=listener.detach(),
        )
        self._group = None
        self._specs: list[TensorSpec] | None = None

    def connect(self) -> None:
        """Join as rank 0; returns once every worker has joined too."""
        self._group = open_group(self._store, 0, self.world_size, self.backend, self.timeout_s)

    def plan(self, named_tensors: NamedTensors | WeightStream):
        """The specs of this push (from its layout: nothing is gathered to learn them) and the
        tensors to `send` after them, one at a time."""
        stream = as_stream(named_tensors)
        self._specs = [TensorSpec(name, str(dtype).removeprefix("torch."), shape)
                       for name, dtype, shape in stream.layout]  # fmt: skip
        if not self._specs:
            raise ValueError("no weights to push")
        return self._specs, stream

    def send(
        self,
        named_tensors: Iterable[tuple[str, torch.Tensor]],
        given_up: Callable[[], bool] = lambda: False,
    ) -> None:
        """Broadcast the tensors in the order `plan` announced; stop with an error as soon as
        `given_up()` is true (the receivers' RPC ended early: they failed)."""
        if self._group is None or self._specs is None:
            raise RuntimeError("WeightBroadcaster.send before connect() and plan()")
        sent, devices = 0, set()
        for spec, (name, tensor) in zip(self._specs, named_tensors, strict=False):
            if TensorSpec.of(name, tensor) != spec:
                raise ValueError(
                    f"weight {sent}: announced {spec}, got {TensorSpec.of(name, tensor)}: the "
                    "workers allocate what the push announced"
                )
            on_wire = self._on_wire_device(tensor)
            devices.add(on_wire.device)
            _finish(_broadcast_from_trainer(self._group, on_wire), given_up)
            sent += 1
        if sent != len(self._specs):
            raise ValueError(f"announced {len(self._specs)} weights, sent {sent}")
        for device in devices if self.backend == "nccl" else ():
            torch.cuda.synchronize(device)  # the trainer's GPUs, not the current one (vLLM's)

    def _on_wire_device(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        if self.backend == "gloo":
            return tensor.to("cpu").contiguous()
        if tensor.device.type != "cuda":
            raise ValueError(
                f"weight_transport 'nccl' sends from a GPU, but the trainer's weights are on "
                f"{tensor.device}: set trainer.device=cuda:N or use 'shared_memory'"
            )
        return tensor.contiguous()

    def close(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.shutdown()


def join_weight_group(
    host: str, port: int, rank: int, world_size: int, backend: str, timeout_s: float
):
    """A worker's end: connect to the trainer's store and join the group as `rank` (>= 1)."""
    store = dist.TCPStore(host, port, None, False, timedelta(seconds=timeout_s))
    return open_group(store, rank, world_size, backend, timeout_s)


def receive_weights(
    group, specs: list[TensorSpec], device: torch.device | str
) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors rank 0 broadcasts, in order, each allocated on `device` as it arrives."""
    for spec in specs:
        tensor = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=device)
        _broadcast_from_trainer(group, tensor).wait()
        yield spec.name, tensor
