"""Atomic training checkpoints, rng state capture, merged weights for inference, and export.

A checkpoint is a directory `step_<n>`: `weights.safetensors` (the trained parameters: all of
them, or only the LoRA adapter), `trainer_state.pt` (optimizer, scheduler, rng states, step and
the caller's `extra`) and `meta.json`. It is written into a temporary sibling directory, fsynced
and renamed into place, so a crash mid-save leaves the previous checkpoints as they were.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from rlve.models import TINY_MARKER_FILE, resolve_model_path

WEIGHTS_FILE = "weights.safetensors"
STATE_FILE = "trainer_state.pt"
META_FILE = "meta.json"
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


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: str) -> None:
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as handle:
            os.fsync(handle.fileno())
    _fsync_dir(path)


def save_checkpoint(
    root: str, step: int, weights: dict[str, Tensor], state: dict[str, Any], keep: int
) -> str:
    """Writes `root/step_<step>` atomically and deletes all but the newest `keep` checkpoints.

    `weights` go to safetensors (cloned to contiguous cpu tensors: tied weights share storage),
    `state` through torch.save. Returns the checkpoint's path.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, step_dirname(step))
    staging = tempfile.mkdtemp(prefix=f".{step_dirname(step)}.", dir=root)
    try:
        cpu_weights = {
            name: t.detach().to("cpu").contiguous().clone() for name, t in weights.items()
        }
        save_file(cpu_weights, os.path.join(staging, WEIGHTS_FILE))
        torch.save(state, os.path.join(staging, STATE_FILE))
        with open(os.path.join(staging, META_FILE), "w") as meta:
            json.dump({"step": step, "num_tensors": len(cpu_weights)}, meta)
        _fsync_tree(staging)
        if os.path.isdir(final):  # saving the same step again: the new one replaces it
            shutil.rmtree(final)
        os.rename(staging, final)
        _fsync_dir(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(path: str) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """(weights, state) of a checkpoint written by `save_checkpoint`."""
    for name in (WEIGHTS_FILE, STATE_FILE):
        if not os.path.isfile(os.path.join(path, name)):
            raise FileNotFoundError(f"{path} is not a checkpoint: {name} is missing")
    weights = load_file(os.path.join(path, WEIGHTS_FILE))
    # our own file: it holds rng states and the caller's extra dict, which need pickle; loaded
    # on the CPU so a GPU run resumes on any device (the optimizer moves its state to the params)
    state = torch.load(os.path.join(path, STATE_FILE), map_location="cpu", weights_only=False)
    return weights, state


# ---------------------------------------------------------------------------------------------
# Weights in the base model's names, LoRA merged
# ---------------------------------------------------------------------------------------------


def _lora_deltas(causal_lm: nn.Module) -> dict[str, Tensor]:
    """`<module>.weight` -> the merged delta of every active LoRA adapter on that module."""
    from peft.tuners.lora import LoraLayer

    deltas: dict[str, Tensor] = {}
    for name, module in causal_lm.named_modules():
        if isinstance(module, LoraLayer) and not module.merged and not module.disable_adapters:
            active = [a for a in module.active_adapters if a in module.lora_A]
            if active:
                deltas[f"{name}.weight"] = sum(module.get_delta_weight(a) for a in active)
    return deltas


@torch.no_grad()
def merged_named_weights(causal_lm: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """(name, tensor) for every tensor of the base model's state dict, in its HF names.

    For a peft-wrapped model pass `peft_model.get_base_model()`: each LoRA layer's
    `base_layer.weight` comes out as `weight` plus the adapter's delta (B A alpha / r, computed
    here, so the trained weights are never merged and unmerged in place), adapter tensors are
    left out. `lm_head.weight` is yielded even when tied to the embedding, because vLLM keeps
    its own copy of the output head.
    """
    deltas = _lora_deltas(causal_lm)
    names = set()
    for name, tensor in causal_lm.state_dict().items():
        if "lora_" in name:
            continue
        name = name.replace(".base_layer.", ".")
        names.add(name)
        delta = deltas.get(name)
        yield name, tensor if delta is None else tensor + delta.to(tensor.dtype)
    head = causal_lm.get_output_embeddings()
    if "lm_head.weight" not in names and head is not None:
        yield "lm_head.weight", head.weight.detach()


def export_model(
    path: str,
    weights: Iterator[tuple[str, Tensor]],
    causal_lm: nn.Module,
    tokenizer,
    model_name: str,
) -> str:
    """Write an HF model directory (config, generation config, model.safetensors, tokenizer) of
    `weights` (HF names, LoRA merged) at `path`; the tiny model's tokenizer marker goes too."""
    os.makedirs(path, exist_ok=True)
    tensors = dict(weights)
    if getattr(causal_lm.config, "tie_word_embeddings", False):
        tensors.pop("lm_head.weight", None)  # the loader ties it back to the embedding
    tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in tensors.items()}
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    causal_lm.config.save_pretrained(path)
    if getattr(causal_lm, "generation_config", None) is not None:
        causal_lm.generation_config.save_pretrained(path)
    tokenizer.save_pretrained(path)
    marker = os.path.join(resolve_model_path(model_name), TINY_MARKER_FILE)
    if os.path.isfile(marker):  # keeps the tiny tokenizer loading exactly as saved
        shutil.copy(marker, path)
    return path
