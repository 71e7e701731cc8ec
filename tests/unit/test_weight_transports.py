"""The two ways new weights travel to vLLM, checked without vLLM: the shared-memory file and the
broadcast group (gloo here: the same code that runs over NCCL on GPUs)."""

import concurrent.futures
import errno
import json
import os
import queue
import threading
import weakref

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from rlve.config import InferenceConfig
from rlve.inference.vllm_worker import WeightSyncExtension, tensors_of_file
from rlve.sync.broadcast import (
    TensorSpec,
    WeightBroadcaster,
    join_weight_group,
    receive_weights,
)
from rlve.sync.push import push_weights
from rlve.sync.shared_memory import SharedMemoryTransport
from rlve.sync.weight_stream import WeightStream, layout_of


def tied_weights() -> list[tuple[str, torch.Tensor]]:
    embedding = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    return [
        ("model.embed_tokens.weight", embedding),
        ("model.norm.weight", torch.tensor([0.5, -1.5, 2.0], dtype=torch.bfloat16)),
        ("lm_head.weight", embedding),  # tied: the same storage under a second name
    ]


# ---- shared memory ---------------------------------------------------------------------------


def test_shared_memory_file_holds_every_tensor_with_its_version_push_after_push(tmp_path):
    transport = SharedMemoryTransport(tmp_path / "w")
    path = transport.write(tied_weights(), version=3)
    loaded = load_file(path)
    assert sorted(loaded) == ["lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"]
    assert torch.equal(loaded["lm_head.weight"], torch.arange(12.0).reshape(4, 3))
    assert loaded["model.norm.weight"].dtype == torch.bfloat16
    assert int(safe_open(path, "pt").metadata()["version"]) == 3
    # the next push rewrites the same file in place
    again = transport.write([(name, 2 * t) for name, t in tied_weights()], version=4)
    assert again == path
    assert torch.equal(load_file(path)["lm_head.weight"], 2 * torch.arange(12.0).reshape(4, 3))
    assert int(safe_open(path, "pt").metadata()["version"]) == 4
    transport.close()
    assert not (tmp_path / "w").exists()


def test_shared_memory_weights_are_readable_by_their_owner_only(tmp_path):
    transport = SharedMemoryTransport(tmp_path / "run" / "weights")
    path = transport.write([("w", torch.ones(3))], version=1)
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)


def test_shared_memory_starts_every_tensor_aligned_to_its_item_size(tmp_path):
    weights = [("odd", torch.arange(3, dtype=torch.bfloat16)), ("wide", torch.arange(5.0)),
               ("flag", torch.tensor([True])), ("step", torch.tensor([7]))]  # fmt: skip
    path = SharedMemoryTransport(tmp_path).write(weights, version=1)
    raw = path.read_bytes()
    header_size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + header_size])
    assert (8 + header_size) % 8 == 0
    for name, tensor in weights:
        assert header[name]["data_offsets"][0] % tensor.element_size() == 0, name
    loaded = load_file(path)
    assert all(torch.equal(loaded[name], tensor) for name, tensor in weights)


def test_shared_memory_lays_the_file_out_again_when_a_shape_changes(tmp_path):
    transport = SharedMemoryTransport(tmp_path)
    transport.write([("a", torch.zeros(2)), ("b", torch.ones(3))], version=1)
    path = transport.write([("a", torch.full((4,), 7.0)), ("b", torch.ones(3))], version=2)
    loaded = load_file(path)
    assert loaded["a"].tolist() == [7.0] * 4 and loaded["b"].tolist() == [1.0] * 3
    transport.close()


def test_shared_memory_rejects_a_repeated_name_an_empty_push_and_an_unknown_dtype(tmp_path):
    transport = SharedMemoryTransport(tmp_path)
    with pytest.raises(ValueError, match="'a' was given twice"):
        transport.write([("a", torch.zeros(1)), ("a", torch.ones(1))], version=1)
    with pytest.raises(ValueError, match="no weights to push"):
        transport.write([], version=1)
    with pytest.raises(ValueError, match="'c' has dtype torch.complex64"):
        transport.write([("c", torch.zeros(1, dtype=torch.complex64))], version=1)


def test_shared_memory_without_room_raises_naming_the_size_and_the_fix(tmp_path, monkeypatch):
    def full_disk(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full_disk)
    transport = SharedMemoryTransport(tmp_path)
    with pytest.raises(OSError, match=r"no room for the weights \(4 MiB\).*--shm-size"):
        transport.write([("a", torch.zeros(2**20))], version=1)


def test_a_bfloat16_engine_gets_float32_weights_as_bfloat16_and_nothing_wider(tmp_path):
    loaded = {}

    def everywhere(method, path, version):  # what each vLLM worker does with the file
        loaded.clear()
        loaded.update(load_file(path))
        return finished(version)

    files = SharedMemoryTransport(tmp_path)
    weights = [("w", torch.tensor([1.0 + 2**-10, -3.0])), ("steps", torch.tensor([7]))]
    push_weights(weights, 1, everywhere, 30, files=files, engine_dtype="bfloat16")
    assert loaded["w"].dtype == torch.bfloat16 and loaded["w"].tolist() == [1.0, -3.0]
    assert loaded["steps"].dtype == torch.int64  # integers travel as they are
    push_weights([("h", torch.ones(2, dtype=torch.bfloat16))], 2, everywhere, 30, files=files,
                 engine_dtype="float32")  # fmt: skip
    assert loaded["h"].dtype == torch.bfloat16  # widening is exact: left to the engine
    push_weights([("x", torch.ones(2))], 3, everywhere, 30, files=files, engine_dtype="auto")
    assert loaded["x"].dtype == torch.float32  # an engine dtype not known here: as it is
    files.close()


class RecordingWorker(WeightSyncExtension):
    """vLLM's worker as the extension sees it: `reload_weights` is the worker's own (which sets
    vLLM's config around the reload), and the device is a GPU the file must not be loaded onto."""

    device = torch.device("meta")

    def __init__(self):
        self.received = []

    def reload_weights(self, weights_iterator, is_checkpoint_format):
        assert is_checkpoint_format
        for name, tensor in weights_iterator:  # vLLM copies each into its parameter, then drops it
            self.received.append((name, tensor.device.type, tensor.untyped_storage().nbytes()))


def test_a_file_push_streams_each_tensor_from_the_cpu_into_the_worker_s_reload(tmp_path):
    files = SharedMemoryTransport(tmp_path)
    weights = [("a", torch.ones(64, 64)), ("b", torch.zeros(8, dtype=torch.bfloat16))]
    path = files.write(weights, version=3)
    worker = RecordingWorker()
    assert worker.rlve_load_weights_file(str(path), 3) == 3
    # every tensor on the CPU in a storage of its own size, whatever the worker's device: the
    # file is read one tensor at a time, never as a whole next to the model
    assert sorted(worker.received) == [("a", "cpu", 64 * 64 * 4), ("b", "cpu", 8 * 2)]
    assert not hasattr(worker, "model_runner")  # the runner's reload would skip the worker's
    stream = tensors_of_file(str(path))
    assert next(stream)[0] in ("a", "b")  # lazily: a generator, one tensor per step
    files.close()


def test_separate_servers_get_their_common_dtype_and_none_when_they_differ():
    from rlve.inference.remote_engine import served_dtype

    assert served_dtype([["bfloat16", "bfloat16"], ["bfloat16"]]) == "bfloat16"
    assert served_dtype([["bfloat16"], ["float32"]]) is None  # each rounds a float32 push


def finished(value) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(value)
    return future


# ---- broadcast -------------------------------------------------------------------------------


class Worker:
    """A stand-in for one vLLM worker: joins as rank 1, then for each spec list put in `specs`
    receives one push and puts what arrived in `received` (an exception, if one was raised)."""

    def __init__(self, port: int, timeout_s: float = 30):
        self.specs: queue.Queue = queue.Queue()
        self.received: queue.Queue = queue.Queue()
        threading.Thread(target=self._work, args=(port, timeout_s), daemon=True).start()

    def _work(self, port: int, timeout_s: float) -> None:
        try:
            group = join_weight_group("127.0.0.1", port, 1, 2, "gloo", timeout_s)
            while True:
                self.received.put(dict(receive_weights(group, self.specs.get(), "cpu")))
        except Exception as exc:
            self.received.put(exc)


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} writes them) that listen on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_weight_group_store_listens_on_the_asked_address_only():
    broadcaster = WeightBroadcaster("gloo", world_size=2, timeout_s=30)
    Worker(broadcaster.store_port)
    broadcaster.connect()
    # 127.0.0.1 in /proc/net/tcp's little-endian hex; TCPStore alone listens on [::] (all zeros)
    assert listening_addresses(broadcaster.store_port) == {"0100007F"}
    broadcaster.close()


def test_broadcast_delivers_every_tensor_exactly_push_after_push():
    broadcaster = WeightBroadcaster("gloo", world_size=2, timeout_s=30)
    worker = Worker(broadcaster.store_port)
    broadcaster.connect()

    specs, tensors = broadcaster.plan(iter(tied_weights()))
    assert specs == [
        TensorSpec("model.embed_tokens.weight", "float32", (4, 3)),
        TensorSpec("model.norm.weight", "bfloat16", (3,)),
        TensorSpec("lm_head.weight", "float32", (4, 3)),
    ]
    worker.specs.put(specs)
    broadcaster.send(tensors)
    first = worker.received.get(timeout=30)

    made = []

    def doubled():
        for name, tensor in tied_weights():
            made.append(name)
            yield name, tensor * 2

    specs, tensors = broadcaster.plan(WeightStream(layout_of(tied_weights()), doubled()))
    assert made == []  # a stream's layout announces the push: no tensor is made before its turn
    worker.specs.put(specs)
    broadcaster.send(tensors)
    second = worker.received.get(timeout=30)
    broadcaster.close()

    for name, tensor in tied_weights():
        assert torch.equal(first[name], tensor)
        assert first[name].dtype == tensor.dtype
        assert torch.equal(second[name], tensor * 2)
    assert second["model.norm.weight"].tolist() == [1.0, -3.0, 4.0]


def test_a_broadcast_to_a_bfloat16_engine_sends_float32_weights_as_bfloat16():
    broadcaster = WeightBroadcaster("gloo", world_size=2, timeout_s=30)
    worker = Worker(broadcaster.store_port)
    broadcaster.connect()

    loading: concurrent.futures.Future = concurrent.futures.Future()

    def everywhere(method, specs, version):  # the RPC ends when the worker has every tensor
        worker.specs.put([TensorSpec.from_wire(row) for row in specs])
        threading.Thread(target=lambda: loading.set_result(worker.received.get())).start()
        return loading

    weights = [("w", torch.tensor([1.0 + 2**-10, -3.0])), ("steps", torch.tensor([7]))]
    push_weights(weights, 1, everywhere, 30, broadcaster=broadcaster, engine_dtype="bfloat16")
    received = loading.result(timeout=30)
    broadcaster.close()
    assert received["w"].dtype == torch.bfloat16 and received["w"].tolist() == [1.0, -3.0]
    assert received["steps"].dtype == torch.int64


def test_a_receiver_that_stopped_ends_the_push_with_that_reason():
    # the group's time-out is short only because tearing the group down waits for it
    broadcaster = WeightBroadcaster("gloo", world_size=2, timeout_s=3)
    worker = Worker(broadcaster.store_port, timeout_s=3)  # joins, never gets specs: never receives
    broadcaster.connect()
    _, tensors = broadcaster.plan([("w", torch.zeros(8_000_000))])  # 32 MB: more than a socket
    with pytest.raises(RuntimeError, match="stopped in the middle of a weight push"):
        broadcaster.send(tensors, given_up=lambda: True)
    assert worker.received.empty()


def test_spec_survives_the_wire_format_vllm_rpc_carries():
    spec = TensorSpec("model.layers.0.mlp.up_proj.weight", "bfloat16", (64, 32))
    assert spec.to_wire() == ["model.layers.0.mlp.up_proj.weight", "bfloat16", [64, 32]]
    assert TensorSpec.from_wire(spec.to_wire()) == spec


def test_a_push_that_changes_a_shape_is_refused_before_anything_is_sent():
    broadcaster = WeightBroadcaster("gloo", world_size=2, timeout_s=30)
    broadcaster._group = object()  # never used: the check comes before any broadcast
    broadcaster.plan([("w", torch.zeros(2, 2))])
    with pytest.raises(ValueError, match=r"announced TensorSpec\(name='w'.*shape=\(2, 2\)\)"):
        broadcaster.send([("w", torch.zeros(3, 2))])


def test_nccl_needs_the_trainer_weights_on_a_gpu():
    broadcaster = WeightBroadcaster("nccl", world_size=2, timeout_s=30)
    with pytest.raises(ValueError, match="weights are on cpu: set trainer.device=cuda:N"):
        broadcaster._on_wire_device(torch.zeros(2))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on CPU-only machines")
def test_nccl_without_cuda_says_what_to_use_instead():
    broadcaster = WeightBroadcaster("nccl", world_size=2, timeout_s=1)
    with pytest.raises(RuntimeError, match="use 'shared_memory' or 'gloo'"):
        broadcaster.connect()


def test_bad_transport_settings_name_the_value_and_the_choices():
    with pytest.raises(ValueError, match=r"must be one of \['nccl', 'gloo'\], got 'mpi'"):
        WeightBroadcaster("mpi", world_size=2, timeout_s=1)
    with pytest.raises(ValueError, match="needs the trainer and >= 1 worker, got 1"):
        WeightBroadcaster("gloo", world_size=1, timeout_s=1)
    with pytest.raises(ValueError, match=r"\['shared_memory', 'nccl', 'gloo'\], got 'ipc'"):
        InferenceConfig(weight_transport="ipc")


class _Work:
    """A transfer that completes `delay_s` after the receivers have returned (None: never)."""

    def __init__(self, receivers_done_at: float, delay_s: float | None):
        self.done_at = None if delay_s is None else receivers_done_at + delay_s

    def is_completed(self) -> bool:
        import time

        return self.done_at is not None and time.monotonic() >= self.done_at

    def wait(self) -> None:
        pass


def test_a_send_that_completes_just_after_its_receivers_returned_is_not_a_failure():
    import time

    from rlve.sync.broadcast import _finish

    now = time.monotonic()
    _finish(_Work(now, delay_s=0.05), given_up=lambda: True, grace_s=2.0)  # returns
    with pytest.raises(RuntimeError, match="receiving side stopped"):
        _finish(_Work(now, delay_s=None), given_up=lambda: True, grace_s=0.1)


def test_a_stream_is_checked_against_its_layout_as_it_passes():
    layout = layout_of(tied_weights())
    assert [name for name, _ in WeightStream(layout, tied_weights())] == [n for n, *_ in layout]
    with pytest.raises(ValueError, match=r"weight 1: the layout says model.norm.weight "
                                         r"torch.bfloat16 \[3\], the stream gave x"):  # fmt: skip
        list(WeightStream(layout, [tied_weights()[0], ("x", torch.zeros(3))]))
    with pytest.raises(ValueError, match="zip"):  # a tensor short
        list(WeightStream(layout, tied_weights()[:2]))
    cast = WeightStream(layout, tied_weights()).cast(lambda held: torch.float16)
    assert {dtype for _, dtype, _ in cast.layout} == {torch.float16}
    assert [t.dtype for _, t in cast] == [torch.float16] * 3
    assert [n for n, _ in WeightStream(layout, tied_weights()).without("lm_head.weight")] == [
        "model.embed_tokens.weight", "model.norm.weight"]  # fmt: skip


def test_a_shared_memory_push_holds_the_stream_s_tensors_one_at_a_time(tmp_path):
    alive, peak = [0], [0]

    def made(tensor):
        alive[0] += 1
        peak[0] = max(peak[0], alive[0])
        weakref.finalize(tensor, lambda: alive.__setitem__(0, alive[0] - 1))
        return tensor

    layout = tuple((f"w{i}", torch.float32, (256,)) for i in range(10))
    stream = WeightStream(
        layout, ((f"w{i}", made(torch.full((256,), float(i)))) for i in range(10))
    )
    files = SharedMemoryTransport(tmp_path)
    files.write(stream, version=1)
    assert load_file(files.path)["w7"].tolist() == [7.0] * 256
    assert peak[0] <= 2  # the tensor being copied, and the one before it until its name is reused
    files.close()
