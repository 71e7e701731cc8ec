"""The games a run plays on its own engine before its first step and after its last
(`evaluation.*`): each environment of the run with `evaluation.env_args` over its own arguments,
at the run's temperature and token limit. `evaluation.json` keeps both stages' summaries (each
0/1 metric with its 95% interval) and each game's outcome (so two runs pair game by game), with
the step each was played at, so a resumed run does not play the start again, and a run resumed
to train further plays its end again."""

from __future__ import annotations

import json
from pathlib import Path

from rlve.config import RunConfig
from rlve.rollout.records import write_text_atomically

EVALUATION_FILE = "evaluation.json"
STAGES = ("start", "end")
"""before the first step (the starting model) and after the last (the trained one)"""
SHOWN = ("game/win", "game/draw", "game/loss", "game/invalid", "accuracy")
"""the 0/1 metrics printed first when an environment has them; others follow"""


def stored_stages(run_dir: Path) -> dict[str, dict]:
    """stage -> {"step": the trainer's step when it was played, "scores": its summary}."""
    path = run_dir / EVALUATION_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def evaluate_stage(
    config: RunConfig, engine, run_dir: Path, stage: str, step: int
) -> dict[str, float]:
    """Play the evaluation's games now, after `step` optimizer steps, as `stage`; store and print
    its summary ("<env>/<metric>" -> value). A stage stored at the same step is returned as it
    is."""
    from rlve.envs import expand_env_names, load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    stages = stored_stages(run_dir)
    if stages.get(stage, {}).get("step") == step:
        return stages[stage]["scores"]
    e = config.evaluation
    sampling = SamplingConfig(temperature=config.trainer.temperature,
                              max_tokens=config.rollout.max_tokens)  # fmt: skip
    scores: dict[str, float] = {}
    games: dict[str, list[dict]] = {}
    for name in expand_env_names(config.env.names):
        env = load_environment(name, **{**config.env.args_for(name), **e.env_args})
        in_flight = min(e.games, config.rollout.max_concurrent)
        result = evaluate(env, engine, e.games, seed=e.seed, sampling=sampling,
                          max_concurrent=in_flight, progress=True)  # fmt: skip
        scores.update({f"{name}/{metric}": value for metric, value in result.summary.items()})
        games[name] = [game_outcome(t) for g in result.groups for t in g.trajectories]
    stages[stage] = {"step": step, "scores": scores, "games": games}
    write_text_atomically(run_dir / EVALUATION_FILE, json.dumps(stages, indent=1))
    print(f"evaluation, {stage} (step {step}, {e.games} games of each environment): "
          f"{describe(scores)}", flush=True)  # fmt: skip
    return scores


def game_outcome(trajectory) -> dict:
    """One evaluation game as `evaluation.json` keeps it: its example, its reward and its
    episode metrics (game/draw, game/invalid, missed blocks...)."""
    return {"example_id": trajectory.example_id, "reward": trajectory.reward, **trajectory.metrics}


def describe(scores: dict[str, float], most: int = 6) -> str:
    """The mean reward and the 0/1 rates that occurred, each with its 95% interval:
    "tictactoe: reward 0.512; game/draw 51.0% (44-58), ..."."""
    parts = []
    for env in dict.fromkeys(key.split("/")[0] for key in scores):
        rates = [key[len(env) + 1 : -len("/ci95_low")] for key in scores
                 if key.startswith(f"{env}/") and key.endswith("/ci95_low")]  # fmt: skip
        rates = [r for r in rates if scores[f"{env}/{r}"] > 0 and "@" not in r]
        rates.sort(key=lambda r: (SHOWN.index(r) if r in SHOWN else len(SHOWN), r))
        shown = [f"{r} {100 * scores[f'{env}/{r}']:.1f}% ({100 * scores[f'{env}/{r}/ci95_low']:.0f}"
                 f"-{100 * scores[f'{env}/{r}/ci95_high']:.0f})" for r in rates[:most]]  # fmt: skip
        parts.append(f"{env}: reward {scores[f'{env}/reward/mean']:.3f}; " + ", ".join(shown))
    return " | ".join(parts)
