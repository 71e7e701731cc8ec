"""The environment-scaling split: held-out environments never trained on, nested collections,
and the screening that decides the pool."""

import json

import pytest

from rlve.curriculum.env_split import family, split_environments
from rlve.experiments import env_scaling, scaling_pool
from rlve.experiments.env_scaling import make_split
from rlve.experiments.scaling_pool import FORMAT_ENVS, Screening, screen, screen_one
from rlve.inference.scripted import ScriptedEngine
from rlve.models import load_tokenizer

POOL = [f"a/{i}" for i in range(12)] + [f"b/{i}" for i in range(8)] + ["c/0", "c/1"]


def test_every_fourth_of_each_family_is_held_out_and_the_rest_form_nested_collections():
    split = split_environments(POOL, seed=0, every=4)
    # a: 12 -> 3 held out, b: 8 -> 2, c: 2 -> 1 (the first of its shuffled two)
    assert [family(n) for n in split.held_out].count("a") == 3
    assert [family(n) for n in split.held_out].count("b") == 2
    assert [family(n) for n in split.held_out].count("c") == 1
    assert len(split.training_order) == len(POOL) - 6
    assert not set(split.held_out) & set(split.training_order)
    assert set(split.held_out) | set(split.training_order) == set(POOL)
    one, four, sixteen = (split.collection(n) for n in (1, 4, 16))
    assert one == four[:1] and four == sixteen[:4]
    assert split.sizes([1, 4, 16, 64]) == [1, 4, 16]
    with pytest.raises(ValueError, match="a collection of 64 environments needs 1 to 16"):
        split.collection(64)


def test_the_split_depends_on_the_seed_not_on_the_order_of_the_pool():
    assert split_environments(POOL, seed=3, every=4) == split_environments(
        list(reversed(POOL)), seed=3, every=4
    )
    assert split_environments(POOL, seed=3, every=4) != split_environments(POOL, seed=4, every=4)
    with pytest.raises(ValueError, match="every must be >= 2"):
        split_environments(POOL, seed=0, every=1)


def test_only_environments_with_something_to_learn_are_kept():
    assert Screening("x", {"0": 0.5, "1": 0.0, "2": 0.0}, {}).learnable
    assert Screening("x", {"0": 1.0, "1": 1.0, "2": 0.25}, {}).learnable  # the window can climb
    assert not Screening("x", {"0": 0.0, "1": 0.0, "2": 0.0}, {}).learnable  # nothing right
    assert not Screening("x", {"0": 1.0, "1": 1.0, "2": 1.0}, {}).learnable  # nothing to learn
    assert not Screening("x", {}, {}, 900, "a prompt of 900 tokens").learnable


def test_no_held_out_environment_is_trained_on_warmed_up_on_or_scored_as_in_distribution():
    names = [f"rlve-gym/E{i}" for i in range(90)] + [f"reasoning-gym/t{i}" for i in range(20)]
    records = {n: Screening(n, {"0": 0.5, "1": 0.1, "2": 0.0}, {}) for n in names}
    records["rlve-gym/Flat"] = Screening("rlve-gym/Flat", {"0": 0.0, "1": 0.0, "2": 0.0}, {})
    split, stored = make_split(records)
    assert stored["rule"]["kept"] == 110 and "rlve-gym/Flat" not in split.training_order
    held_out = set(stored["held_out"])
    assert len(held_out) == 23 + 5  # every 4th of 90 (ceil) and of 20
    assert list(stored["collections"]) == ["1", "4", "16", "64"]
    for collection in stored["collections"].values():  # the in-distribution evaluation's envs
        assert not held_out & set(collection)
    assert not held_out & set(FORMAT_ENVS)  # the warm-up's environments


def test_the_committed_split_is_the_rule_s_on_the_committed_screening():
    """docs/results/env_scaling/split.json was made by `make_split` from screening.json (and not
    edited by hand), and keeps its held-out environments out of every collection and warm-up."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "docs" / "results" / "env_scaling"
    committed = json.loads((results / "split.json").read_text())
    _, remade = make_split(env_scaling.read_screening(results / "screening.json"))
    assert committed == remade
    held_out = set(committed["held_out"])
    assert held_out and not held_out & set(FORMAT_ENVS)
    assert all(not held_out & set(c) for c in committed["collections"].values())


def test_candidates_are_every_family_but_the_warm_up_s_environments():
    names = env_scaling.candidates()
    assert not set(names) & set(FORMAT_ENVS)
    assert {family(n) for n in names} == {"rlve", "rlve-gym", "reasoning-gym"}
    assert len(names) == len(set(names))


def test_a_screening_resumes_where_it_stopped(tmp_path, monkeypatch):
    screened = []

    def fake_screen_one(name, engine, tokenizer):
        screened.append(name)
        return Screening(name, {"0": 0.5}, {"0": 1.0})

    monkeypatch.setattr(scaling_pool, "screen_one", fake_screen_one)
    screen(tmp_path, None, None, ["a/1", "a/2"])
    screen(tmp_path, None, None, ["a/1", "a/2", "a/3"])
    assert screened == ["a/1", "a/2", "a/3"]
    rows = json.loads((tmp_path / "screening.json").read_text())
    assert [r["name"] for r in rows] == ["a/1", "a/2", "a/3"]


def test_a_wrong_but_well_formed_policy_is_measured_at_each_level_and_not_kept():
    engine = ScriptedEngine(lambda messages: "<answer>1 2 3</answer>")
    record = screen_one("rlve/sorting_fine", engine, load_tokenizer("tiny"))
    assert record.problem is None and 0 < record.prompt_tokens
    assert record.accuracy == {"0": 0.0, "1": 0.0, "2": 0.0}
    assert record.format == {"0": 1.0, "1": 1.0, "2": 1.0}
    assert not record.learnable
    # a sorted list answers one problem: the best single answer is right on 1 of 16 a level
    assert [(m.level, m.right, m.problems) for m in record.constant_answer] == [
        (0, 1, 16), (1, 1, 16), (2, 1, 16)
    ]  # fmt: skip


def test_each_arm_trains_on_its_collection_and_is_scored_on_the_held_out_list():
    from rlve.train import load_run_config

    _, stored = make_split({n: Screening(n, {"0": 0.5}, {}) for n in POOL})
    arms = env_scaling.experiment(stored, "binary").arms
    assert [arm.name for arm in arms] == ["C1", "C4", "C16"]
    config = load_run_config(list(arms[1].overrides))
    assert config.env.names == stored["collections"]["4"]
    assert config.env.default_args["reward"] == "binary"
    assert not set(config.env.names) & set(stored["held_out"])


def test_the_worked_start_runs_the_named_arms_longer_and_scores_them_before_and_after_only():
    from rlve.experiments.worked_start import RL_STEPS
    from rlve.train import load_run_config

    _, stored = make_split({n: Screening(n, {"0": 0.5}, {}) for n in POOL})
    worked = env_scaling.experiment(stored, "binary", start="worked", arms=["C1", "C16"])
    assert [arm.name for arm in worked.arms] == ["C1", "C16"]
    assert load_run_config(list(worked.arms[1].overrides)).trainer.max_steps == RL_STEPS
    assert worked.score_every == 0 and worked.settings["held_out_problems"] == 32
    with pytest.raises(ValueError, match="C64"):
        env_scaling.experiment(stored, "binary", arms=["C64"])
