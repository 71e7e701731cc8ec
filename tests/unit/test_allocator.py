"""keep_freed_memory: a large block freed and allocated again is not faulted in again."""

import ctypes
import ctypes.util
import platform
import resource

import pytest

from rlve.training.allocator import keep_freed_memory

BLOCK = 64 * 2**20
"""above glibc's largest mmap threshold (32 MB): by default a fresh mapping every time"""
PAGES = BLOCK // resource.getpagesize()


def faults_of_a_fresh_block(libc) -> int:
    """Minor page faults of malloc + writing every byte + free of one BLOCK."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(BLOCK)
    assert block
    ctypes.memset(block, 1, BLOCK)
    libc.free(ctypes.c_void_p(block))
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_freed_block_is_reused_without_faulting_its_pages_in_again():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    assert keep_freed_memory() is True
    faults_of_a_fresh_block(libc)  # the heap grows once: every page faults in
    again = faults_of_a_fresh_block(libc)
    # unmapped on free (glibc's default), the block would fault all PAGES pages in again
    assert again < PAGES // 100, f"{again} faults of {PAGES} pages"
