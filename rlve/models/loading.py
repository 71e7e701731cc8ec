"""Loading a model and its tokenizer by name ("tiny", a local directory, a hub id).

"tiny" resolves to the embedded default (`rlve.models.tiny`) and "smollm2-135m" to SmolLM2 from
its GGUF package (`rlve.models.smollm2`), each built on first use; a local directory is used as
is; any other name goes to the hub, for machines that can reach one.
"""

from __future__ import annotations

import os

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from rlve.models.smollm2 import SMOLLM2_NAME, smollm2_path
from rlve.models.tiny import TINY_MARKER_FILE, TINY_MODEL_NAME, tiny_model_path


def resolve_model_path(name: str) -> str:
    """A model built here ("tiny", "smollm2-135m") -> its directory in the model cache (built on
    first use); a local directory -> itself; any other name (a hub id) as is."""
    if name == TINY_MODEL_NAME:
        return tiny_model_path()
    if name == SMOLLM2_NAME:
        return smollm2_path()
    local = os.path.expanduser(name)
    if os.path.isdir(local):
        return local
    return name  # a hub id, for machines that can reach a hub


def _looks_local(name: str) -> bool:
    # hub ids are "org/model"; anything rooted or relative-looking must be a directory on disk
    return name.startswith(("/", ".", "~")) or name.endswith("/")


def _check_exists(name: str, path: str) -> None:
    if _looks_local(name) and not os.path.isdir(path):
        raise FileNotFoundError(
            f"model directory {path!r} does not exist; name an existing directory, a hub id, "
            f"or {TINY_MODEL_NAME!r} (the built-in default model, built locally, no download)"
        )


def _load_error(what: str, name: str, path: str, error: Exception) -> OSError:
    return OSError(
        f"could not load the {what} from {path!r} (model name {name!r}): {error}\n"
        f"Name an existing model directory, a hub id reachable from this machine, or "
        f"{TINY_MODEL_NAME!r} (the built-in default model, built locally, no download)."
    )


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """AutoTokenizer for a model name ("tiny", a directory, a hub id)."""
    path = resolve_model_path(name)
    _check_exists(name, path)
    try:
        if os.path.isfile(os.path.join(path, TINY_MARKER_FILE)):
            # AutoTokenizer would rebuild a model_type "qwen2" tokenizer as Qwen2Tokenizer,
            # adding NFC normalisation; the file as saved round-trips any text exactly
            return PreTrainedTokenizerFast.from_pretrained(path)
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise _load_error("tokenizer", name, path, error) from error


def load_causal_lm(name: str, dtype: str = "float32", device: str = "cpu") -> PreTrainedModel:
    """AutoModelForCausalLM for a model name, in dtype ("float32", "bfloat16", ...) on device."""
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"dtype must name a torch dtype such as 'float32', got {dtype!r}")
    path = resolve_model_path(name)
    _check_exists(name, path)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise _load_error("model", name, path, error) from error
    return model.to(device)
