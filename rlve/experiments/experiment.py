"""One runner for multi-seed experiments: arms of RL runs from a starting model, over seeds.

An `Experiment` names its arms (each a list of `python -m rlve.train` overrides), how a seed's
starting model is made (an SFT warm-up, cached by whoever makes it), and what is measured on the
run's own engine before the first step and after the last (`score`). `run_experiment` runs every
(arm, seed) into `<out>/<arm>/seed<N>`, printing each command, and writes its `result.json`
atomically; started again, it skips the runs whose result was made with the same settings and
resumes one that stopped part-way from its newest checkpoint. It
then writes `<out>/table.md` (mean [min-max] over seeds) and `<out>/training.png` (mean line and
min-max band per arm). With `train=False` it trains nothing and writes both from the runs already
finished with the same settings (a long experiment's progress). The next experiment is an
`Experiment`, not a copy of this loop.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlve.experiments.stage_clock import stage

Scores = dict[str, float]
"""what an evaluation measured: a flat name -> number dict"""
Measured = dict[str, float | list[float]]
"""what `Experiment.score` returns: a number per name, or a list of one number per problem in a
fixed order (for comparisons paired by problem), whose mean is the score"""


@dataclass(frozen=True)
class Arm:
    """One way of training, run once per seed."""

    name: str
    """its label in tables and plots, and its folder under the experiment's directory"""
    overrides: tuple[str, ...]
    """`python -m rlve.train` overrides (the model, seeds and output directory are added)"""


@dataclass
class Experiment:
    """What to run and measure; `run_experiment` does the rest."""

    name: str
    """the run names' prefix"""
    arms: list[Arm]
    start: Callable[[Path, int], Path]
    """(experiment directory, seed) -> the model directory every arm of that seed starts from"""
    score: Callable[[Any, Any, int], Measured]
    """(engine, the run's RunConfig, seed) -> held-out scores, taken before and after training"""
    curves: list[str]
    """metrics.jsonl names drawn over steps in training.png"""
    from_metrics: Callable[[list[dict]], Scores] = lambda rows: {}
    """numbers of a whole run read from its metrics rows (e.g. the mean effective prompt ratio)"""
    settings: dict[str, Any] = field(default_factory=dict)
    """whatever else decides a result (SFT sizes...): a result made with other settings is redone"""
    score_every: int = 0
    """also `score` after every this many steps, for a curve (0: only before and after)"""


@dataclass
class RunResult:
    """One (arm, seed) run as `result.json` holds it."""

    arm: str
    seed: int
    before: Scores
    """`score` on the starting model, before the first step"""
    after: Scores
    """`score` after the last step"""
    summary: Scores
    """`from_metrics` of the whole run"""
    minutes: float
    """wall-clock minutes of the last process that worked on it (a resumed run: since resuming)"""
    settings: dict[str, Any]
    """what decided it: the arm's overrides, the starting model, the experiment's settings"""
    during: dict[str, Scores] = field(default_factory=dict)
    """`score` after every `score_every`-th step before the last, by step ("3", "6", ...)"""
    outcomes: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """the per-problem values of the scores that have them, by when ("before", "after", a step)"""

    @classmethod
    def load(cls, path: Path) -> RunResult:
        return cls(**json.loads(path.read_text()))

    def before_and_after(self, score: str) -> dict[str, list[float]]:
        """{"before": ..., "after": ...}: `score`'s per-problem values, or {} unless both kept."""
        kept = {when: self.outcomes.get(when, {}).get(score) for when in ("before", "after")}
        return kept if None not in kept.values() else {}


def run_overrides(experiment: Experiment, arm: Arm, model: Path, seed: int, run_dir: Path):
    return [*arm.overrides, f"trainer.model={model}", f"trainer.seed={seed}", f"env.seed={seed}",
            f"inference.seed={seed}", f"output_dir={run_dir}",
            f"run_name={experiment.name}_{arm.name}_seed{seed}"]  # fmt: skip


def run_settings(experiment: Experiment, arm: Arm, model: Path | str) -> dict[str, Any]:
    """What decides one run's result, as its result file holds it (lists, str keys)."""
    settings = {"overrides": list(arm.overrides), "model": str(model), **experiment.settings}
    return json.loads(json.dumps(settings))


def finished_result(experiment: Experiment, arm: Arm, run_dir: Path) -> RunResult | None:
    """The result in `run_dir` if it was made with this arm's and experiment's settings (from
    the starting model it names), else None."""
    done = run_dir / "result.json"
    if not done.exists():
        return None
    result = RunResult.load(done)
    model = result.settings.get("model", "")
    return result if result.settings == run_settings(experiment, arm, model) else None


def run_one(experiment: Experiment, arm: Arm, model: Path, seed: int, run_dir: Path) -> RunResult:
    """One training run: scored on its own engine before the first step and after the last.

    A run that stopped part-way (a crash, Ctrl-C) resumes from its newest intact checkpoint
    with the scores taken before its first step (`started.json`); one made with other settings
    starts afresh."""
    from rlve.loop import train
    from rlve.rollout.records import write_text_atomically
    from rlve.train import load_run_config

    settings = run_settings(experiment, arm, model)
    done, started_file = run_dir / "result.json", run_dir / "started.json"
    if done.exists() and RunResult.load(done).settings == settings:
        print(f"{arm.name}, seed {seed}: already done ({done})")
        return RunResult.load(done)
    scores: dict[str, Scores] = {}
    during: dict[str, Scores] = {}
    outcomes: dict[str, dict[str, list[float]]] = {}
    during_file, outcomes_file = run_dir / "during.json", run_dir / "outcomes.json"
    overrides = run_overrides(experiment, arm, model, seed, run_dir)
    config = load_run_config(overrides)
    if _resumable(run_dir, settings, config.trainer.max_steps):
        scores["before"] = json.loads(started_file.read_text())["before"]
        if during_file.exists():  # the curve's points before the checkpoint resumed from
            during = json.loads(during_file.read_text())
        if outcomes_file.exists():
            outcomes = json.loads(outcomes_file.read_text())
        overrides.append("resume=true")
        config = load_run_config(overrides)
    else:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing to resume: start afresh
    print("python -m rlve.train " + " ".join(overrides), flush=True)
    began = time.perf_counter()

    def measure(engine, when: str) -> Scores:
        """`score` now; its per-problem lists kept under `when` (outcomes.json), means returned."""
        measured = experiment.score(engine, config, seed)
        per_problem = {k: list(v) for k, v in measured.items() if isinstance(v, list)}
        if per_problem:
            outcomes[when] = per_problem
            write_text_atomically(outcomes_file, json.dumps(outcomes))
        return {k: sum(v) / len(v) if isinstance(v, list) else v for k, v in measured.items()}

    def before_first_step(trainer, engine) -> None:
        if "before" not in scores:
            with stage(f"{arm.name}, seed {seed}: scoring the start"):
                scores["before"] = measure(engine, "before")
            started = {"settings": settings, "before": scores["before"]}
            write_text_atomically(started_file, json.dumps(started, indent=1))

    def after_step(step, trainer, engine, metrics) -> None:
        if step == config.trainer.max_steps:
            print(
                f"-- {arm.name}, seed {seed}: {step} steps trained, "
                f"{(time.perf_counter() - began) / 60:.1f} min since the start",
                flush=True,
            )
            with stage(f"{arm.name}, seed {seed}: scoring the trained model"):
                scores["after"] = measure(engine, "after")
        elif experiment.score_every and step % experiment.score_every == 0:
            with stage(f"{arm.name}, seed {seed}: scoring after step {step}"):
                during[str(step)] = measure(engine, str(step))
            write_text_atomically(during_file, json.dumps(during, indent=1))

    train(config, on_step=after_step, on_start=before_first_step)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    result = RunResult(arm.name, seed, scores["before"], scores["after"],
                       experiment.from_metrics(rows), (time.perf_counter() - began) / 60,
                       settings, during, outcomes)  # fmt: skip
    write_text_atomically(done, json.dumps(result.__dict__, indent=1))
    # a finished run never resumes: its checkpoints (weights and optimizer state, about 1.5 GB
    # each for SmolLM2) would fill the disk over an experiment's runs; model/ stays
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return result


def _resumable(run_dir: Path, settings: dict, max_steps: int) -> bool:
    """Whether the run in `run_dir` stopped part-way with these settings: its first scores and
    a checkpoint before its last step are on disk (a run checkpointed at its last step would
    train no more, so no step would score it after: it starts afresh)."""
    from rlve.training.checkpoint import intact_checkpoint_for_errors, load_trainer_state

    started = run_dir / "started.json"
    if not started.exists() or json.loads(started.read_text())["settings"] != settings:
        return False
    checkpoint = intact_checkpoint_for_errors(str(run_dir / "checkpoints"))
    return checkpoint is not None and load_trainer_state(checkpoint)["step"] < max_steps


def run_experiment(
    experiment: Experiment,
    out: Path,
    seeds: Sequence[int],
    table: Callable | None = None,
    train: bool = True,
) -> list[RunResult]:
    """Every arm for every seed (finished ones skipped), then table.md and training.png.
    `table(results) -> markdown` replaces the default `scores_table`. With `train=False`: only
    the (arm, seed) runs already finished with these settings, the others named and left out."""
    from rlve.experiments.seed_spread import plot_arms
    from rlve.rollout.records import write_text_atomically

    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in seeds:
        print(f"\n== seed {seed}", flush=True)
        model = None
        if train:
            with stage(f"seed {seed}: the starting model"):
                model = experiment.start(out, seed)
        for arm in experiment.arms:
            run_dir = out / arm.name / f"seed{seed}"
            if train:
                results.append(run_one(experiment, arm, model, seed, run_dir))
            elif (result := finished_result(experiment, arm, run_dir)) is not None:
                results.append(result)
            else:
                print(f"{arm.name}, seed {seed}: not finished with these settings, left out")
    if not results:
        raise ValueError(f"no run in {out} finished with these settings: nothing to tabulate")
    markdown = (table or scores_table)(results)
    write_text_atomically(out / "table.md", markdown + "\n")
    runs: dict[str, list[Path]] = {}
    for result in results:
        runs.setdefault(result.arm, []).append(out / result.arm / f"seed{result.seed}")
    print(f"wrote {plot_arms(runs, experiment.curves, out / 'training.png', smooth=3)}")
    return results


def scores_table(results: Sequence[RunResult], digits: int = 2) -> str:
    """Markdown: one row per score, a column before training and one after per arm, each mean
    [min-max] over seeds; then the runs' own summary numbers. A score whose start differs between
    the arms (each arm scored on its own environments, say) has "per arm" as its start, and each
    arm's cell gives its own: "after (from start)"."""
    from rlve.experiments.seed_spread import mean_and_range

    arms = list(dict.fromkeys(r.arm for r in results))
    lines = ["| score | start | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    for key in results[0].before:
        starts = {a: [r.before[key] for r in results if r.arm == a] for a in arms}
        afters = {a: mean_and_range([r.after[key] for r in results if r.arm == a], digits)
                  for a in arms}  # fmt: skip
        by_seed: dict[int, set[float]] = {}
        for r in results:
            by_seed.setdefault(r.seed, set()).add(r.before[key])
        if all(len(values) == 1 for values in by_seed.values()):
            start, cells = mean_and_range(starts[arms[0]], digits), list(afters.values())
        else:
            start = "per arm"
            cells = [f"{afters[a]} (from {mean_and_range(starts[a], digits)})" for a in arms]
        lines.append(f"| {key} | {start} | " + " | ".join(cells) + " |")
    for key in results[0].summary:
        values = [mean_and_range([r.summary[key] for r in results if r.arm == a], digits)
                  for a in arms]  # fmt: skip
        lines.append(f"| {key} | - | " + " | ".join(values) + " |")
    return "\n".join(lines)
