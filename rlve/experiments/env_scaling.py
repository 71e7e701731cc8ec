"""RLVE's environment scaling at laptop scale: screen the environments, then split them.

    python -m rlve.experiments.env_scaling screen --limit 40  # the starting model on each candidate
    python -m rlve.experiments.env_scaling split              # held-out list and nested collections
    python -m rlve.experiments.env_scaling power              # the difference the arms can detect
    python -m rlve.experiments.env_scaling run --seeds 0 1 2  # one arm per collection, over seeds
    python -m rlve.experiments.env_scaling run --table-only   # table.md and scaling.png of what ran
    python -m rlve.experiments.env_scaling screen --start worked  # the worked-problem start (below)
    python -m rlve.experiments.env_scaling run --start worked --arms C1 C64  # its arms
    python -m rlve.experiments.env_scaling power --start worked --effect 0.02 --runs DIR  # seeds

Where things go: every stage writes under `--out` (default runs/env_scaling; runs/env_scaling/
worked with `--start worked`): the starting model, `screening.json`, `split.json`, `power.json`,
and each arm's runs, table and plots under `<out>/<reward>`. `--results DIR` puts the three json
files in DIR instead (DIR/worked for the worked start). The screening and split of the reported
results are committed in COMMITTED (docs/results/env_scaling, and its worked/): `split`, `power`
and `run` read them there when `--results` is not given and `--out` has none of its own, so
`run` trains on the committed split by default. `--results docs/results/env_scaling` writes
there instead: `screen`, `split` and `power` then OVERWRITE the committed files (only to remake
them on purpose); `run` only reads there.

1. **The starting model**: SmolLM2-135M-Instruct after a short SFT on the `<answer>` contract,
   on reference answers of FORMAT_ENVS only. Those are never candidates, so no warm-up data
   comes from a held-out environment, and the warm-up is the same for every arm. With
   `--start worked`, the warm-up of rlve.experiments.worked_start instead (worked problems of every
   candidate the rule cannot hold out), its files under `<out>/worked` (and `<results>/worked`).
2. **Screening**: for each candidate (every environment of the three families but FORMAT_ENVS,
   in an order shuffled once with SCREEN_SEED, so that `--limit` screens a random subset), the
   starting model's accuracy and format at levels 0-2 on SCREEN_PROBLEMS fresh problems each,
   at the training temperature. A candidate is kept when it has something to learn: accuracy
   above 0 at some level and below 1 at some level. Prompts longer than MAX_PROMPT_TOKENS and
   generators that fail are recorded with the reason and not kept. One record per environment
   in `screening.json`, written after each one, so a stopped screening resumes.
3. **The split**: rlve.curriculum.env_split on the kept pool (every HELD_OUT_EVERY-th of each
   family held out, SPLIT_SEED), written to `split.json` with the collections of COLLECTION_SIZES
   that the pool fills. It is made once, before any training run, and not changed after.
   With `--start worked`, C1 is the first training environment that a constant answer cannot
   pass (worked_start.control_first); `split` measures each pool member's best single answer
   where the screening has none (scaling_pool.mark_constant_answers).
4. **The arms**: `+experiment=env_scaling` from the starting model, one arm per collection (C1,
   C4, ...), the same steps and rollouts in each; the reward is the verifiers' shaped one or
   binary accuracy (`--reward`). Each run is scored before its first step, after every
   SCORE_EVERY steps and after its last: held-out accuracy (the mean over every held-out
   environment at EVAL_LEVELS, EVAL_PROBLEMS fresh problems each, the same for every run) and
   in-distribution accuracy (the same on the first ID_ENVS environments of the arm's own
   collection). Finished runs are skipped when the command is started again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlve.curriculum.env_split import EnvSplit, split_environments
from rlve.experiments.scaling_pool import (  # the pool, shared with the starts
    COLLECTION_SIZES,
    EVAL_LEVELS,
    EVAL_PROBLEMS,
    EVAL_SEED,
    FORMAT_ENVS,
    HELD_OUT_EVERY,
    MODEL,
    SPLIT_SEED,
    TEMPERATURE,
    Screening,
    candidates,
    read_screening,
    screen,
)

FORMAT_LEVELS = (0, 1)
FORMAT_PER_LEVEL = 48
FORMAT_STEPS = 24
FORMAT_BATCH = 8
FORMAT_LR = 1e-5
ID_ENVS = 8
"""in-distribution accuracy is taken on at most this many of the arm's environments"""
SCORE_EVERY = 4
OUT = Path("runs/env_scaling")
"""where every stage writes by default (`--out`)"""
COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "results" / "env_scaling"
"""the committed screening.json and split.json of the reported runs: read where `--out` has none
and `--results` is not given, never written unless `--results` names this directory"""


def format_model(out: Path, model: str = MODEL) -> Path:
    """The starting model: SFT of `model` on FORMAT_ENVS' reference answers (made once)."""
    from rlve.config import TrainerConfig
    from rlve.envs import load_environment
    from rlve.models import load_tokenizer
    from rlve.training.sft import reference_answer_data, sft_warmup

    path = out / f"format_model_{Path(model).name}"
    if (path / "config.json").exists():
        return path
    tokenizer = load_tokenizer(model)
    data = []
    for name in FORMAT_ENVS:
        env = load_environment(name, num_examples=1)
        data += reference_answer_data(env, tokenizer, FORMAT_LEVELS, FORMAT_PER_LEVEL, seed=1)
    config = TrainerConfig(model=model, lr=FORMAT_LR, max_steps=FORMAT_STEPS)
    path, losses = sft_warmup(data, config, path, batch_size=FORMAT_BATCH)
    print(f"format warm-up on {len(data)} answers of {', '.join(FORMAT_ENVS)}: loss "
          f"{losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")  # fmt: skip
    return path


def make_split(records: dict[str, Screening]) -> tuple[EnvSplit, dict]:
    """The split of the kept pool, and what `split.json` stores."""
    pool = sorted(name for name, record in records.items() if record.learnable)
    split = split_environments(pool, seed=SPLIT_SEED, every=HELD_OUT_EVERY)
    sizes = split.sizes(COLLECTION_SIZES)
    stored = {
        "rule": {"seed": SPLIT_SEED, "every": HELD_OUT_EVERY, "screened": len(records),
                 "kept": len(pool)},
        "format_envs": list(FORMAT_ENVS),
        "held_out": split.held_out,
        "collections": {str(n): split.collection(n) for n in sizes},
    }  # fmt: skip
    return split, stored


def accuracy_over(
    names: list[str], engine, max_tokens: int, seed: int, problems: int = EVAL_PROBLEMS
) -> list[float]:
    """Each problem's accuracy over `names` x EVAL_LEVELS, `problems` problems each from
    EVAL_SEED, in that order (the same problems for every run, so arms pair by problem); a
    rollout spoiled by a fault counts 0."""
    from rlve.envs import load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=TEMPERATURE, max_tokens=max_tokens)
    values = []
    for name in names:
        for level in EVAL_LEVELS:
            env = load_environment(name, num_examples=problems, seed=EVAL_SEED,
                                   difficulties=[level])  # fmt: skip
            groups = evaluate(env, engine, problems, seed=seed, sampling=sampling).groups
            for group in sorted(groups, key=lambda g: g.example_id):
                values += [problem_accuracy(t) for t in group.trajectories]
    return values


def problem_accuracy(rollout) -> float:
    return 0.0 if rollout.fault is not None else rollout.metrics.get("reward/accuracy", 0.0)


def start_model(start: str, out: Path, model: str = MODEL) -> Path:
    """The model every arm starts from: the format warm-up, or the worked problems', made in a
    process of its own (rlve.experiments.child_process) and then read from `out`."""
    from rlve.experiments.child_process import run_in_child

    if start == "worked":
        from rlve.experiments.worked_start import worked_model as build
    else:
        build = format_model
    run_in_child(build, out, model)
    return build(out, model)


def experiment(
    stored: dict,
    reward: str,
    model: str = MODEL,
    start: str = "format",
    arms: list[str] = (),
    start_dir: Path | None = None,
):
    """One arm per collection of `stored` (split.json), or those named in `arms` ("C1", ...),
    each scored on the held-out list; the starting model is made in (or read from) `start_dir`
    (default: the experiment's directory), where the screening made it. The worked start's arms
    score HELD_OUT_PROBLEMS a held-out cell, run RL_STEPS steps and are scored before and after
    only (worked_start has both)."""
    from rlve.experiments.experiment import Arm, Experiment

    held_out_problems, steps, score_every = EVAL_PROBLEMS, (), SCORE_EVERY
    if start == "worked":
        from rlve.experiments.worked_start import HELD_OUT_PROBLEMS, RL_STEPS

        held_out_problems, steps, score_every = (
            HELD_OUT_PROBLEMS,
            (f"trainer.max_steps={RL_STEPS}",),
            0,
        )

    def score(engine, config, seed: int) -> dict[str, list[float]]:
        max_tokens = config.rollout.max_tokens
        return {
            "held-out accuracy": accuracy_over(
                stored["held_out"], engine, max_tokens, seed, held_out_problems
            ),
            "in-distribution accuracy": accuracy_over(
                list(config.env.names[:ID_ENVS]), engine, max_tokens, seed
            ),
        }

    collections = stored["collections"]
    unknown = [arm for arm in arms if arm.removeprefix("C") not in collections]
    if unknown:
        raise ValueError(
            f"no collection {unknown} in the split (it has C{', C'.join(collections)})"
        )
    chosen = [
        Arm(f"C{size}", ("+experiment=env_scaling", f"env.names=[{','.join(names)}]",
                         f"+env.default_args.reward={reward}", "logging.wandb_mode=disabled",
                         *steps))
        for size, names in collections.items() if not arms or f"C{size}" in arms
    ]  # fmt: skip
    settings = {"eval": [EVAL_LEVELS, EVAL_PROBLEMS, EVAL_SEED, ID_ENVS], "reward": reward,
                "model": model,
                "format": [FORMAT_ENVS, FORMAT_LEVELS, FORMAT_PER_LEVEL, FORMAT_STEPS]}  # fmt: skip
    if start != "format":
        settings["start"] = start
        settings["held_out_problems"] = held_out_problems
    return Experiment(
        name=f"env_scaling_{reward}",
        arms=chosen,
        start=lambda out, seed: start_model(start, start_dir or out, model),
        score=score,
        curves=["reward/mean", "reward/accuracy", "reward/format_score"],
        settings=settings,
        score_every=score_every,
    )


def write_paired(results, out: Path, held_out: list[str]) -> None:
    """`out/paired.md`: the first arm against the last on the held-out problems, seed by seed
    (rlve.experiments.scaling_paired), when some seed has both with their outcomes, and split by
    whether an answer that pays on other problems pays there (`out/guessable.md`,
    scaling_guessable); `out/sizes.md` and `sizes.png`: every size against the smallest and the
    slope (scaling_slope)."""
    from rlve.experiments.scaling_paired import held_out_outcomes, paired_table
    from rlve.experiments.scaling_plot import HELD_OUT, collection_size
    from rlve.rollout.records import write_text_atomically

    arms = sorted({r.arm for r in results}, key=collection_size)
    outcomes = held_out_outcomes(results, arms[0], arms[-1], HELD_OUT)
    if not outcomes:  # one arm, or no seed with both arms' outcomes
        return
    table = paired_table(outcomes, arms[0], arms[-1])
    write_text_atomically(out / "paired.md", table + "\n")
    print(f"held-out accuracy, {arms[-1]} against {arms[0]} problem by problem:\n{table}")
    from rlve.experiments.scaling_guessable import write_guessable

    guessable = write_guessable(outcomes, arms[0], arms[-1], held_out, out)
    print(f"the same, split by whether a repeated answer pays:\n{guessable}")
    from rlve.experiments.scaling_slope import plot_against_smallest, sizes_table

    after: dict[int, dict[int, list[float]]] = {}
    for result in results:
        if kept := result.before_and_after(HELD_OUT):
            after.setdefault(result.seed, {})[collection_size(result.arm)] = kept["after"]
    sizes = sizes_table(after)
    write_text_atomically(out / "sizes.md", sizes + "\n")
    print(f"held-out accuracy by collection size:\n{sizes}\nwrote "
          f"{plot_against_smallest(after, out / 'sizes.png')}")  # fmt: skip


def input_dir(args: argparse.Namespace, name: str) -> Path:
    """Where a stage reads `name` (screening.json or split.json): `args.results`, or the committed
    copy (COMMITTED, worked/ for the worked start) when `--results` was not given and
    `args.results` has no `name`."""
    committed = COMMITTED / "worked" if args.start == "worked" else COMMITTED
    if args.results_given or (args.results / name).exists() or not (committed / name).exists():
        return args.results
    print(f"reading the committed {committed / name} ({args.results} has no {name})")
    return committed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("stage", choices=("screen", "split", "power", "run"))
    parser.add_argument("--out", type=Path, default=OUT,
                        help=f"where every stage writes (default {OUT}; <out>/worked with "
                        "--start worked)")  # fmt: skip
    parser.add_argument("--results", type=Path, default=None,
                        help="where screening.json, split.json and power.json are written and "
                        "read (default: --out, reading the committed docs/results/env_scaling "
                        "where --out has none). `--results docs/results/env_scaling` "
                        "OVERWRITES the committed files")  # fmt: skip
    parser.add_argument("--limit", type=int, help="screen the first N candidates only")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--model", default=MODEL,
                        help="the student: a built-in name, a directory or a hub id")  # fmt: skip
    parser.add_argument("--reward", choices=("shaped", "binary"), default="binary",
                        help="what the arms train on (wrapper.REWARDS)")  # fmt: skip
    parser.add_argument("--start", choices=("format", "worked"), default="format",
                        help="the starting model: the format warm-up, or the worked "
                        "problems' (rlve.experiments.worked_start; its files go to "
                        "<results>/worked)")  # fmt: skip
    parser.add_argument("--arms", nargs="+", default=[],
                        help="run: only these collections (C1 C64 ...); default: all")  # fmt: skip
    parser.add_argument("--table-only", action="store_true",
                        help="run: train nothing, tabulate and plot the finished runs")  # fmt: skip
    parser.add_argument("--effect", type=float,
                        help="power: the seeds each choice of problems a cell needs to detect "
                        "this held-out difference, from var_d and var_run measured on the "
                        "finished runs (<results>/power_<effect x 1000>.json)")  # fmt: skip
    parser.add_argument(
        "--runs", type=Path, help="power: the finished runs it reads (default <out>/<reward>)"
    )
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments, with `results` defaulted to `out` and both in worked/ for that start."""
    args = parser.parse_args(argv)
    args.results_given = args.results is not None
    if not args.results_given:
        args.results = args.out
    if args.start == "worked":
        args.results, args.out = args.results / "worked", args.out / "worked"
    return args


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parse_args(parser, argv)
    args.results.mkdir(parents=True, exist_ok=True)
    if args.stage == "run":
        from rlve.experiments.experiment import run_experiment, scores_table
        from rlve.experiments.scaling_plot import plot_by_environment, plot_env_scaling

        split_file = input_dir(args, "split.json") / "split.json"
        if not split_file.exists():
            parser.error(f"no {split_file}: run the screen and split stages first")
        stored = json.loads(split_file.read_text())
        out = args.out / args.reward
        arms = experiment(stored, args.reward, args.model, args.start, args.arms, args.out)
        results = run_experiment(arms, out, args.seeds, train=not args.table_only)
        print(scores_table(results))
        write_paired(results, out, stored["held_out"])
        run_dir = out / results[0].arm / f"seed{results[0].seed}"  # committed runs: no config
        last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["step"]
        print(f"wrote {plot_env_scaling(results, last, out / 'scaling.png')}")
        if bars := plot_by_environment(results, stored["held_out"], out / "by_environment.png"):
            print(f"wrote {bars}")
        return
    if args.stage == "power":
        from rlve.experiments.env_scaling_power import print_power, print_sample_sizes

        inputs, runs = input_dir(args, "split.json"), args.runs or args.out / args.reward
        if args.effect is not None:
            if not 0 < args.effect < 1:
                parser.error(f"--effect must lie in (0, 1), got {args.effect}")
            return print_sample_sizes(inputs, args.results, runs, args.seeds, args.effect)
        return print_power(inputs, args.results, runs, args.seeds)
    if args.stage == "split":
        records = read_screening(input_dir(args, "screening.json") / "screening.json")
        if not records:
            parser.error(f"no screening.json in {args.results}: run the screen stage first")
        if args.start == "worked":  # the control's rule needs each pool member's constant answers
            from rlve.experiments.scaling_pool import mark_constant_answers
            from rlve.experiments.worked_start import in_band, worked_split

            pool = sorted(name for name, record in records.items() if in_band(record))
            mark_constant_answers(records, pool, args.results / "screening.json")
            stored = worked_split(records)
        else:
            stored = make_split(records)[1]
        from rlve.rollout.records import write_text_atomically

        write_text_atomically(args.results / "split.json", json.dumps(stored, indent=1) + "\n")
        sizes = list(stored["collections"])
        print(f"{len(records)} screened: {len(stored['held_out'])} held out, collections of "
              f"{sizes}")  # fmt: skip
        return
    from rlve.config import InferenceConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.inference.vllm_logs import send_vllm_logs_to
    from rlve.models import load_tokenizer

    model = start_model(args.start, args.out, args.model)
    tokenizer = load_tokenizer(str(model))
    send_vllm_logs_to(args.out)
    engine = VLLMEngine(str(model), tokenizer, InferenceConfig(max_model_len=1024))
    names = candidates()[: args.limit]
    try:
        records = screen(args.results, engine, tokenizer, names)
    finally:
        engine.shutdown()
    from rlve.experiments.worked_start import BAND, in_band

    kept = sum(records[n].learnable for n in names)
    band = sum(in_band(records[n]) for n in names)
    print(f"screened {len(names)} candidates: {kept} have something to learn, {band} are right "
          f"on {BAND[0]:.0%}-{BAND[1]:.0%} of the problems at some level")  # fmt: skip


if __name__ == "__main__":  # vLLM and the verifier pool start processes that re-import this file
    main()
