"""`make recipe`: the tic-tac-toe recipe end to end on the embedded tiny model, over several seeds.

Per seed: a noisy minimax teacher plays games against the RL opponent range; its won or drawn
games become SFT data; SFT teaches the tiny model the output contract; CISPO RL through vLLM
against the mixed opponent (random-move probability stratified over a range, seeded per
example) makes it stronger. The same games, against the optimal and against the random opponent,
are played by the teacher, by the SFT student (on the run's engine before the first RL step) and
by the RL student (after the last step), at the same decoding settings. The result is a table:
teacher / SFT student / RL student x (vs optimal W/D/L, vs random W/D/L, invalid %, format %), as
the mean and range over seeds. Each finished seed is written to `<out>/seed<N>/result.json`; a run
started again skips the seeds it already has.

    python -m rlve.cli.recipe --seeds 0 1 2 --out runs/recipe
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

STAGES = ("teacher", "sft", "rl")
STAGE_NAMES = {"teacher": "teacher", "sft": "SFT student", "rl": "RL student"}
OPPONENTS = {"optimal": 0.0, "random": 1.0}
"""evaluation opponents: their random-move probability"""
EVAL_DATA_SEED = 12_345
"""seed of the evaluation games: never a training seed, the same for every stage and seed"""


@dataclass(frozen=True)
class RecipeSize:
    """How much of everything one seed of the recipe plays and trains."""

    teacher_noise: float = 0.3
    """share of the teacher's moves played at random (the rest are minimax moves)"""
    teacher_games: int = 1000
    """games the teacher plays; the won and drawn ones (with every turn well formed) are kept"""
    sft_steps: int = 400
    """SFT optimizer steps (full fine-tuning, cosine schedule, 10% warm-up)"""
    sft_lr: float = 5e-3
    """SFT peak learning rate"""
    sft_batch: int = 16
    """games per SFT step"""
    rl_steps: int = 20
    """CISPO steps (full fine-tuning: LoRA buys nothing on a 1M-parameter model)"""
    rl_lr: float = 2e-4
    """RL learning rate"""
    groups_per_step: int = 16
    """problems per RL step; each is played group_size times"""
    group_size: int = 8
    """rollouts per problem (128 games per step in all)"""
    min_random_move_prob: float = 0.2
    """the RL (and teacher) opponent's random-move probability range, stratified per example"""
    max_random_move_prob: float = 0.7
    temperature: float = 1.0
    """sampling temperature of RL and of every evaluation"""
    max_tokens: int = 48
    """most tokens per model turn, in RL and evaluation"""
    invalid_penalty: str = "per_move"
    """the RL rubric's invalid-move penalty: 'per_move' (-0.1 each; measured better, see
    docs/results.md) or 'flat' (-0.1 once per game, the seed's rubric)"""
    eval_games: int = 200
    """games per opponent in each evaluation"""


RECIPE = RecipeSize()
"""`make recipe`: about 12 minutes per seed on two CPU cores"""
DEMO = replace(RECIPE, teacher_games=600, sft_steps=300, rl_steps=10, eval_games=100)
"""`make demo`: one seed, shorter"""


def teacher_rows(size: RecipeSize) -> dict[str, dict[str, float]]:
    """The teacher's evaluation summary against each opponent (scripted: no model needed)."""
    from rlve.envs.tictactoe import noisy_minimax_policy
    from rlve.inference.scripted import ScriptedEngine

    engine = ScriptedEngine(noisy_minimax_policy(size.teacher_noise))
    return evaluate_all(engine, size)


def evaluation_env(opponent: str, size: RecipeSize):
    from rlve.envs import load_environment

    prob = OPPONENTS[opponent]
    return load_environment(
        "tictactoe",
        num_examples=size.eval_games,
        seed=EVAL_DATA_SEED,
        min_random_move_prob=prob,
        max_random_move_prob=prob,
    )


def evaluate_all(engine, size: RecipeSize) -> dict[str, dict[str, float]]:
    """Play `eval_games` games against each opponent; opponent -> summary."""
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=size.temperature, max_tokens=size.max_tokens)
    return {
        opponent: evaluate(
            evaluation_env(opponent, size), engine, size.eval_games, seed=0, sampling=sampling
        ).summary
        for opponent in OPPONENTS
    }


SFT_FIELDS = ("teacher_noise", "teacher_games", "sft_steps", "sft_lr", "sft_batch",
              "min_random_move_prob", "max_random_move_prob")  # fmt: skip
"""the sizes an SFT student depends on: with the same ones (and seed) it is reused"""


def sft_student(out: Path, size: RecipeSize, seed: int) -> tuple[Path, dict[str, float]]:
    """Teacher games -> SFT data -> the SFT student's model directory, and what it took.
    A student already in `out` made with the same SFT sizes is reused."""
    from rlve.config import TrainerConfig
    from rlve.models import load_tokenizer
    from rlve.rollout.records import write_text_atomically
    from rlve.training.sft import SftSequence, save_examples, sft_warmup, tictactoe_teacher_data

    settings = {name: getattr(size, name) for name in SFT_FIELDS}
    info_path = out / "sft_info.json"
    if info_path.exists() and (out / "sft_model" / "config.json").exists():
        saved = json.loads(info_path.read_text())
        if saved.pop("settings") == settings:
            print(f"SFT student: {out / 'sft_model'} (already there)")
            return out / "sft_model", saved

    games, summary = tictactoe_teacher_data(
        load_tokenizer("tiny"),
        size.teacher_games,
        noise=size.teacher_noise,
        seed=seed,
        min_random_move_prob=size.min_random_move_prob,
        max_random_move_prob=size.max_random_move_prob,
    )
    save_examples(out / "sft_data.jsonl", games)
    config = TrainerConfig(model="tiny", lr=size.sft_lr, max_steps=size.sft_steps,
                           lr_schedule="cosine", warmup_steps=max(1, size.sft_steps // 10),
                           seed=seed)  # fmt: skip
    sequences = [SftSequence.of(g) for g in games]
    path, losses = sft_warmup(sequences, config, out / "sft_model", size.sft_batch, seed=seed)
    info = {"kept_games": len(games), "teacher_reward": summary["reward/mean"],
            "sft_loss_first": losses[0], "sft_loss_last": losses[-1]}  # fmt: skip
    print(f"teacher (minimax, {size.teacher_noise:.0%} noise): kept {len(games)} of "
          f"{size.teacher_games} games; SFT {size.sft_steps} steps, loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f}; model: {path}")  # fmt: skip
    write_text_atomically(info_path, json.dumps({**info, "settings": settings}, indent=1))
    return path, info


def rl_overrides(model: Path, run_dir: Path, size: RecipeSize, seed: int) -> list[str]:
    """The recipe's RL run: `+experiment=tictactoe_cispo`, scaled for two CPU cores."""
    return [
        "+experiment=tictactoe_cispo",
        f"trainer.model={model}",
        f"trainer.max_steps={size.rl_steps}",
        f"trainer.lr={size.rl_lr}",
        f"trainer.temperature={size.temperature}",
        f"trainer.seed={seed}",
        "trainer.lora.enabled=false",
        f"rollout.groups_per_step={size.groups_per_step}",
        f"rollout.group_size={size.group_size}",
        f"rollout.max_tokens={size.max_tokens}",
        f"env.seed={seed}",
        f"+env.args.tictactoe.seed={seed}",
        f"env.args.tictactoe.min_random_move_prob={size.min_random_move_prob}",
        f"env.args.tictactoe.max_random_move_prob={size.max_random_move_prob}",
        f"+env.args.tictactoe.invalid_penalty={size.invalid_penalty}",
        f"inference.seed={seed}",
        f"save_every={size.rl_steps}",
        f"output_dir={run_dir}",
        f"run_name=recipe_seed{seed}",
    ]


def run_seed(out: Path, size: RecipeSize, seed: int) -> dict:
    """One seed of the recipe: SFT, then RL with the student evaluated before and after."""
    from rlve.loop import train
    from rlve.train import load_run_config

    shutil.rmtree(out / "rl", ignore_errors=True)  # an unfinished seed keeps only its SFT student
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model, info = sft_student(out, size, seed)
    evaluations: dict[str, dict] = {}

    def before_first_step(trainer, engine) -> None:
        evaluations["sft"] = evaluate_all(engine, size)
        print_stage("SFT student", evaluations["sft"])

    def after_step(step, trainer, engine, metrics) -> None:
        if step == size.rl_steps:
            evaluations["rl"] = evaluate_all(engine, size)
            print_stage("RL student", evaluations["rl"])

    overrides = rl_overrides(model, out / "rl", size, seed)
    print("python -m rlve.train " + " ".join(overrides))
    train(load_run_config(overrides), on_step=after_step, on_start=before_first_step)
    return {"seed": seed, "size": asdict(size), **info, **evaluations,
            "minutes": (time.perf_counter() - started) / 60}  # fmt: skip


def print_stage(name: str, rows: dict[str, dict[str, float]]) -> None:
    parts = [f"vs {opp} {wdl(rows[opp])} invalid {100 * rows[opp]['game/invalid']:.1f}%"
             for opp in OPPONENTS]  # fmt: skip
    print(f"{name}: " + "; ".join(parts))


def wdl(summary: dict[str, float]) -> str:
    return "/".join(f"{100 * summary[f'game/{k}']:.1f}" for k in ("win", "draw", "loss"))


# ---------------------------------------------------------------- the table


TABLE_COLUMNS = (
    ("vs optimal W/D/L %", "optimal", ("win", "draw", "loss"), 100),
    ("vs random W/D/L %", "random", ("win", "draw", "loss"), 100),
    ("games with an invalid move % (opt/rand)", None, ("invalid",), 100),
    ("invalid moves per game (opt/rand)", None, ("invalid_moves",), 1),
    ("format % (opt/rand)", None, ("format",), 100),
)
"""(title, opponent or None for both, game/* metrics, scale: 100 shows a share as a percentage)"""


def cell(values: list[float], scale: float = 100) -> str:
    """`scale` x the mean over seeds, with the range when there are several."""
    from rlve.cli.compare import mean_and_range

    scaled = [scale * v for v in values]
    digits = 1 if scale == 100 else 2
    return f"{scaled[0]:.{digits}f}" if len(values) == 1 else mean_and_range(scaled, digits=digits)


def stage_cells(results: list[dict], stage: str) -> list[str]:
    def values(opponent: str, metric: str) -> list[float]:
        return [r[stage][opponent][f"game/{metric}"] for r in results]

    cells = []
    for _, opponent, metrics, scale in TABLE_COLUMNS:
        opponents = (opponent,) if opponent else tuple(OPPONENTS)
        cells.append(" / ".join(cell(values(o, m), scale) for o in opponents for m in metrics))
    return cells


def results_table(results: list[dict]) -> str:
    """Markdown: one row per stage, mean [min-max] over the seeds' results."""
    header = ["model", *(title for title, *_ in TABLE_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for stage in STAGES:
        lines.append("| " + " | ".join([STAGE_NAMES[stage], *stage_cells(results, stage)]) + " |")
    return "\n".join(lines)


TRAINING_METRICS = ["reward/mean", "game/invalid", "game/invalid_moves", "game/draw", "game/win",
                    "train/clip_frac", "train/ratio_max"]  # fmt: skip
"""the RL runs' curves drawn by `plot_training`"""


def plot_training(out: Path, seeds: list[int]) -> Path:
    """The RL runs' metrics over steps: mean line and min-max band over seeds."""
    from rlve.cli.compare import plot_arms

    runs = [out / f"seed{seed}" / "rl" for seed in seeds]
    return plot_arms({"CISPO": runs}, TRAINING_METRICS, out / "training.png", smooth=3)


def run(out: Path, size: RecipeSize, seeds: list[int]) -> list[dict]:
    """Every seed (skipping those already done), then the table over all of them."""
    from rlve.rollout.records import write_text_atomically

    teacher = teacher_rows(size)
    print_stage(f"teacher (minimax, {size.teacher_noise:.0%} noise)", teacher)
    results = []
    for seed in seeds:
        path = out / f"seed{seed}" / "result.json"
        if path.exists() and json.loads(path.read_text())["size"] == asdict(size):
            print(f"\n== seed {seed}: already done ({path})")
            results.append(json.loads(path.read_text()))
            continue
        print(f"\n== seed {seed}")
        result = {**run_seed(path.parent, size, seed), "teacher": teacher}
        write_text_atomically(path, json.dumps(result, indent=1))
        results.append(result)
    table = results_table(results)
    write_text_atomically(out / "table.md", table + "\n")
    print(f"wrote {plot_training(out, seeds)}")
    print(f"\nTic-tac-toe recipe, {len(seeds)} seed(s) {seeds}, {size.eval_games} games per "
          f"opponent, temperature {size.temperature}: mean [min-max] over seeds\n")  # fmt: skip
    print(table)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/recipe")
    parser.add_argument("--invalid-penalty", choices=("flat", "per_move"),
                        default=RECIPE.invalid_penalty,
                        help="the RL rubric's invalid-move penalty")  # fmt: skip
    args = parser.parse_args(argv)
    run(Path(args.out), replace(RECIPE, invalid_penalty=args.invalid_penalty), args.seeds)


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
