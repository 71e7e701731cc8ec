"""The held-out gain split by guessable problems: the marks on real environments, read off their
reference answers, and the table's numbers by hand."""

import pytest

from rlve.experiments.scaling_guessable import guessable_problems, split_table


def test_a_problem_is_guessable_when_its_answer_is_right_on_another_problem_of_its_cell():
    # level 0, 6 problems from seed 5; WhackAMole's answers: 0 4 2 1 8 0 (0 is right twice);
    # WYC's: 1 1 1 1 1 2 (2 is right once)
    marks = guessable_problems(["rlve-gym/WhackAMole", "rlve-gym/WYC"], [0], 6, 5)
    assert marks == [True, False, False, False, False, True] + [True] * 5 + [False]


def test_the_split_table_reads_each_part_apart():
    guessable = [True, True, False, False]
    outcomes = {  # seed -> arm -> when -> per-problem outcomes
        0: {"C1": {"before": [0, 0, 0, 0], "after": [1, 0, 0, 0]},
            "C64": {"before": [0, 0, 0, 0], "after": [1, 1, 1, 0]}},
        1: {"C1": {"before": [1, 0, 0, 0], "after": [1, 1, 0, 0]},
            "C64": {"before": [1, 0, 0, 0], "after": [1, 1, 0, 0]}},
    }  # fmt: skip
    rows = split_table(outcomes, guessable, "C1", "C64").splitlines()
    # guessable (problems 0, 1): C64 - C1 = +0.5 on seed 0, 0 on seed 1 -> mean +0.25,
    # t interval 12.706 * 0.3536 / sqrt(2) = 3.18 either side
    assert rows[2] == (
        "| an answer right on 2+ problems of its cell is right | 2 | 0.250 | 0.750 | 1.000 | "
        "+0.250 (-2.926 to +3.426) |"
    )
    # the others (problems 2, 3): +0.5 and 0 again; C1 never right after, C64 on 1 of 4
    assert rows[3] == (
        "| its answer is right on no other problem of its cell | 2 | 0.000 | 0.000 | 0.250 | "
        "+0.250 (-2.926 to +3.426) |"
    )
    assert rows[4].startswith("| all | 4 | 0.125 | 0.375 | 0.625 | +0.250 ")


def test_outcomes_of_another_length_are_refused():
    outcomes = {0: {arm: {"before": [0, 1], "after": [1, 1]} for arm in ("C1", "C64")}}
    with pytest.raises(ValueError, match=r"marks \(3\) differ in length"):
        split_table(outcomes, [True, False, True], "C1", "C64")
