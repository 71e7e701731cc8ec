"""Run one stage of an experiment in a process of its own, so its memory goes back when it ends.

An experiment runs for hours in one process. A stage that builds a model (a warm-up SFT of
SmolLM2 on thousands of problems) leaves that process holding 7-10 GB that the allocator does
not give back, beside the RL arms that run next; on a 24 GB machine a second job then gets the
experiment OOM-killed (seen twice). A spawned child (not a fork: the parent's threads and vLLM
state stay out of it) builds the model on disk and exits; the parent reads the result there.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def run_in_child(target: Callable[..., Any], *args: Any) -> None:
    """`target(*args)` in a spawned process, waited for; its return value is dropped (it leaves
    its result on disk). `target` must be a module-level function and `args` picklable.
    RuntimeError naming `target` and the exit code when the child fails (its traceback is in
    the output above) or is killed."""
    child = multiprocessing.get_context("spawn").Process(target=target, args=args)
    child.start()
    child.join()
    if child.exitcode != 0:
        how = f"was killed by signal {-child.exitcode}" if child.exitcode < 0 else "failed"
        raise RuntimeError(f"{target.__qualname__} {how} in its own process (exit code "
                           f"{child.exitcode}); its output is above")  # fmt: skip
