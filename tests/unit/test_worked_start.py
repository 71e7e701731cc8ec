"""The environment-scaling experiment's worked-problem start (rlve.experiments.worked_start): its
held-out side fixed before the warm-up, no scored problem in the warm-up, the pool's band."""

import json

import pytest

from rlve.curriculum.constant_answer import ConstantAnswer
from rlve.experiments import worked_start
from rlve.experiments.scaling_pool import FORMAT_ENVS, Screening
from rlve.experiments.worked_start import (
    candidate_split,
    control_first,
    in_band,
    worked_problems,
    worked_split,
)
from rlve.models import load_tokenizer

GUESSED = [ConstantAnswer(0, "Stan", 9, 16)]
"""a constant answer right on 9 of 16 problems: no control"""
UNGUESSED = [ConstantAnswer(0, "7", 1, 16)]
"""the best single answer right on 1 of 16: chance"""


def test_the_warm_up_never_sees_an_environment_that_can_be_held_out():
    split = candidate_split()
    stored = worked_split({})
    assert split.held_out and not set(split.held_out) & set(stored["warm_up_envs"])
    assert set(FORMAT_ENVS) <= set(stored["warm_up_envs"])
    assert stored["held_out"] == [] and stored["collections"] == {}  # nothing screened yet


def test_the_pool_is_the_band_and_the_collections_nest_in_the_rules_order_control_first():
    split = candidate_split()
    records = {name: Screening(name, {"0": 0.5, "1": 0.0}, {}) for name in split.held_out[:2]}
    records[split.held_out[2]] = Screening(split.held_out[2], {"0": 1 / 16}, {})  # under 0.1
    order = split.training_order[:20]
    for name in order:  # the third is the first a constant answer cannot pass
        marks = UNGUESSED if name == order[2] else GUESSED
        records[name] = Screening(name, {"0": 0.25}, {}, constant_answer=marks)
    stored = worked_split(records)
    assert stored["held_out"] == split.held_out[:2]
    assert stored["collections"]["1"] == [order[2]]
    assert stored["collections"]["4"] == [order[2], order[0], order[1], order[3]]
    assert stored["collections"]["16"] == [order[2], *order[:2], *order[3:16]]
    assert stored["rule"]["passed_over_for_control"] == order[:2]
    assert "64" not in stored["collections"] and stored["rule"]["in_band"] == 22


def test_no_control_without_an_environment_a_constant_answer_cannot_pass():
    records = {"a/1": Screening("a/1", {"0": 0.5}, {}, constant_answer=GUESSED),
               "a/2": Screening("a/2", {"0": 0.5}, {})}  # fmt: skip
    with pytest.raises(
        ValueError, match=r"none of the 2 .*\(margin 0.1\); 1 of them have no constant"
    ):
        control_first(["a/1", "a/2"], records)
    assert control_first([], records) == []


def test_the_committed_worked_split_is_the_rule_s_on_the_committed_screening():
    """docs/results/env_scaling/worked/split.json is `worked_split` of its screening.json: C1 is
    the first training environment a constant answer cannot pass, StoneGame (Stan on 9 of 16
    problems at every level) is passed over, and C64 is still full."""
    from rlve.experiments.env_scaling import COMMITTED
    from rlve.experiments.scaling_pool import read_screening

    records = read_screening(COMMITTED / "worked" / "screening.json")
    committed = json.loads((COMMITTED / "worked" / "split.json").read_text())
    assert worked_split(records) == committed
    assert committed["collections"]["1"] == ["reasoning-gym/products"]
    assert [(m.answer, m.right) for m in records["rlve-gym/StoneGame"].constant_answer] == [
        ("Stan", 9)
    ] * 3
    assert "rlve-gym/StoneGame" in committed["rule"]["passed_over_for_control"]
    assert len(committed["collections"]["64"]) == 64


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
