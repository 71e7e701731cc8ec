"""The multi-seed runner: every (arm, seed) run scored before and after, a table and a plot, and a
second start that redoes only what changed. The scripted engine plays; the tiny model trains."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import test_loop  # tests/integration is on sys.path
from test_chaos import metrics

import rlve
from rlve.experiments.experiment import Arm, Experiment, run_experiment


def experiment(steps: int, starts: list[int]) -> Experiment:
    def start(out, seed):
        starts.append(seed)
        return "tiny"

    def score(engine, config, seed):
        env = rlve.load_environment("tictactoe", num_examples=4, seed=99)
        result = rlve.evaluate(env, engine, 4, seed=seed)
        games = [t.reward for g in result.groups for t in g.trajectories]  # one per problem
        return {"reward": result.summary["reward/mean"], "games": games,
                "steps": float(config.trainer.max_steps)}  # fmt: skip

    overrides = (*test_loop.FAST, f"trainer.max_steps={steps}", f"save_every={steps}")
    return Experiment(
        name="toy",
        arms=[Arm("a", overrides), Arm("b", (*overrides, "trainer.lr=1e-4"))],
        start=start,
        score=score,
        curves=["reward/mean", "train/loss"],
        from_metrics=lambda rows: {"last step": float(rows[-1]["step"])},
    )


@pytest.mark.slow
def test_arms_over_seeds_are_scored_tabled_plotted_and_not_redone(tmp_path):
    starts: list[int] = []
    results = run_experiment(experiment(2, starts), tmp_path, [0, 1])
    assert [(r.arm, r.seed) for r in results] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert starts == [0, 1]
    assert all(r.after["steps"] == 2.0 and r.summary == {"last step": 2.0} for r in results)
    # a list is kept per problem, and scored by its mean
    for r in results:
        assert list(r.outcomes) == ["before", "after"]
        games = r.outcomes["after"]["games"]
        assert len(games) == 4 and r.after["games"] == pytest.approx(sum(games) / 4)
    saved = json.loads((tmp_path / "b" / "seed1" / "result.json").read_text())
    assert saved["settings"]["overrides"][-1] == "trainer.lr=1e-4"
    table = (tmp_path / "table.md").read_text().splitlines()
    assert table[0] == "| score | start | a | b |"
    assert [row.split(" | ")[0] for row in table[2:]] == [
        "| reward",
        "| games",
        "| steps",
        "| last step",
    ]
    assert (tmp_path / "training.png").stat().st_size > 0
    assert not any(tmp_path.glob("*/seed*/checkpoints"))  # finished runs keep no checkpoint

    # started again: nothing is trained again; with other settings, every run is
    metrics = (tmp_path / "a" / "seed0" / "metrics.jsonl").stat().st_mtime_ns
    again = run_experiment(experiment(2, starts), tmp_path, [0, 1])
    assert [r.__dict__ for r in again] == [r.__dict__ for r in results]
    assert (tmp_path / "a" / "seed0" / "metrics.jsonl").stat().st_mtime_ns == metrics
    changed = run_experiment(experiment(3, starts), tmp_path, [0])
    assert [r.after["steps"] for r in changed] == [3.0, 3.0]

    # train=False tabulates what is finished with the settings asked for, and starts nothing
    started = list(starts)
    done = run_experiment(experiment(3, starts), tmp_path, [0, 1], train=False)
    assert [(r.arm, r.seed, r.after["steps"]) for r in done] == [("a", 0, 3.0), ("b", 0, 3.0)]
    done = run_experiment(experiment(2, starts), tmp_path, [0, 1], train=False)
    assert [(r.arm, r.seed, r.after["steps"]) for r in done] == [("a", 1, 2.0), ("b", 1, 2.0)]
    assert starts == started
    with pytest.raises(ValueError, match="no run .* finished with these settings"):
        run_experiment(experiment(4, starts), tmp_path, [0, 1], train=False)


@pytest.mark.slow
def test_a_run_killed_part_way_resumes_with_the_scores_it_took_first(tmp_path):
    """SIGKILL at step 3 of 4 (a checkpoint at step 2): started again, the run goes on from
    step 2, keeps its first scores and its curve's points, and its metrics are those of a run
    never stopped."""
    script = ("import sys; from pathlib import Path; from test_experiment_runner import toy; "
              "toy(Path(sys.argv[1]), 4)")  # fmt: skip
    env = {**os.environ, "RLVE_KILL_AT": "rollout@3",
           "PYTHONPATH": str(Path(__file__).parent)}  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "resumed")], env=env)
    assert killed.returncode == -signal.SIGKILL
    run_dir = tmp_path / "resumed" / "a" / "seed0"
    first = json.loads((run_dir / "started.json").read_text())["before"]
    assert not (run_dir / "result.json").exists()

    resumed = toy(tmp_path / "resumed", 4)
    whole = toy(tmp_path / "whole", 4)
    assert resumed[0].before == first
    assert resumed[0].after == whole[0].after
    # the curve: scored after steps 1 and 2 before the kill, after 3 once resumed
    assert list(resumed[0].during) == ["1", "2", "3"]
    assert resumed[0].during == whole[0].during
    assert list(resumed[0].outcomes) == ["before", "1", "2", "3", "after"]
    assert resumed[0].outcomes == whole[0].outcomes
    test_loop.assert_same_run(metrics(run_dir), metrics(tmp_path / "whole" / "a" / "seed0"))


def toy(out, steps: int):
    """One arm, one seed, `save_every` 2, scored after every step."""
    one_arm = experiment(steps, [])
    one_arm.score_every = 1
    one_arm.arms = [Arm("a", (*one_arm.arms[0].overrides, "save_every=2"))]
    return run_experiment(one_arm, out, [0])
