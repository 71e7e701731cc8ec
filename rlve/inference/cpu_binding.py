"""Which cores vLLM's worker computes on, on a CPU machine (VLLM_CPU_OMP_THREADS_BIND).

vLLM on CPU runs its scheduler in a process of its own beside the worker and, by default, binds
the worker's OpenMP threads to every core but one, which it leaves to the scheduler. The
scheduler mostly waits on the worker, polling (vLLM's own TODO: "make scheduler proc sleep when
idle"), so on two cores half the machine went to waiting: the recipe's 200 evaluation games took
147 s with the worker on one core and 80 s with it on both (docs/benchmarks.md "vLLM's worker on
every core"). The polling yields the core (sched_yield), so the worker's threads still get it.
"""

from __future__ import annotations

import os
from collections.abc import Collection

VLLMS_OWN = "vllm"
"""`inference.cpu_cores` for vLLM's own binding on any machine; the loop uses it in place of
"auto" when sampling overlaps training (`rollout.async_level` > 0), since the gain below was
measured with the trainer idle while the worker computes"""
EVERY_CORE_UP_TO = 2
"""machines with at most this many usable cores give vLLM's worker all of them under "auto";
measured on two cores only, so larger machines keep vLLM's own binding"""
VLLM_DEFAULT = "auto"
"""VLLM_CPU_OMP_THREADS_BIND's own default: every core but one"""


def worker_cores(setting: str, usable: Collection[int] | None = None) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `inference.cpu_cores`: "auto" is every usable core on a
    machine of at most EVERY_CORE_UP_TO cores and vLLM's default elsewhere; "vllm" is vLLM's
    default; any other setting ("0", "0-3", "nobind") is passed on as it is. `usable`: the core
    ids this process may run on (default: its affinity)."""
    if setting == VLLMS_OWN:
        return VLLM_DEFAULT
    if setting != "auto":
        return setting
    cores = sorted(os.sched_getaffinity(0) if usable is None else usable)
    if not cores or len(cores) > EVERY_CORE_UP_TO:
        return VLLM_DEFAULT
    return ",".join(map(str, cores))
