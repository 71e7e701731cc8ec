"""`scripts/compare_runs.py`: arms of several seeds side by side, as a mean line and a min-max band.

    python scripts/compare_runs.py --arm adaptive runs/rlve/adaptive/seed* \
        --arm static runs/rlve/static/seed* --metrics reward/mean,batch/effective_prompt_ratio \
        --out runs/rlve/compare.png

One panel per metric; per arm, the mean over its runs at each step and the band between the
lowest and the highest run, so a reader sees at a glance whether one arm leaves the other's
seed-to-seed range.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlve.experiments.run_metrics import metrics_file
from rlve.experiments.seed_spread import plot_arms


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="compare_runs.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--arm", nargs="+", action="append", required=True, help="a label, then its run directories"
    )
    parser.add_argument("--metrics", required=True, help="comma-separated metric names")
    parser.add_argument("--smooth", type=int, default=1, help="moving-average window in steps")
    parser.add_argument("--out", required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    arms = {arm[0]: [Path(p) for p in arm[1:]] for arm in args.arm}
    for label, runs in arms.items():
        missing = [str(r) for r in runs if not metrics_file(r).is_file()]
        if not runs or missing:
            parser.error(f"arm {label!r}: no metrics.jsonl in {missing or 'no run given'}")
    path = plot_arms(arms, [m.strip() for m in args.metrics.split(",") if m.strip()], args.out,
                     args.smooth)  # fmt: skip
    print(f"wrote {path}")
    return path
