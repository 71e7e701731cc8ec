"""How much of the host's memory one REPL cell can hold, by each route, under `memory_mb`.

    .venv/bin/python benchmarks/bench_repl_memory.py [--memory-mb 128] [--target-mb 1024]

Each cell switches the audit hook off (as an attacker would: only the kernel's limits count),
then tries to hold `target_mb` through one route (the heap, SysV shared memory, a memory file,
/dev/shm, files in its working folder) and keeps it while the parent reads the host's
`Shmem` (/proc/meminfo: tmpfs, shared memory and memory files) and the resident memory of the
worker's processes. What a route held is the rise of their sum over the idle worker's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import psutil

from rlve.envs.repl import REPLLimits
from rlve.envs.repl.process import REPLWorker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
from test_repl_escapes import HOOK_OFF  # noqa: E402  (the escape tests' own switch)

CHUNK = "16 * 1024 * 1024"

ROUTES = {
    "heap": f"""
held = []
try:
    while len(held) * 16 < TARGET:
        held.append(b'x' * {CHUNK})
except MemoryError:
    pass
""",
    "sysv_shared_memory": f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
ids = []
for _ in range(TARGET // 16):
    shm = libc.shmget(0, {CHUNK}, 0o1600)
    if shm < 0:
        print('shmget refused, errno', ctypes.get_errno()); break
    address = libc.shmat(shm, None, 0)
    ctypes.memset(address, 1, {CHUNK})
    ids.append(shm)
""",
    "memory_file": f"""
import os
files = []
try:
    for _ in range(TARGET // 16):
        fd = os.memfd_create('held')
        os.write(fd, b'x' * {CHUNK})
        files.append(fd)
except OSError as error:
    print('memfd refused:', error)
""",
    "dev_shm": f"""
try:
    for i in range(TARGET // 16):
        with open(f'/dev/shm/held{{i}}', 'wb') as f:
            f.write(b'x' * {CHUNK})
except OSError as error:
    print('/dev/shm refused:', error)
""",
    "working_folder": f"""
try:
    for i in range(TARGET // 8):
        with open(f'held{{i}}', 'wb') as f:
            f.write(b'x' * ({CHUNK} // 2))
except OSError as error:
    print('working folder full:', error)
""",
}
"""route -> a cell that holds TARGET megabytes through it, or as much as it is let"""


def held_mb(worker: REPLWorker) -> float:
    """Host Shmem plus the resident memory of the worker and its children, in MiB."""
    shmem = next(int(line.split()[1]) for line in open("/proc/meminfo")
                 if line.startswith("Shmem:")) / 1024  # fmt: skip
    try:
        root = psutil.Process(worker.process.pid)
        processes = [root, *root.children(recursive=True)]
        rss = sum(p.memory_info().rss for p in processes) / 2**20
    except psutil.NoSuchProcess:  # the worker was ended: only what outlives it is counted
        rss = 0.0
    return shmem + rss


async def measure(route: str, limits: REPLLimits, target_mb: int) -> tuple[float, str]:
    worker = await REPLWorker.start(limits)
    try:
        idle = held_mb(worker)
        code = HOOK_OFF + f"TARGET = {target_mb}\n" + ROUTES[route]
        result = await worker.run(code, on_llm=None)
        said = (result.stdout or result.error or result.breach or "").strip().replace("\n", " ")
        return held_mb(worker) - idle, said[-80:]
    finally:
        await worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-mb", type=int, default=128)
    parser.add_argument("--target-mb", type=int, default=1024)
    args = parser.parse_args()
    limits = REPLLimits(memory_mb=args.memory_mb, wall_s=60)
    print(f"memory_mb={args.memory_mb}, disk_mb={limits.disk_mb}; each cell tries to hold "
          f"{args.target_mb} MiB")  # fmt: skip
    print("| route | held (MiB) | the cell said |\n|---|---|---|")
    for route in ROUTES:
        held, said = asyncio.run(measure(route, limits, args.target_mb))
        print(f"| {route} | {held:.0f} | {said} |", flush=True)


if __name__ == "__main__":
    main()
