"""One line per stage of a long command, with its minutes, printed as each stage ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Times the block; prints `-- name: M.M min` when it ends (also when it raises)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        print(f"-- {name}: {(time.perf_counter() - began) / 60:.1f} min", flush=True)
