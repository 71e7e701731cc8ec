"""`make recipe`: the tic-tac-toe recipe end to end on SmolLM2-135M-Instruct, over several seeds.

A noisy minimax teacher plays games against the RL opponent range; its won or drawn games become
SFT data; SFT teaches the student the output contract and the teacher's play (one student,
shared by every seed); CISPO RL through vLLM against the mixed opponent (random-move probability
stratified over a range, seeded per example) makes it stronger, once per seed. The same games,
against the optimal and against the random opponent, are played by the teacher, by the SFT
student (on each run's engine before its first step) and by the RL student (after its last),
at the same decoding settings. The table: teacher / SFT student / RL student x (vs optimal
W/D/L, vs random W/D/L, invalid moves, format), the mean and range over seeds, or with one seed
each rate with its 95% interval. `rlve.experiments.experiment` runs the seeds: started again, it
skips the ones already done.

    python -m rlve.experiments.recipe --seeds 0 1 2 --out runs/recipe
    python -m rlve.experiments.recipe --model tiny --out runs/recipe_tiny  # the tiny model's sizes
    python -m rlve.experiments.recipe --arms cispo turn self   # per-turn credit, self-play (ARMS)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from rlve.envs.tictactoe.policies import REASONS
from rlve.envs.tictactoe.prompts import BOARDS
from rlve.experiments.experiment import Arm, Experiment, RunResult, run_experiment
from rlve.experiments.recipe_arms import ARMS, BEST_ARMS
from rlve.experiments.recipe_sizes import BOARD_SIZES, DEMO, SIZES, TINY, RecipeSize, with_reasons
from rlve.experiments.recipe_table import OPPONENTS, results_table
from rlve.experiments.stage_clock import stage

EVAL_DATA_SEED = 12_345
"""seed of the evaluation games: never a training seed, the same for every stage and seed"""
TEACHER_SEED = 0
"""seed of the teacher's SFT games (one SFT student serves every RL seed)"""


def evaluation_env(opponent: str, size: RecipeSize):
    from rlve.envs import load_environment

    if opponent not in OPPONENTS:
        raise ValueError(f"opponent must be one of {sorted(OPPONENTS)}, got {opponent!r}")
    prob = OPPONENTS[opponent]
    return load_environment("tictactoe", num_examples=size.eval_games, seed=EVAL_DATA_SEED,
                            min_random_move_prob=prob, max_random_move_prob=prob,
                            rules=size.rules, board=size.board)  # fmt: skip


def evaluate_all(engine, size: RecipeSize) -> dict[str, float]:
    """Play `eval_games` games against each of `eval_opponents`, all in flight at once (1.11x
    faster than 64 at a time, the same games: docs/benchmarks.md): "<opponent>/<metric>" ->
    value, with each mistake kind's rate per chance ("game/missed_block_rate": the share of the
    positions that called for a block where none was played)."""
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=size.temperature, max_tokens=size.max_tokens)
    scores = {}
    for opponent in size.eval_opponents:
        env = evaluation_env(opponent, size)
        summary = evaluate(
            env, engine, size.eval_games, seed=0, sampling=sampling, max_concurrent=size.eval_games
        ).summary
        summary.update(mistake_rates(summary))
        scores.update({f"{opponent}/{name}": value for name, value in summary.items()})
    return scores


def mistake_rates(summary: dict[str, float]) -> dict[str, float]:
    """Each mistake kind per chance of it, and the threats stated right per position with one
    (`game/threats_found_rate`), from an evaluation's per-game means (their ratio is the ratio
    of the totals); a kind with no chance is left out."""
    from rlve.envs.tictactoe.game import MISTAKE_KINDS

    return {
        f"game/{kind}_rate": summary[f"game/{kind}"] / summary[f"game/{kind}_chances"]
        for kind in (*MISTAKE_KINDS, "threats_found")
        if summary.get(f"game/{kind}_chances")
    }


def teacher_scores(out: Path, size: RecipeSize) -> dict[str, float]:
    """The teacher's evaluation (scripted: no model), written once to teacher.json."""
    from rlve.envs.tictactoe import noisy_minimax_policy
    from rlve.inference.scripted import ScriptedEngine
    from rlve.rollout.records import write_text_atomically

    path = out / "teacher.json"
    # no board: the scripted teacher plays the same games under either rendering (a unit test)
    settings = [size.teacher_noise, size.eval_games, size.rules, list(size.eval_opponents),
                size.teacher_reasons]  # fmt: skip
    if path.exists() and json.loads(path.read_text())["settings"] == settings:
        return json.loads(path.read_text())["scores"]
    teacher = noisy_minimax_policy(size.teacher_noise, size.teacher_reasons)  # the same moves
    scores = evaluate_all(ScriptedEngine(teacher), size)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps({"settings": settings, "scores": scores}, indent=1))
    return scores


SFT_FIELDS = ("model", "dtype", "rules", "board", "teacher_noise", "teacher_reasons",
              "teacher_games", "sft_best_moves_only", "sft_steps", "sft_lr", "sft_batch",
              "min_random_move_prob", "max_random_move_prob",
              "max_tokens_per_microbatch")  # fmt: skip
"""the sizes the SFT student depends on (`sft_student` passes each on): with the same ones it is
reused"""


def sft_student(out: Path, size: RecipeSize) -> Path:
    """Teacher games -> SFT data -> the SFT student's model directory (`out/sft_model`), by the
    warm-up a run does (rlve.training.warmup); one made with the same SFT sizes is reused."""
    from rlve.config import TrainerConfig
    from rlve.config.warmup import WarmupConfig
    from rlve.training.warmup import sft_student as warmed_up

    trainer = TrainerConfig(model=size.model, dtype=size.dtype,
                            max_tokens_per_microbatch=size.max_tokens_per_microbatch)  # fmt: skip
    warmup = WarmupConfig(
        teacher_games=size.teacher_games, teacher_noise=size.teacher_noise,
        teacher_reasons=size.teacher_reasons, best_moves_only=size.sft_best_moves_only,
        steps=size.sft_steps, lr=size.sft_lr, batch_size=size.sft_batch, seed=TEACHER_SEED,
    )  # fmt: skip
    env_args = {"rules": size.rules, "board": size.board,
                "min_random_move_prob": size.min_random_move_prob,
                "max_random_move_prob": size.max_random_move_prob}  # fmt: skip
    return warmed_up(out, trainer, warmup, env_args)


def rl_overrides(size: RecipeSize) -> tuple[str, ...]:
    """The recipe's RL run: whole-game CISPO against the sampler's log-probs on tic-tac-toe,
    scaled for two CPU cores; an arm adds its overrides (the model, seeds and output directory
    come from the experiment runner, its scores from the recipe's own evaluation)."""
    return (
        "trainer.old_logprobs=sampler",
        f"trainer.dtype={size.dtype}",
        f"inference.dtype={size.dtype}",
        f"trainer.max_steps={size.rl_steps}",
        f"trainer.lr={size.rl_lr}",
        f"trainer.temperature={size.temperature}",
        "trainer.lora.enabled=false",
        f"rollout.groups_per_step={size.groups_per_step}",
        f"rollout.group_size={size.group_size}",
        f"rollout.max_tokens={size.max_tokens}",
        f"rollout.overlong_buffer={size.overlong_buffer or 'null'}",
        f"rollout.async_level={size.async_level}",
        f"env.args.tictactoe.min_random_move_prob={size.min_random_move_prob}",
        f"env.args.tictactoe.max_random_move_prob={size.max_random_move_prob}",
        f"+env.args.tictactoe.invalid_penalty={size.invalid_penalty}",
        f"+env.args.tictactoe.rules={size.rules}",
        f"+env.args.tictactoe.board={size.board}",
        f"trainer.max_tokens_per_microbatch={size.max_tokens_per_microbatch}",
        "inference.max_model_len=1024",
        f"save_every={size.save_every}",
        "logging.wandb_mode=disabled",
    )


def experiment(size: RecipeSize, arms: Sequence[str] = ("cispo",)) -> Experiment:
    """The `arms` (names in ARMS) per seed from the shared SFT student, evaluated before and
    after."""
    return Experiment(
        name="tictactoe",
        arms=[Arm(name, rl_overrides(size) + ARMS[name]) for name in arms],
        start=lambda out, seed: sft_student(out, size),
        score=lambda engine, config, seed: evaluate_all(engine, size),
        curves=TRAINING_METRICS,
        settings=asdict(size),
    )


def print_stage(name: str, scores: dict[str, float]) -> None:
    opponents = [o for o in OPPONENTS if f"{o}/game/invalid" in scores]
    parts = [f"vs {opp} {wdl(scores, opp)} invalid {100 * scores[f'{opp}/game/invalid']:.1f}%"
             for opp in opponents]  # fmt: skip
    print(f"{name}: " + "; ".join(parts), flush=True)


def wdl(scores: dict[str, float], opponent: str) -> str:
    return "/".join(f"{100 * scores[f'{opponent}/game/{k}']:.1f}" for k in ("win", "draw", "loss"))


TRAINING_METRICS = ["reward/mean", "game/invalid", "game/invalid_moves", "game/draw", "game/win",
                    "game/mistakes", "train/clip_frac", "train/ratio_max"]  # fmt: skip
"""the RL runs' curves drawn in training.png"""


def run(out: Path, size: RecipeSize, seeds: list[int], arms: Sequence[str] = ("cispo",),
        train: bool = True):  # fmt: skip
    """The teacher's evaluation, the SFT student, every seed's RL run of each arm; the table
    (`train=False`: of the runs already finished, training nothing)."""
    from rlve.config import TrainerConfig
    from rlve.models.precision import resolve_dtype
    from rlve.rollout.records import write_text_atomically
    from rlve.sync.placement import resolve_device

    # "auto" made concrete, so the stored settings say which dtype the results ran in
    size = replace(size, dtype=resolve_dtype(size.dtype, resolve_device(TrainerConfig().device)))
    with stage("the teacher's evaluation"):
        teacher = teacher_scores(out, size)
    print_stage(f"teacher (minimax, {size.teacher_noise:.0%} noise)", teacher)

    def table(results: list[RunResult]) -> str:
        return results_table(results, teacher, size.eval_games,
                             stated_threats=size.teacher_reasons == "threats")  # fmt: skip

    results = run_experiment(experiment(size, arms), out, seeds, table=table, train=train)
    for result in results:
        print_stage(f"seed {result.seed}, SFT student", result.before)
        print_stage(f"seed {result.seed}, RL student ({result.arm})", result.after)
    write_text_atomically(out / "table.md", table(results) + "\n")
    runs = ", ".join(f"{arm} seeds {[r.seed for r in results if r.arm == arm]}"
                     for arm in dict.fromkeys(r.arm for r in results))  # fmt: skip
    print(f"\nTic-tac-toe recipe, {size.model} ({runs}), {size.eval_games} games per opponent, "
          f"temperature {size.temperature}: mean [min-max] over seeds; a single seed's rates "
          "with their 95% interval\n")  # fmt: skip
    print(table(results))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/recipe")
    parser.add_argument("--model", choices=sorted(SIZES), default="smollm2-135m",
                        help="the student, with the sizes made for it")  # fmt: skip
    parser.add_argument("--invalid-penalty", choices=("flat", "per_move"),
                        help="the RL rubric's invalid-move penalty")  # fmt: skip
    parser.add_argument("--arms", nargs="+", choices=list(ARMS),
                        help="the RL arms to run from the SFT student (see ARMS); default: "
                        "the board's best (BEST_ARMS)")  # fmt: skip
    parser.add_argument("--table-only", action="store_true",
                        help="train nothing: tabulate the runs already finished")  # fmt: skip
    parser.add_argument("--board", choices=sorted(BOARDS), default="grid",
                        help="how the messages show the board (RecipeSize.board); the other "
                        "sizes start from the board's recipe (BOARD_SIZES)")  # fmt: skip
    parser.add_argument("--demo", action="store_true",
                        help="`make demo`'s sizes (SmolLM2, 30 SFT, 6 RL steps)")  # fmt: skip
    parser.add_argument("--teacher-games", type=int, help="RecipeSize.teacher_games")
    parser.add_argument("--sft-steps", type=int, help="RecipeSize.sft_steps")
    parser.add_argument("--teacher-reasons", choices=sorted(REASONS),
                        help="the teacher's think blocks (RecipeSize.teacher_reasons)")  # fmt: skip
    parser.add_argument("--max-tokens", type=int,
                        help="RecipeSize.max_tokens (default: the size's, or "
                        "STATED_THREATS_TOKENS with --teacher-reasons threats)")  # fmt: skip
    parser.add_argument("--opponents", nargs="+", choices=list(OPPONENTS),
                        help="the evaluation's opponents (RecipeSize.eval_opponents)")  # fmt: skip
    args = parser.parse_args(argv)
    size = recipe_size(args)
    arms = args.arms or (BEST_ARMS[size.board] if size.model != "tiny" else ["cispo"])
    run(Path(args.out), size, args.seeds, arms, train=not args.table_only)


def recipe_size(args: argparse.Namespace) -> RecipeSize:
    """The sizes the command line asks for: the demo's, the tiny model's or the board's recipe,
    then each size flag given."""
    if args.demo:
        size = replace(DEMO, board=args.board)
    elif args.model == "tiny":
        size = replace(TINY, board=args.board)
    else:
        size = BOARD_SIZES[args.board]
    if args.teacher_games:
        size = replace(size, teacher_games=args.teacher_games)
    if args.sft_steps:
        size = replace(size, sft_steps=args.sft_steps)
    if args.invalid_penalty:
        size = replace(size, invalid_penalty=args.invalid_penalty)
    if args.teacher_reasons:
        size = with_reasons(size, args.teacher_reasons)
    if args.max_tokens:
        size = replace(size, max_tokens=args.max_tokens)
    if args.opponents:
        size = replace(size, eval_opponents=tuple(args.opponents))
    return size


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    main()
