"""RunningSum: each stated running total is checked when it arrives and credited at its own turn;
no cheating policy earns as much as one that adds right."""

import re

import pytest

import rlve
from rlve.rollout import ScriptedEngine

GAMES = 30


def numbers_told(messages) -> list[int]:
    return [int(n) for m in messages if m["role"] == "user"
            for n in re.findall(r"number is (\d+)\.", m["content"])]  # fmt: skip


def honest(messages):
    return f"<think>adding</think>\\boxed{{{sum(numbers_told(messages))}}}"


def repeats_the_last_number(messages):
    return f"\\boxed{{{numbers_told(messages)[-1]}}}"


def off_by_one_until_the_end(messages):
    told = numbers_told(messages)
    return f"\\boxed{{{sum(told) + (len(told) < 3)}}}"  # wrong partials, a right last total


def gibberish(messages):
    return "the total is big " * 20


def play(policy, **kwargs):
    env = rlve.load_environment("running_sum", num_examples=GAMES, min_terms=3, **kwargs)
    groups = rlve.evaluate(env, ScriptedEngine(policy), GAMES, 1, seed=0).groups
    return [g.trajectories[0] for g in groups]


def test_each_right_total_earns_its_share_at_its_turn():
    for game in play(honest):
        turns = game.num_turns
        assert game.turn_rewards == pytest.approx([0.5 / turns] * turns)
        assert game.reward == pytest.approx(1.5)  # the final total (1) and every partial (0.5)


def test_a_wrong_partial_is_charged_at_the_turn_that_made_it():
    for game in play(off_by_one_until_the_end):
        share = 0.5 / game.num_turns
        assert game.turn_rewards == pytest.approx([0.0, 0.0] + [share] * (game.num_turns - 2))


@pytest.mark.parametrize("cheat", [repeats_the_last_number, off_by_one_until_the_end, gibberish])
def test_no_cheat_earns_as_much_as_adding_right(cheat):
    fair = sum(g.reward for g in play(honest))
    assert sum(g.reward for g in play(cheat)) < fair
    assert all(g.reward < 1.5 for g in play(cheat))


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="max_terms must be an integer >= 4"):
        rlve.load_environment("running_sum", min_terms=4, max_terms=3)
    with pytest.raises(ValueError, match="partial_weight must be >= 0"):
        rlve.load_environment("running_sum", partial_weight=-1.0)
