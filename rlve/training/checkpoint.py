"""Atomic, resharding training checkpoints, and rng state capture.

A checkpoint is a directory `step_<n>`: `model_and_optimizer/` (the trained parameters, all of
them or only the LoRA adapter, and the optimizer state, written by every rank with
`torch.distributed.checkpoint`, keyed by parameter name, so a checkpoint saved by N ranks loads
on M ranks or in one process), `trainer_state.pt` (scheduler, rng states of every rank, step and
the caller's `extra`, written by rank 0), `meta.json` and `checksums.json` (size and sha256 of
every other file). It is written into a temporary sibling directory, fsynced and renamed into
place, so a crash mid-save leaves the previous checkpoints as they were; a checkpoint damaged
later (a truncated or corrupted file) fails its checksums, and `latest_intact_checkpoint` falls
back to the newest one that passes. A full disk stops the save with `DiskFullError`, the previous
checkpoints untouched.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import random
import re
import shutil
import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)

from rlve.distributed import World
from rlve.reliability.kill_points import kill_point
from rlve.training.data_only import DataOnlyReader, load_dcp, load_state_file

log = logging.getLogger(__name__)

MODEL_AND_OPTIMIZER = "model_and_optimizer"
STATE_FILE = "trainer_state.pt"
META_FILE = "meta.json"
CHECKSUM_FILE = "checksums.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")


# ---------------------------------------------------------------------------------------------
# Rng state
# ---------------------------------------------------------------------------------------------


def capture_rng_state() -> dict[str, Any]:
    """python, numpy and torch (cpu, and cuda when present) generator states."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------------------------------
# Directories
# ---------------------------------------------------------------------------------------------


def step_dirname(step: int) -> str:
    return f"step_{step:08d}"


def list_checkpoints(root: str) -> list[str]:
    """Complete checkpoints under root, oldest step first (temporary dirs are not listed)."""
    if not os.path.isdir(root):
        return []
    found = [(int(m.group(1)), name) for name in os.listdir(root) if (m := _STEP_DIR.match(name))]
    return [os.path.join(root, name) for _, name in sorted(found)]


def latest_checkpoint(root: str) -> str | None:
    checkpoints = list_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def latest_intact_checkpoint(root: str) -> str | None:
    """The newest checkpoint under root that passes its checksums; each damaged newer one is
    named in a warning. None when there is none at all.

    Raises:
        CheckpointDamaged: there are checkpoints, and every one of them is damaged.
    """
    checkpoints = list_checkpoints(root)
    problems = []
    for path in reversed(checkpoints):
        problem = checkpoint_damage(path)
        if problem is None:
            for damaged in problems:
                log.warning("checkpoint %s is damaged (%s); falling back to %s", *damaged, path)
            return path
        problems.append((path, problem))
    if problems:
        listing = "; ".join(f"{path}: {problem}" for path, problem in problems)
        raise CheckpointDamaged(f"every checkpoint under {root} is damaged: {listing}")
    return None


def intact_checkpoint_for_errors(root: str) -> str | None:
    """`latest_intact_checkpoint` for error messages: None instead of raising, so the error that
    is being reported is not masked."""
    try:
        return latest_intact_checkpoint(root)
    except CheckpointDamaged:
        return None


class CheckpointDamaged(RuntimeError):
    """No checkpoint under a directory passes its checksums."""


class DiskFullError(OSError):
    """The disk filled up while a checkpoint was written; the previous ones are intact."""


def checkpoint_damage(path: str) -> str | None:
    """What is wrong with the checkpoint at `path` (a missing, resized or changed file), or None
    when every file matches `checksums.json`."""
    try:
        with open(os.path.join(path, CHECKSUM_FILE)) as handle:
            expected = json.load(handle)
    except (OSError, ValueError) as exc:
        return f"{CHECKSUM_FILE} unreadable: {exc}"
    for name, want in sorted(expected.items()):
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            return f"{name} is missing"
        size = os.path.getsize(file)
        if size != want["bytes"]:
            return f"{name} has {size} bytes, {want['bytes']} were written"
        if _sha256(file) != want["sha256"]:
            return f"{name} does not match its sha256"
    return None


def _write_checksums(directory: str) -> None:
    sums = {}
    for parent, _, files in os.walk(directory):
        for name in sorted(files):
            file = os.path.join(parent, name)
            sums[os.path.relpath(file, directory)] = {
                "bytes": os.path.getsize(file),
                "sha256": _sha256(file),
            }
    with open(os.path.join(directory, CHECKSUM_FILE), "w") as handle:
        json.dump(sums, handle, indent=1, sort_keys=True)


def _sha256(file: str) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _disk_full(exc: BaseException | None) -> bool:
    """Whether `exc` or what caused it (DCP wraps each rank's error) is ENOSPC or EDQUOT."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        failures = getattr(exc, "failures", None)  # DCP's: rank -> (exception, traceback)
        if isinstance(failures, dict) and any(_disk_full(f[0]) for f in failures.values()):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: str) -> None:
    for parent, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(parent, name), "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_dir(parent)


def save_checkpoint(
    root: str,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep: int,
    world: World = World(),
) -> str:
    """Writes `root/step_<step>` atomically (every rank calls it) and deletes all but the newest
    `keep` checkpoints. `state` is rank 0's (torch.save). Returns the checkpoint's path."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    final = os.path.join(root, step_dirname(step))
    staging = os.path.join(root, f".{step_dirname(step)}.partial")
    if world.is_main:
        os.makedirs(root, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)  # left by a crash in an earlier save
        os.makedirs(staging)
    world.barrier()
    try:
        model_state, optimizer_state = _states(model, optimizer)
        with _one_process_is_intended():
            dcp.save({"model": model_state, "optimizer": optimizer_state},
                     checkpoint_id=os.path.join(staging, MODEL_AND_OPTIMIZER))  # fmt: skip
        world.barrier()
        kill_point("checkpoint", step)
        if world.is_main:
            torch.save(state, os.path.join(staging, STATE_FILE))
            with open(os.path.join(staging, META_FILE), "w") as meta:
                json.dump({"step": step, "world_size": world.size}, meta)
            _write_checksums(staging)
            _fsync_tree(staging)
            if os.path.isdir(final):  # saving the same step again: the new one replaces it
                shutil.rmtree(final)
            os.rename(staging, final)
            _fsync_dir(root)
            for old in list_checkpoints(root)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    except BaseException as exc:  # DCP's CheckpointException is a BaseException
        if not _disk_full(exc):
            raise
        previous = intact_checkpoint_for_errors(root)
        kept = f"the previous checkpoint {previous} is intact" if previous else "none was before"
        raise DiskFullError(
            errno.ENOSPC,
            f"the disk filled up while checkpoint step {step} was "
            f"written under {root}; {kept}: free space, then resume=true",
        ) from exc
    finally:
        if world.is_main:
            shutil.rmtree(staging, ignore_errors=True)
    world.barrier()
    return final


def load_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Loads a checkpoint's parameters and optimizer state into `model` and `optimizer` (each
    rank its own shards; any world size) and returns its trainer state.

    Raises:
        FileNotFoundError: `path` is not a checkpoint.
        ValueError: its parameters are not this model's trained ones (full vs LoRA, another model).
        UnsafeCheckpointError: one of its pickles names something other than data.
    """
    state = load_trainer_state(path)
    stored = DataOnlyReader(os.path.join(path, MODEL_AND_OPTIMIZER)).read_metadata()
    stored_names = {key.removeprefix("model.") for key in stored.state_dict_metadata
                    if key.startswith("model.")}  # fmt: skip
    model_state, optimizer_state = _states(model, optimizer)
    if stored_names != set(model_state):
        missing, unexpected = set(model_state) - stored_names, stored_names - set(model_state)
        raise ValueError(
            f"checkpoint {path} does not match this model (full vs LoRA, or another model?): "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}"
        )
    loaded = {"model": model_state, "optimizer": optimizer_state}
    with _one_process_is_intended():
        load_dcp(loaded, os.path.join(path, MODEL_AND_OPTIMIZER))
    set_state_dict(model, optimizer, model_state_dict=loaded["model"],
                   optim_state_dict=loaded["optimizer"], options=_LOAD_OPTIONS)  # fmt: skip
    return state


def load_trainer_state(path: str) -> dict[str, Any]:
    """The trainer state (step, scheduler, rng, extra) of a checkpoint, without its tensors."""
    for name in (MODEL_AND_OPTIMIZER, STATE_FILE):
        if not os.path.exists(os.path.join(path, name)):
            raise FileNotFoundError(f"{path} is not a checkpoint: {name} is missing")
    return load_state_file(os.path.join(path, STATE_FILE))  # on the CPU: resumes on any device


_OPTIONS = StateDictOptions(ignore_frozen_params=True)
"""trained parameters only: a LoRA checkpoint holds the adapters, the base comes from the model"""
_LOAD_OPTIONS = StateDictOptions(ignore_frozen_params=True, strict=False)
"""the frozen base is not in the checkpoint; the trained names are checked before loading"""


@contextmanager
def _one_process_is_intended():
    """Without a process group DCP reads and writes as one process, and warns that it assumes so."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _states(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Parameter name -> tensor (sharded or not) for the trained parameters and their optimizer
    state; a fresh optimizer gets zero-initialised state to load into."""
    return get_state_dict(model, optimizer, options=_OPTIONS)
