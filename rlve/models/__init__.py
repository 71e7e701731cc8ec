"""Models by name: "tiny" (the embedded default, built locally), a local directory or a hub id.

`loading` resolves names and loads tokenizers and causal LMs, `lora` wraps them with checked
LoRA adapters, `precision` says what `dtype: auto` is on this hardware, `tiny` builds the
embedded model, `tiny_tokenizer` its tokenizer and chat template. May import `rlve.envs` (the
tokenizer's corpus plays tic-tac-toe games) and nothing else of rlve.
"""

from rlve.models.cache import model_cache_dir
from rlve.models.loading import load_causal_lm, load_tokenizer, resolve_model_path
from rlve.models.lora import LoraCoverage, with_lora
from rlve.models.tiny import (
    TINY_MARKER_FILE,
    TinyModelConfig,
    build_tiny_model,
    tiny_model_dirname,
    tiny_model_path,
)

__all__ = [
    "TINY_MARKER_FILE",
    "LoraCoverage",
    "TinyModelConfig",
    "build_tiny_model",
    "load_causal_lm",
    "load_tokenizer",
    "resolve_model_path",
    "model_cache_dir",
    "tiny_model_dirname",
    "tiny_model_path",
    "with_lora",
]
