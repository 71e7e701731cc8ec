"""The model cache: models rlve builds itself (the tiny model, SmolLM2 from its GGUF) are
written once under $RLVE_CACHE/models (default ~/.cache/rlve/models) and loaded from there."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable


def model_cache_dir() -> str:
    """Where built models live: $RLVE_CACHE/models, else ~/.cache/rlve/models."""
    root = os.environ.get("RLVE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rlve")
    return os.path.join(root, "models")


def is_built(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "model.safetensors"))


def build_once(final_path: str, build: Callable[[str], object]) -> str:
    """`final_path`, after `build(folder)` wrote the model there if it was not built yet.

    The model is built in a temporary sibling folder and renamed into place, and a rename onto a
    non-empty folder fails, so processes racing here each build, one wins, and nobody ever sees
    a half-written model.
    """
    if is_built(final_path):
        return final_path
    cache_dir = os.path.dirname(final_path)
    os.makedirs(cache_dir, exist_ok=True)
    build_path = tempfile.mkdtemp(prefix=f".{os.path.basename(final_path)}.", dir=cache_dir)
    try:
        os.chmod(build_path, 0o755)  # mkdtemp's 0o700 would hide a shared cache from others
        build(build_path)
        os.replace(build_path, final_path)
    except OSError:
        if not os.path.isdir(final_path):
            raise  # a real failure, not a lost race
    finally:
        shutil.rmtree(build_path, ignore_errors=True)  # gone already when the rename succeeded
    if not is_built(final_path):
        raise RuntimeError(f"{final_path} exists but holds no model.safetensors; delete it")
    return final_path
