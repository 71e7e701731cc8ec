"""Why vLLM did not start, in words a user can act on (VLLMEngine's start errors)."""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

from rlve.config import InferenceConfig

START_LOG_LINES = 15
"""lines of vllm.log that a failed start shows"""


def start_hint(
    model_path: str,
    settings: InferenceConfig,
    exc: Exception,
    log_file: Path | None = None,
    lora: bool = False,
) -> str:
    """What a failed vLLM start says: the error, the likely cause and what to change, the end of
    vLLM's log; with `lora` (an engine started for sync.lora=adapter), the merged push too."""
    text = f"{type(exc).__name__}: {exc}"
    if not os.path.exists(model_path) and "/" not in model_path.strip("/"):
        advice = f"model {model_path!r} is neither a local directory nor a hub id"
    elif not os.path.exists(model_path) and model_path.startswith(("/", ".", "~")):
        advice = f"model path {model_path!r} does not exist ('tiny' is the built-in default)"
    elif "memory" in text.lower() or "kv cache" in text.lower():
        advice = (
            "too little memory for weights + KV cache: lower max_model_len or max_num_seqs, or "
            f"raise cpu_kv_cache_gib (now {settings.cpu_kv_cache_gib}) / gpu_memory_utilization "
            f"(now {settings.gpu_memory_utilization})"
        )
    else:
        cache = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
        where = f"the end of {log_file}" if log_file is not None else "the error above"
        advice = (
            f"see {where}; if it is a C++ compile error of torch's inductor ('at::vec' has "
            "not been declared), a process killed while vLLM compiled left a broken cache: "
            f"delete {cache} and start again"
        )
    tail = ""
    if log_file is not None and log_file.exists():
        lines = log_file.read_text(errors="replace").splitlines()[-START_LOG_LINES:]
        tail = f"\nThe last lines of {log_file}:\n" + "\n".join(lines)
    if lora:
        tail += ("\nThe engine was started with LoRA for sync.lora=adapter; where vLLM has no LoRA "
                 "support on this device, sync.lora=merged pushes every weight")  # fmt: skip
    return f"vLLM failed to start for {model_path!r}: {advice}. ({text}){tail}"
