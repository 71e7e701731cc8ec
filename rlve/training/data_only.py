"""Reading a checkpoint as data: nothing in it can run code.

A checkpoint is pickles: `trainer_state.pt` (torch.save), DCP's `.metadata` and the small
non-tensor entries of the optimizer's state (DCP's "bytes" items). A plain unpickler calls
whatever a pickle names, so a run folder from shared storage or from someone else could run
code on `resume=true`, and `checksums.json` (rewritten with it) would not notice. Here each
pickle is read by an unpickler that rebuilds only an allow-list: builtins, tensors, numpy arrays
(rng states), rlve's rollout records (the batch an async checkpoint keeps) and DCP's metadata
classes. Anything else is refused with `UnsafeCheckpointError`, naming the file.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import _StorageInfo


class UnsafeCheckpointError(ValueError):
    """A checkpoint file holds something other than data: it was not written by rlve."""


def _state_classes() -> list:
    """What a trainer state holds besides builtins and tensors. Rebuilt field by field (no
    constructor or method of theirs runs)."""
    from numpy._core.multiarray import _reconstruct

    from rlve.inference.engine import PromptTokenCounts
    from rlve.rollout.collector import StepBatch
    from rlve.types import Fault, RolloutGroup, SideSequence, Trajectory

    numpy_arrays = [_reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    return [*numpy_arrays, StepBatch, RolloutGroup, Trajectory, SideSequence, Fault,
            PromptTokenCounts]  # fmt: skip


def load_state_file(path: str | Path) -> Any:
    """`torch.load` of a file rlve's trainer wrote with `torch.save`, as data only."""
    try:
        with torch.serialization.safe_globals(_state_classes()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeCheckpointError(
            f"{path} holds something other than data, so it was not loaded (it could run code): "
            f"{_reason(exc)} rlve never writes such a file; was it replaced? Resume from a "
            "checkpoint you trust."
        ) from exc


def _reason(exc: pickle.UnpicklingError) -> str:
    """torch's refusal without its advice on loading the file anyway."""
    advice = ("Weights only load failed", "Check the documentation")
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return " ".join(line for line in lines if not line.startswith(advice)) or repr(exc)


_METADATA_CLASSES = {
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
}
"""(module, name) DCP's `.metadata` may name besides torch dtypes and its metadata classes"""


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = getattr(torch, name, None) if module == "torch" else None
        if isinstance(found, torch.dtype):
            return found
        if (module, name) in _METADATA_CLASSES or (
            module == dcp_metadata.__name__ and isinstance(getattr(dcp_metadata, name, None), type)
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not DCP metadata")


class DataOnlyReader(FileSystemReader):
    """DCP's file reader, its `.metadata` read by an allow-list unpickler."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> dcp_metadata.Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as stream:
            try:
                metadata = _MetadataUnpickler(stream).load()
            except pickle.UnpicklingError as exc:
                raise UnsafeCheckpointError(
                    f"{path} holds something other than DCP metadata ({exc}), so it was not "
                    "loaded (it could run code); resume from a checkpoint you trust"
                ) from exc
        if not isinstance(metadata, dcp_metadata.Metadata) or not all(
            isinstance(info, _StorageInfo) for info in (metadata.storage_data or {}).values()
        ):
            raise UnsafeCheckpointError(f"{path} is not DCP metadata")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = dcp_metadata.StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class DataOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, its non-tensor entries read with `weights_only=True`."""

    def load_bytes(self, read_item, value) -> None:
        try:
            loaded = torch.load(value, weights_only=True)
        except pickle.UnpicklingError as exc:
            raise UnsafeCheckpointError(
                f"its entry {read_item.dest_index.fqn} holds something other than data, so it "
                f"was not loaded (it could run code): {_reason(exc)}"
            ) from exc
        fqn = read_item.dest_index.fqn  # then as DefaultLoadPlanner.load_bytes places it
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], loaded)
        else:
            self.state_dict[fqn] = loaded


def load_dcp(state_dict: dict, directory: str) -> None:
    """`dcp.load` of `directory` into `state_dict`, as data only (every rank calls it)."""
    try:
        dcp.load(
            state_dict, storage_reader=DataOnlyReader(directory), planner=DataOnlyLoadPlanner()
        )
    except CheckpointException as exc:  # DCP wraps each rank's error
        unsafe = [error for error, _ in exc.failures.values()
                  if isinstance(error, UnsafeCheckpointError)]  # fmt: skip
        if unsafe:
            raise UnsafeCheckpointError(f"{directory}: {unsafe[0]}") from exc
        raise
