"""Compare runs of `python -m rlve.train` side by side: their evaluation before and after, their
time, their training games step by step, and (where both kept them) the paired difference game
by game.

    python -m rlve.experiments.run_arms --runs regret=runs/a distill=runs/b --out docs/results/x

Writes `arms.md` (the table) and `training.png` (each run's training-game rate by step and by
minute) under `--out`, and copies each run's small files (config, metrics, evaluation) into
`--out/<name>/`. Reads tic-tac-toe's game/* metrics where the runs have them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

ENV = "tictactoe"
KEPT_FILES = ("config.yaml", "metrics.jsonl", "evaluation.json", "sft_info.json")
"""a run's small files, copied beside the table"""


def load_run(run_dir: Path) -> dict:
    """A run's evaluation stages and its metrics rows."""
    evaluation = json.loads((run_dir / "evaluation.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"evaluation": evaluation, "rows": rows}


def rate(scores: dict, metric: str) -> str:
    """A 0/1 rate with its 95% interval: "51.0 (44-58)"."""
    value = scores[f"{ENV}/{metric}"]
    return (f"{100 * value:.1f} ({100 * scores[f'{ENV}/{metric}/ci95_low']:.0f}-"
            f"{100 * scores[f'{ENV}/{metric}/ci95_high']:.0f})")  # fmt: skip


def missed_blocks(scores: dict) -> str:
    """Blocks missed as a share of the positions that needed one: "68% (0.57 of 0.84)"."""
    missed, chances = scores[f"{ENV}/game/missed_block"], scores[f"{ENV}/game/missed_block_chances"]
    share = missed / chances if chances else 0.0
    return f"{100 * share:.0f}% ({missed:.2f} of {chances:.2f})"


def paired_difference(a: list[dict], b: list[dict], metric: str) -> tuple[float, float, float]:
    """Mean of b - a over the games both played (matched by example id), with a 95% normal
    interval over the games."""
    left = {g["example_id"]: g[metric] for g in a}
    d = [g[metric] - left[g["example_id"]] for g in b if g["example_id"] in left]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else 0.0
    half = 1.96 * sd / math.sqrt(len(d))
    return mean, mean - half, mean + half


def minutes(rows: list[dict]) -> float:
    """The run's time from its start to its last step's end, in minutes (metrics' `time`)."""
    return rows[-1]["time"] / 60


def table(runs: dict[str, dict]) -> str:
    """The arms' table: start and end vs the evaluation opponent, invalid games, missed blocks,
    minutes to the last step."""
    lines = [
        "| arm | start: draws % (95% CI) | end: draws % (95% CI) | end: wins % | games with an "
        "invalid move % (start -> end) | missed blocks, end (of the chances) | minutes to the "
        "last step |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        start, end = run["evaluation"]["start"]["scores"], run["evaluation"]["end"]["scores"]
        lines.append(
            f"| {name} | {rate(start, 'game/draw')} | {rate(end, 'game/draw')} | "
            f"{rate(end, 'game/win')} | {100 * start[f'{ENV}/game/invalid']:.1f} -> "
            f"{100 * end[f'{ENV}/game/invalid']:.1f} | {missed_blocks(end)} | "
            f"{minutes(run['rows']):.1f} |"
        )
    return "\n".join(lines)


def paired_lines(runs: dict[str, dict]) -> list[str]:
    """Each arm against the first, game by game, where both kept their games."""
    names = list(runs)
    first = runs[names[0]]["evaluation"]["end"].get("games", {}).get(ENV)
    lines = []
    for name in names[1:]:
        games = runs[name]["evaluation"]["end"].get("games", {}).get(ENV)
        if first and games:
            mean, low, high = paired_difference(first, games, "game/draw")
            interval = f"{100 * low:+.1f} to {100 * high:+.1f}"
            lines.append(f"- {name} - {names[0]}, draws at the end, paired by game: "
                         f"{100 * mean:+.1f} points ({interval})")  # fmt: skip
    return lines


def plot(runs: dict[str, dict], metric: str, path: Path) -> None:
    """The training games' `metric` by step and by minute, and each distillation run's reverse KL
    to its teacher by step, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time, kl) = plt.subplots(1, 3, figsize=(15, 4))
    for name, run in runs.items():
        rows = [r for r in run["rows"] if f"{ENV}/{metric}" in r or metric in r]
        values = [r.get(f"{ENV}/{metric}", r.get(metric)) for r in rows]
        (line,) = by_step.plot([r["step"] for r in rows], values, marker="o", label=name)
        by_time.plot([r["time"] / 60 for r in rows], values, marker="o", label=name,
                     color=line.get_color())  # fmt: skip
        distilled = [r for r in run["rows"] if "distill/reverse_kl" in r]
        if distilled:
            kl.plot([r["step"] for r in distilled], [r["distill/reverse_kl"] for r in distilled],
                    marker="o", label=name, color=line.get_color())  # fmt: skip
    by_step.set_xlabel("step")
    by_time.set_xlabel("minutes from the run's start")
    for ax in (by_step, by_time):
        ax.set_ylabel(f"training games: {metric}")
    kl.set_xlabel("step")
    kl.set_ylabel("reverse KL to the teacher, nats per sampled token")
    for ax in (by_step, by_time, kl):
        ax.grid(alpha=0.3)
        if ax.get_lines():  # no distillation run: an empty third panel
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="name=run_dir, the first the "
                        "baseline of the paired differences")  # fmt: skip
    parser.add_argument("--out", required=True, help="where arms.md, training.png and the runs' "
                        "small files go")  # fmt: skip
    parser.add_argument("--metric", default="game/draw", help="the training games' metric plotted")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for spec in args.runs:
        name, _, run_dir = spec.partition("=")
        if not run_dir:
            raise SystemExit(f"--runs takes name=run_dir, got {spec!r}")
        runs[name] = load_run(Path(run_dir))
        (out / name).mkdir(exist_ok=True)
        for file in KEPT_FILES:
            if (Path(run_dir) / file).exists():
                shutil.copy(Path(run_dir) / file, out / name / file)
    text = "\n".join([table(runs), "", *paired_lines(runs)]) + "\n"
    (out / "arms.md").write_text(text)
    plot(runs, args.metric, out / "training.png")
    print(text, end="")


if __name__ == "__main__":
    main()
