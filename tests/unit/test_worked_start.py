"""The environment-scaling experiment's worked-problem start (rlve.experiments.worked_start): its
held-out side fixed before the warm-up, no scored problem in the warm-up, the pool's band."""

import json

from rlve.experiments import worked_start
from rlve.experiments.scaling_pool import FORMAT_ENVS, Screening
from rlve.experiments.worked_start import candidate_split, in_band, worked_problems, worked_split
from rlve.models import load_tokenizer


def test_the_warm_up_never_sees_an_environment_that_can_be_held_out():
    split = candidate_split()
    stored = worked_split({})
    assert split.held_out and not set(split.held_out) & set(stored["warm_up_envs"])
    assert set(FORMAT_ENVS) <= set(stored["warm_up_envs"])
    assert stored["held_out"] == [] and stored["collections"] == {}  # nothing screened yet


def test_the_pool_is_the_band_and_the_collections_nest_in_the_rules_order():
    split = candidate_split()
    records = {name: Screening(name, {"0": 0.5, "1": 0.0}, {}) for name in split.held_out[:2]}
    records[split.held_out[2]] = Screening(split.held_out[2], {"0": 1 / 16}, {})  # under 0.1
    for name in split.training_order[:20]:
        records[name] = Screening(name, {"0": 0.25}, {})
    stored = worked_split(records)
    assert stored["held_out"] == split.held_out[:2]
    assert stored["collections"]["16"] == split.training_order[:16]
    assert stored["collections"]["4"] == stored["collections"]["16"][:4]
    assert "64" not in stored["collections"] and stored["rule"]["in_band"] == 22


def test_in_band_means_right_on_10_to_90_percent_at_some_level():
    assert in_band(Screening("a/1", {"0": 0.0, "1": 0.1}, {}))
    assert in_band(Screening("a/1", {"0": 0.9, "1": 1.0}, {}))
    assert not in_band(Screening("a/1", {"0": 1 / 16, "1": 15 / 16}, {}))
    assert not in_band(Screening("a/1", {"0": 0.5}, {}, problem="a prompt of 900 tokens"))


def test_worked_problems_leave_out_every_prompt_the_screening_or_evaluation_scores(monkeypatch):
    tokenizer = load_tokenizer("tiny")
    first = worked_problems(["rlve/sorting"], tokenizer)
    assert first.per_env == {"rlve/sorting": 24} and len(first.sequences) == 24  # 3 levels x 8
    text = tokenizer.decode(first.sequences[0].token_ids)
    assert "<answer>" in text and sum(first.sequences[0].loss_mask) > 0
    # a warm-up problem that is also scored is left out
    problem = worked_start.prompts_of("rlve/sorting", worked_start.WORKED_SEED, (0,), 1)[0][0]
    monkeypatch.setattr(worked_start, "scored_prompts", lambda name: {json.dumps(problem)})
    second = worked_problems(["rlve/sorting", "no/such_env"], tokenizer)
    assert second.per_env == {"rlve/sorting": 23}
    assert "no/such_env" in second.left_out and "rlve/sorting" in second.left_out
