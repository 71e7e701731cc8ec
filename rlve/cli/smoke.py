"""`make smoke`: the embedded tiny model climbs the vowels task's reward in about two minutes.

Runs `python -m rlve.train +experiment=smoke` (12 CISPO steps through vLLM on the CPU, see
rlve/configs/experiment/smoke.yaml) afresh in runs/smoke, then says how far the mean reward
rose from the first three steps to the last three. Extra arguments are Hydra overrides.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

WINDOW = 3
"""steps averaged at each end of the run"""


def reward_rise(metrics_file: Path, window: int = WINDOW) -> tuple[float, float]:
    """The mean `reward/mean` of the first and of the last `window` steps of a run."""
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    rewards = [row["reward/mean"] for row in rows]
    if len(rewards) < 2 * window:
        raise ValueError(f"{metrics_file}: {len(rewards)} steps, fewer than 2 x {window}")
    return sum(rewards[:window]) / window, sum(rewards[-window:]) / window


def main(argv: list[str] | None = None, experiment: str = "smoke") -> tuple[float, float]:
    """Run `experiment` (smoke, or agent_smoke: the same through an agent) with the overrides
    `argv`; the mean reward of its first and last steps."""
    from rlve.loop import train
    from rlve.train import load_run_config

    overrides = [f"+experiment={experiment}", "overwrite=true",
                 *(sys.argv[1:] if argv is None else argv)]  # fmt: skip
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    began = time.perf_counter()
    run_dir = Path(train(load_run_config(overrides)))
    first, last = reward_rise(run_dir / "metrics.jsonl")
    print(f"smoke: mean reward {first:.3f} over the first {WINDOW} steps -> {last:.3f} over the "
          f"last {WINDOW} ({last - first:+.3f}), {(time.perf_counter() - began) / 60:.1f} min; "
          f"run: {run_dir}")  # fmt: skip
    return first, last


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
