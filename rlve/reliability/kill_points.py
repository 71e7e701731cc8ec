"""Places where a test can have the run kill itself with SIGKILL, to prove that it resumes.

`RLVE_KILL_AT=<point>@<step>` in the environment makes the process kill itself when it reaches
`kill_point(<point>, <step>)`: a SIGKILL, as from the OOM killer or a preempted node, so no
handler, `finally` or atexit runs. The points (docs/reliability.md lists the test of each):

- "rollout":        a step's rollout groups are played, the batch is not handed over yet
- "optimizer_step": the step's gradients are computed, the optimizer has not stepped
- "checkpoint":     half of a checkpoint is written (tensors on disk, the rest not)
- "weight_push":    the weights are on their way into vLLM, the push has not finished

Unset (always, outside tests) it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

KILL_AT_VAR = "RLVE_KILL_AT"
POINTS = ("rollout", "optimizer_step", "checkpoint", "weight_push")


def kill_point(point: str, step: int) -> None:
    """SIGKILL this process if RLVE_KILL_AT names this point and step."""
    target = os.environ.get(KILL_AT_VAR)
    if target is not None and target == f"{point}@{step}":
        os.kill(os.getpid(), signal.SIGKILL)
