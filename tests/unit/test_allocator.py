"""keep_freed_memory: a large block freed and allocated again is not faulted in again. Each case
runs in a fresh process, so the setting (process-wide, for good) stays out of the test run's."""

import platform
import resource
import subprocess
import sys

import pytest

BLOCK = 64 * 2**20
"""above glibc's largest mmap threshold (32 MB): by default a fresh mapping every time"""
PAGES = BLOCK // resource.getpagesize()
PROGRAM = f"""
import ctypes, ctypes.util, resource, sys
from rlve.training.allocator import keep_freed_memory

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
kept = keep_freed_memory() if sys.argv[1] == "keep" else False

def faults_of_a_fresh_block():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc({BLOCK})
    assert block
    ctypes.memset(block, 1, {BLOCK})
    libc.free(ctypes.c_void_p(block))
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults_of_a_fresh_block()  # the heap grows once: every page faults in
print(kept, faults_of_a_fresh_block())
"""


def second_block_faults(mode: str) -> tuple[bool, int]:
    """(what keep_freed_memory returned, minor faults of the second malloc + write + free)."""
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], check=True,
                         capture_output=True, text=True).stdout.split()  # fmt: skip
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_freed_block_is_reused_without_faulting_its_pages_in_again():
    kept, again = second_block_faults("keep")
    assert kept is True
    assert again < PAGES // 100, f"{again} faults of {PAGES} pages"
    # unmapped on free (glibc's default), the block faults all PAGES pages in again
    _, default = second_block_faults("default")
    assert default >= PAGES, f"{default} faults of {PAGES} pages"
