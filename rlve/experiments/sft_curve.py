"""The SFT student against the optimal opponent as its teacher data and its SFT steps grow.

    python -m rlve.experiments.sft_curve --points 600:30 600:120 2400:240 2400:480 \\
        --out runs/sft_curve
    python -m rlve.experiments.sft_curve --teacher-reasons threats --points 600:15 600:30 600:60

A point `games:steps` is a student trained from the base model on the best moves of `games`
teacher games (the recipe's noisy minimax teacher, its deliberate random moves kept out of the
loss) for `steps` SFT steps; every other size is the demo's (DEMO of recipe_sizes: lr, batch,
cosine schedule, board), with the teacher's reasons `--teacher-reasons` names (the threats
reasons with the grid recipe's 64 tokens a turn). Each student plays the recipe's 200
evaluation games against the optimal opponent at the recipe's decoding. curve.json keeps one
row per point, written as each point ends (started again, the command skips the points already
there); curve.png plots the draws and the games with an invalid move against the steps, one
line per number of games, with the teacher's draws.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from rlve.envs.tictactoe.policies import REASONS
from rlve.experiments.recipe import evaluation_env, sft_student, teacher_scores
from rlve.experiments.recipe_sizes import DEMO, RecipeSize, with_reasons


def parse_point(text: str) -> tuple[int, int]:
    """'600:30' -> (600 teacher games, 30 SFT steps)."""
    games, _, steps = text.partition(":")
    if not (games.isdigit() and steps.isdigit()) or int(games) < 1 or int(steps) < 1:
        raise argparse.ArgumentTypeError(f"a point is GAMES:STEPS, two positive integers: {text!r}")
    return int(games), int(steps)


def score_against_optimal(model_dir: Path, size: RecipeSize) -> dict[str, float]:
    """The recipe's evaluation games against the optimal opponent, on a vLLM engine of its own."""
    from rlve.config import InferenceConfig
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer

    settings = InferenceConfig(dtype=size.dtype, max_model_len=1024)
    engine = VLLMEngine(str(model_dir), load_tokenizer(str(model_dir)), settings)
    try:
        sampling = SamplingConfig(temperature=size.temperature, max_tokens=size.max_tokens)
        env = evaluation_env("optimal", size)
        return evaluate(env, engine, size.eval_games, seed=0, sampling=sampling).summary
    finally:
        engine.shutdown()


def measure_point(out: Path, size: RecipeSize) -> dict[str, float]:
    """Train (or reuse) the point's student and score it: one row of the curve (its SFT minutes
    None for a student already there)."""
    reused = (out / "sft_info.json").exists()
    began = time.perf_counter()
    model_dir = sft_student(out, size)
    sft_minutes = None if reused else (time.perf_counter() - began) / 60
    info = json.loads((out / "sft_info.json").read_text())
    began = time.perf_counter()
    scores = score_against_optimal(model_dir, size)
    return {
        "teacher_games": size.teacher_games,
        "sft_steps": size.sft_steps,
        "kept_games": info["kept_games"],
        "epochs": size.sft_steps * size.sft_batch / info["kept_games"],
        "sft_loss_last": info["sft_loss_last"],
        "sft_minutes": sft_minutes,
        "eval_minutes": (time.perf_counter() - began) / 60,
        "draw": scores["game/draw"],
        "invalid": scores["game/invalid"],
        "mistakes": scores.get("game/mistakes"),
        "format": scores.get("game/format"),
        "threats_stated_right": scores.get("game/threats_stated_right"),
    }


def curve_table(rows: list[dict], games: int) -> str:
    from rlve.experiments.recipe_table import cell

    lines = [
        "| teacher games (kept) | SFT steps | epochs | last loss | SFT min | draws vs optimal % "
        "| games with an invalid move % | mistakes per game | threats stated right % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["teacher_games"], r["sft_steps"])):
        minutes = "-" if r["sft_minutes"] is None else f"{r['sft_minutes']:.1f}"
        lines.append(
            f"| {r['teacher_games']} ({r['kept_games']}) | {r['sft_steps']} | {r['epochs']:.1f} "
            f"| {r['sft_loss_last']:.3f} | {minutes} "
            f"| {cell([r['draw']], 100, games)} | {cell([r['invalid']], 100, None)} "
            f"| {cell([r['mistakes']], 1, None)} "
            f"| {cell([r.get('threats_stated_right')], 100, None)} |"
        )
    return "\n".join(lines)


def plot_curve(rows: list[dict], teacher_draw: float, games: int, out_path: Path) -> None:
    """Draws (with their 95% intervals over `games` games) and invalid-move games against the
    SFT steps, one line per number of teacher games, the teacher's draws dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlve.evaluation import wilson_interval

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for games_played in sorted({r["teacher_games"] for r in rows}):
        line = [r for r in rows if r["teacher_games"] == games_played]
        line.sort(key=lambda r: r["sft_steps"])
        steps = [r["sft_steps"] for r in line]
        draws = [100 * r["draw"] for r in line]
        bounds = [wilson_interval(r["draw"], games) for r in line]
        error = [[d - 100 * low for d, (low, _) in zip(draws, bounds, strict=True)],
                 [100 * high - d for d, (_, high) in zip(draws, bounds, strict=True)]]  # fmt: skip
        label = f"{games_played} teacher games"
        axes[0].errorbar(steps, draws, yerr=error, fmt="o-", capsize=3, label=label)
        axes[1].plot(steps, [100 * r["invalid"] for r in line], "o-", label=label)
    axes[0].axhline(100 * teacher_draw, color="grey", linestyle="--", label="teacher")
    axes[0].set(ylabel="draws vs optimal % (95% interval)", ylim=(0, None))
    axes[1].set(ylabel="games with an invalid move %", ylim=(0, None))
    ticks = sorted({r["sft_steps"] for r in rows})
    for ax in axes:
        ax.set(xlabel="SFT steps", xscale="log")
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.legend()
    figure.tight_layout()
    figure.savefig(out_path)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    from rlve.rollout.records import write_text_atomically

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", nargs="+", type=parse_point, default=[(600, 30), (600, 120)])
    parser.add_argument("--out", type=Path, default=Path("runs/sft_curve"))
    parser.add_argument("--teacher-reasons", choices=sorted(REASONS), default="verdict",
                        help="the teacher's think blocks (RecipeSize.teacher_reasons)")  # fmt: skip
    args = parser.parse_args(argv)
    base = with_reasons(DEMO, args.teacher_reasons)
    args.out.mkdir(parents=True, exist_ok=True)
    curve_path = args.out / "curve.json"
    rows = json.loads(curve_path.read_text()) if curve_path.exists() else []
    for games, steps in args.points:
        if any((r["teacher_games"], r["sft_steps"]) == (games, steps) for r in rows):
            print(f"{games} games, {steps} steps: already in {curve_path}")
            continue
        size = replace(base, teacher_games=games, sft_steps=steps)
        row = measure_point(args.out / f"games{games}_steps{steps}", size)
        rows.append(row)
        write_text_atomically(curve_path, json.dumps(rows, indent=1))
        print(curve_table([row], base.eval_games), flush=True)
    table = curve_table(rows, base.eval_games)
    write_text_atomically(args.out / "table.md", table + "\n")
    teacher = teacher_scores(args.out, base)["optimal/game/draw"]
    plot_curve(rows, teacher, base.eval_games, args.out / "curve.png")
    print(table)


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
