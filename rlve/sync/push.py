"""A weight push to every inference replica, whatever carries it and wherever the replicas run.

The engines (vLLM in this process, `rlve.serve` servers elsewhere) differ only in how they run a
method in every worker of every replica (`Everywhere`: start the calls, get a future of their
results); the order of a push is the same for all: a shared-memory file that each worker loads,
or a broadcast group (the trainer is rank 0, then replica 0's workers, replica 1's...) that
streams the tensors while the workers load them as they arrive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable

import torch

from rlve.reliability.kill_points import kill_point
from rlve.sync.broadcast import WeightBroadcaster
from rlve.sync.shared_memory import SharedMemoryTransport, wire_dtype
from rlve.sync.weight_stream import NamedTensors, WeightStream, as_stream

Everywhere = Callable[..., concurrent.futures.Future]
"""everywhere(method, *args): start `method(*args)` in every worker of every replica"""
OnReplica = Callable[..., concurrent.futures.Future]
"""on_replica(i, method, *args): start `method(*args)` in every worker of replica i"""


def wait_for(future: concurrent.futures.Future, timeout: float, what: str):
    """The future's result, or TimeoutError naming `what` after `timeout` seconds."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError as exc:
        future.cancel()
        raise TimeoutError(f"inference engine: {what} took longer than {timeout:.0f} s") from exc


async def gather(*coroutines) -> list:
    """asyncio.gather for an engine's own loop (gather itself needs a running loop): the calls
    to every replica of a push, or their prefix-cache resets."""
    return await asyncio.gather(*coroutines)


ENGINE_DTYPES = {"float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16, "half": torch.float16}  # fmt: skip
"""vLLM's dtype names -> the torch dtype it serves in ("auto" and others: not known here)"""


def push_weights(
    named_tensors: NamedTensors | WeightStream,
    version: int,
    everywhere: Everywhere,
    timeout: float,
    files: SharedMemoryTransport | None = None,
    broadcaster: WeightBroadcaster | None = None,
    engine_dtype: str | None = None,
) -> None:
    """Load `named_tensors` as `version` into every worker, through `files` or `broadcaster`;
    a `WeightStream` is read one tensor at a time. Floating-point tensors travel in
    `engine_dtype` (vLLM's name for it) when it is known: vLLM would round them to it anyway,
    so a float32 trainer sends a bfloat16 engine half the bytes."""
    dtype = ENGINE_DTYPES.get(engine_dtype or "")
    stream = as_stream(named_tensors)
    if files is not None:
        path = files.write(stream, version, dtype)
        kill_point("weight_push", version)
        wait_for(everywhere("rlve_load_weights_file", str(path), version), timeout, "a push")
        return
    if dtype is not None:
        stream = stream.cast(lambda held: wire_dtype(held, dtype))
    specs, tensors = broadcaster.plan(stream)
    loading = everywhere("rlve_receive_weights", [spec.to_wire() for spec in specs], version)
    kill_point("weight_push", version)
    try:  # the workers' calls ending before every tensor is sent means they failed
        broadcaster.send(tensors, given_up=loading.done)
    except BaseException:
        loading.cancel()
        raise
    wait_for(loading, timeout, "receiving the broadcast weights")


def connect_broadcaster(
    backend: str, workers: list[int], on_replica: OnReplica, timeout: float, host: str
) -> WeightBroadcaster:
    """Open the broadcast group with `workers[i]` workers in replica i; `host` is this process's
    address as the replicas reach it."""
    world_size = 1 + sum(workers)
    broadcaster = WeightBroadcaster(backend, world_size, timeout, host=host)
    first_ranks = [1 + sum(workers[:i]) for i in range(len(workers))]
    joins = [
        on_replica(i, "rlve_join_weight_group", host, broadcaster.store_port, world_size,
                   first_rank, backend, timeout)
        for i, first_rank in enumerate(first_ranks)
    ]  # fmt: skip
    connecting: concurrent.futures.Future = concurrent.futures.Future()

    def connect() -> None:  # a daemon thread: a failed join must not hold the process
        try:
            broadcaster.connect()
            connecting.set_result(None)
        except BaseException as exc:
            connecting.set_exception(exc)

    threading.Thread(target=connect, name="weight-group", daemon=True).start()
    # any side failing ends the wait at once instead of after the time-out
    done, pending = concurrent.futures.wait(
        [*joins, connecting], timeout, concurrent.futures.FIRST_EXCEPTION
    )
    for future in done:
        future.result()
    if pending:
        broadcaster.close()
        raise TimeoutError(f"joining the {backend} weight group took longer than {timeout:.0f} s")
    return broadcaster
