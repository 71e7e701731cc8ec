"""`dtype: auto`: bfloat16 where the hardware computes it natively, float32 elsewhere.

Native means matrix products in bf16 at full speed: a CUDA GPU of compute capability 8.0 or
newer (Ampere on), or a CPU with AVX512-BF16 or AMX (x86) or BF16 (aarch64). On these, SmolLM2's
forward and backward under bf16 autocast run 1.7x faster than in float32, and vLLM samples 2.1x
faster (docs/benchmarks.md). Without them bf16 is emulated and slower than float32.

The environment variable RLVE_AUTO_DTYPE (float32 or bfloat16) says what `auto` means
everywhere in a process and its children, whatever the hardware; the test suite sets float32.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

AUTO = "auto"
RESOLVED = ("float32", "bfloat16")
AUTO_ENV = "RLVE_AUTO_DTYPE"
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""/proc/cpuinfo flags of native bf16 matrix products: x86's AVX512-BF16 and AMX-BF16, aarch64's
BF16 (its "Features" line)"""


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of a /proc/cpuinfo text (x86 "flags" lines, aarch64 "Features")."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def cpu_has_native_bf16(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU multiplies bf16 matrices natively (False where /proc/cpuinfo is absent)."""
    try:
        text = cpuinfo_path.read_text(errors="replace")
    except OSError:
        return False
    return bool(cpu_flags(text) & CPU_BF16_FLAGS)


def cuda_has_native_bf16(device: str) -> bool:
    """Whether the CUDA device (e.g. "cuda", "cuda:1") has bf16 tensor cores (capability >= 8.0)."""
    import torch

    index = torch.device(device).index
    major, _ = torch.cuda.get_device_capability(index if index is not None else 0)
    return major >= 8


def auto_dtype(native_bf16: Callable[[], bool]) -> str:
    """What `auto` means: RLVE_AUTO_DTYPE when set, else bfloat16 if `native_bf16()` says the
    device computes it natively (not asked when the variable is set)."""
    forced = os.environ.get(AUTO_ENV)
    if forced:
        if forced not in RESOLVED:
            raise ValueError(f"{AUTO_ENV} must be one of {RESOLVED}, got {forced!r}")
        return forced
    return "bfloat16" if native_bf16() else "float32"


def resolve_dtype(dtype: str, device: str) -> str:
    """`dtype` itself, or for "auto" the dtype of torch `device` ("cpu", "cuda:0", ...)."""
    if dtype != AUTO:
        return dtype
    if device.startswith("cuda"):
        resolved = auto_dtype(lambda: cuda_has_native_bf16(device))
    else:
        resolved = auto_dtype(cpu_has_native_bf16)
    logger.info("dtype auto on %s: %s", device, resolved)
    return resolved


def cpu_kind(flags: set[str], vector_isa: str) -> str:
    """What kind of CPU the timings of rlve's docs are grouped by: "AMX", "AVX512-BF16",
    "AVX512", "AVX2" or "other", from /proc/cpuinfo's `flags` and the vector ISA torch's kernels
    use (`torch.backends.cpu.get_cpu_capability()`: "AVX2" where ATEN_CPU_CAPABILITY holds an
    AVX512 CPU to AVX2, as benchmarks/avx2_like.sh does).
    Example: a Zen 4's flags, "AVX512" -> "AVX512-BF16"; the same flags, "AVX2" -> "AVX2"."""
    if vector_isa.startswith("AVX512"):
        if "amx_bf16" in flags:
            return "AMX"
        return "AVX512-BF16" if "avx512_bf16" in flags else "AVX512"
    return "AVX2" if vector_isa == "AVX2" else "other"


def this_cpu_kind(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> str:
    """`cpu_kind` of this machine ("other" where /proc/cpuinfo is absent)."""
    import torch

    try:
        flags = cpu_flags(cpuinfo_path.read_text(errors="replace"))
    except OSError:
        return "other"
    return cpu_kind(flags, torch.backends.cpu.get_cpu_capability())
