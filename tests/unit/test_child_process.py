"""A stage run in a process of its own: its result left on disk, its failure named."""

import os

import pytest

from rlve.experiments.child_process import run_in_child
from rlve.rollout.records import write_text_atomically


def test_the_child_leaves_its_result_on_disk(tmp_path):
    run_in_child(write_text_atomically, tmp_path / "made.txt", "made in a child\n")
    assert (tmp_path / "made.txt").read_text() == "made in a child\n"


def test_a_failing_child_is_an_error_naming_what_it_ran(tmp_path):
    with pytest.raises(RuntimeError, match=r"rmdir failed in its own process \(exit code 1\)"):
        run_in_child(os.rmdir, str(tmp_path / "absent"))


def test_env_scaling_s_start_is_read_from_where_its_child_made_it(tmp_path):
    from rlve.experiments.env_scaling import start_model

    made = tmp_path / "worked_model_smollm2-135m"  # as a finished child leaves it
    made.mkdir()
    (made / "config.json").write_text("{}")
    assert start_model("worked", tmp_path, "smollm2-135m") == made
