"""The control's rule (rlve.curriculum.constant_answer): the best single answer of an environment
against chance, by hand, and the best single answer of real environments, verified."""

import pytest

from rlve.curriculum.constant_answer import (
    CONSTANT_ANSWER_MARGIN,
    ConstantAnswer,
    best_single_answer,
    passes,
)


def exact_match(references: list[str]) -> dict[str, list[float]]:
    """answer -> its accuracy on each problem, for a verifier that wants the reference itself."""
    return {a: [float(r == a) for r in references] for a in set(references)}


def test_answers_a_a_a_b_pay_a_constant_three_quarters():
    best = best_single_answer(0, exact_match(["A", "A", "A", "B"]))
    assert (best.answer, best.right, best.problems) == ("A", 3, 4)
    # 3 / 4 = 0.75 against chance 1 / 4: 0.5 above it, more than the margin of 0.1
    assert best.accuracy == 0.75 and best.chance == 0.25 and best.excess == 0.5
    assert not passes([best])


def test_four_distinct_answers_pass_and_two_answers_do_not_even_when_balanced():
    distinct = best_single_answer(0, exact_match(["A", "B", "C", "D"]))
    assert distinct.accuracy == 0.25 and distinct.excess == 0  # chance is 1 / 4
    assert passes([distinct])
    # StoneGame's shape: two answers, 8 and 8 of 16; a constant earns 0.5, chance 1 / 16
    balanced = best_single_answer(1, exact_match(["Stan"] * 8 + ["Ollie"] * 8))
    assert balanced.answer == "Ollie"  # a tie goes to the first in sorted order
    assert balanced.excess == pytest.approx(0.5 - 0.0625)
    assert not passes([balanced])


def test_the_margin_lets_2_of_16_through_and_stops_3_of_16():
    assert CONSTANT_ANSWER_MARGIN == 0.1
    two, three = ConstantAnswer(0, "1", 2, 16), ConstantAnswer(1, "1", 3, 16)
    assert two.excess == pytest.approx(0.0625) and three.excess == pytest.approx(0.125)
    assert passes([two]) and not passes([two, three])  # every level must pass
    assert passes([two, three], margin=0.125)


def test_a_verifier_that_takes_several_answers_pays_a_constant_more_than_references_repeat():
    # three problems with three different references, but "1 1" is right on two of them
    best = best_single_answer(0, {"1 1": [1, 0, 1], "0 1": [0, 1, 1], "1 0": [1, 0, 0]})
    assert (best.answer, best.right) == ("0 1", 2)  # a tie of 2 and 2: "0 1" sorts first


def test_no_reference_answer_is_not_shown_to_pass_and_bad_counts_are_refused():
    assert not passes([ConstantAnswer(0, None, 0, 16)])
    assert not passes([])
    with pytest.raises(ValueError, match="right=17, problems=16"):
        ConstantAnswer(0, "1", 17, 16)
    with pytest.raises(ValueError, match="same problems"):
        best_single_answer(0, {"A": [1, 0], "B": [1]})
    with pytest.raises(ValueError, match="margin must lie in"):
        passes([ConstantAnswer(0, "1", 1, 16)], margin=1.5)


def test_the_screening_s_constant_answers_of_sorting_are_its_references_one_problem_each():
    """rlve/sorting (no worker pool) at the screened levels: each reference is right on its own
    problem only, so the best single answer earns chance, 1 of 16, at each level."""
    from rlve.experiments.scaling_pool import SCREEN_LEVELS, constant_answers

    marks = constant_answers("rlve/sorting")
    assert [m.level for m in marks] == list(SCREEN_LEVELS)
    assert [(m.right, m.problems) for m in marks] == [(1, 16)] * len(SCREEN_LEVELS)
    assert passes(marks)
