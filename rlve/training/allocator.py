"""Keeping freed memory in the process, so a CPU RL step does not fault its tensors in again.

glibc's malloc serves an allocation above its mmap threshold (32 MB at most) with a fresh mmap
and unmaps it on free. An RL step allocates the same large tensors every time (activations, a
chunk's [tokens, vocabulary] logits, gradients), so each step the kernel maps and zeroes them
again, page by page: up to a fifth of the step's CPU time in the kernel on two cores. With mmap
off and a high trim threshold, freed blocks stay on malloc's heap and the next step reuses them;
the resident size stays near the step's peak instead of falling between steps. Transparent huge
pages for torch's tensors (THP_MEM_ALLOC_ENABLE=1) were measured instead and made the step
slower (docs/benchmarks.md "Allocator").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4
"""mallopt's parameter numbers (glibc's malloc.h)"""
TRIM_THRESHOLD = 2**31 - 1
"""free memory at the heap's top returned to the kernel only past this (mallopt takes an int)"""
TOP_PAD = 64 * 2**20
"""extra bytes the heap grows by, so growing costs fewer system calls"""


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for reuse (module docstring). Returns False, doing
    nothing, where the C library is not glibc (musl, macOS, Windows)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    settings = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: TRIM_THRESHOLD, M_TOP_PAD: TOP_PAD}
    for parameter, value in settings.items():
        if libc.mallopt(parameter, value) != 1:
            raise OSError(f"mallopt({parameter}, {value}) failed")
    return True
