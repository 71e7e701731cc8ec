"""Loading a model and its tokenizer by name ("tiny", a local directory, a hub id).

"tiny" resolves to the embedded default (`rlve.models.tiny`) and "smollm2-135m" (or
"smollm2_135m", the Hydra group's spelling) to SmolLM2 from its GGUF package
(`rlve.models.smollm2`), each built on first use; a local directory is used as is; any other name
goes to the hub, for machines that can reach one. A name that is none of these fails within
seconds, listing the built-in names, instead of retrying an unreachable hub.
"""

from __future__ import annotations

import contextlib
import os

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from rlve.models.smollm2 import SMOLLM2_NAME, smollm2_path
from rlve.models.tiny import TINY_MARKER_FILE, TINY_MODEL_NAME, tiny_model_path

BUILT_IN_MODELS = {TINY_MODEL_NAME: tiny_model_path, SMOLLM2_NAME: smollm2_path}
"""models built on this machine, no download: name -> the function that builds or finds them"""

HUB_TIMEOUT_S = 5.0
"""how long to wait for the hub to say whether a model exists"""


def built_in_name(name: str) -> str | None:
    """The built-in model `name` means, in any case and with "_" for "-", or None."""
    normal = name.strip().lower().replace("_", "-")
    return normal if normal in BUILT_IN_MODELS else None


def resolve_model_path(name: str) -> str:
    """A model built here ("tiny", "smollm2-135m") -> its directory in the model cache (built on
    first use); a local directory -> itself; a hub id that the hub has, or that is cached -> the
    id as is.

    Raises:
        FileNotFoundError: `name` is none of these (the message lists the built-in names).
    """
    built_in = built_in_name(name)
    if built_in is not None:
        return BUILT_IN_MODELS[built_in]()
    local = os.path.expanduser(name)
    if os.path.isdir(local):
        return local
    _check_exists(name, local)
    _check_on_hub(name)
    return name


def _check_on_hub(name: str) -> None:
    """Return when the hub cache has `name` or the hub answers that it exists; raise at once
    when the hub says it does not, or cannot be reached within HUB_TIMEOUT_S."""
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return
    except HFValidationError as error:  # not even shaped like a hub id
        raise FileNotFoundError(_unknown_model(name, f"not a hub id ({error})")) from None
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise FileNotFoundError(_unknown_model(name, "HF_HUB_OFFLINE is set and it is not cached"))
    try:
        HfApi().model_info(name, timeout=HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        raise FileNotFoundError(_unknown_model(name, "the hub has no such model")) from None
    except Exception as error:  # no network, a proxy, a time-out: the hub is out of reach
        reason = f"the hub is not reachable ({type(error).__name__})"
        raise FileNotFoundError(_unknown_model(name, reason)) from None


def _unknown_model(name: str, reason: str) -> str:
    names = ", ".join(repr(n) for n in BUILT_IN_MODELS)
    return (
        f"model {name!r} is not a directory, not a built-in model ({names}, built here without "
        f"a download), and not usable from the hub: {reason}"
    )


def _looks_local(name: str) -> bool:
    # hub ids are "org/model"; anything rooted or relative-looking must be a directory on disk
    return name.startswith(("/", ".", "~")) or name.endswith("/")


def _check_exists(name: str, path: str) -> None:
    if _looks_local(name) and not os.path.isdir(path):
        raise FileNotFoundError(
            f"model directory {path!r} does not exist; name an existing directory, a hub id, or "
            f"a built-in model ({', '.join(map(repr, BUILT_IN_MODELS))}, built here, no download)"
        )


def _load_error(what: str, name: str, path: str, error: Exception) -> OSError:
    return OSError(
        f"could not load the {what} from {path!r} (model name {name!r}): {error}\n"
        f"Name an existing model directory, a hub id reachable from this machine, or a built-in "
        f"model ({', '.join(map(repr, BUILT_IN_MODELS))}, built here, no download)."
    )


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """AutoTokenizer for a model name ("tiny", a directory, a hub id)."""
    path = resolve_model_path(name)
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
    try:
        with _no_progress_bar():  # a bar per load, one line per update in a log file
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise _load_error("model", name, path, error) from error
    return model.to(device)


@contextlib.contextmanager
def _no_progress_bar():
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
