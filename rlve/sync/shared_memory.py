"""Moving new weights from the trainer into the inference engine.

The shared-memory transport writes the weights as one safetensors file under /dev/shm (RAM, not
disk) and the vLLM worker reloads them in place from there; it works for CPU and GPU engines on
one machine. Every tensor the engine serves must be sent: with tied embeddings that includes
`lm_head.weight`, or the output head stays stale: vLLM keeps a copy of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors.torch import save_file

NamedTensors = Iterable[tuple[str, torch.Tensor]]


def _default_directory() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / f"rlve-weights-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class SharedMemoryTransport:
    """Writes versioned safetensors files the inference worker loads; keeps only the latest."""

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory) if directory else _default_directory()
        self.directory.mkdir(parents=True, exist_ok=True)

    def write(self, named_tensors: NamedTensors, version: int) -> Path:
        """Write the tensors for `version` atomically and return the file's path."""
        tensors: dict[str, torch.Tensor] = {}
        seen_storage: set[int] = set()
        for name, tensor in named_tensors:
            tensor = tensor.detach().to("cpu").contiguous()
            pointer = tensor.untyped_storage().data_ptr()
            if pointer in seen_storage:  # tied weights share storage; safetensors wants copies
                tensor = tensor.clone()
            seen_storage.add(tensor.untyped_storage().data_ptr())
            if name in tensors:
                raise ValueError(f"weight {name!r} was given twice")
            tensors[name] = tensor
        if not tensors:
            raise ValueError("no weights to push")
        path = self.directory / f"weights-v{version}.safetensors"
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp), metadata={"version": str(version)})
        tmp.replace(path)
        return path

    def done(self, path: Path) -> None:
        """The engine has loaded `path`: free the RAM it holds."""
        path.unlink(missing_ok=True)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
