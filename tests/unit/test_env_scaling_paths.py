"""Where the environment-scaling stages write and read: under runs/ by default, the committed
screening and split read where a run has none, docs/results/ written only when named."""

import json
from pathlib import Path

import pytest

from rlve.experiments import env_scaling
from rlve.experiments.env_scaling import COMMITTED, build_parser, input_dir, parse_args

ROOT = Path(__file__).resolve().parents[2]


def args_of(argv: list[str]):
    return parse_args(build_parser(), argv)


@pytest.mark.parametrize("stage", ["screen", "split", "power", "run"])
def test_every_stage_writes_under_runs_by_default(stage):
    args = args_of([stage])
    assert args.out == args.results == Path("runs/env_scaling")
    worked = args_of([stage, "--start", "worked"])
    assert worked.out == worked.results == Path("runs/env_scaling/worked")


def test_docs_results_is_written_only_when_named():
    args = args_of(["split", "--start", "worked", "--results", "docs/results/env_scaling"])
    assert args.results == Path("docs/results/env_scaling/worked")
    assert args.out == Path("runs/env_scaling/worked")
    assert COMMITTED == ROOT / "docs" / "results" / "env_scaling"


def test_the_committed_split_is_read_where_the_runs_have_none(tmp_path):
    args = args_of(["run", "--out", str(tmp_path)])
    assert input_dir(args, "split.json") == COMMITTED
    worked = args_of(["run", "--start", "worked", "--out", str(tmp_path)])
    assert input_dir(worked, "split.json") == COMMITTED / "worked"
    (tmp_path / "split.json").write_text("{}")  # a split of the run's own comes first
    assert input_dir(args, "split.json") == tmp_path
    named = args_of(["run", "--results", str(tmp_path / "empty")])  # a named one: only there
    assert input_dir(named, "split.json") == tmp_path / "empty"


def test_split_from_the_committed_screening_writes_the_committed_split_into_out(tmp_path):
    committed = (COMMITTED / "split.json").read_bytes()
    env_scaling.main(["split", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "split.json").read_bytes()) == json.loads(committed)
    assert (COMMITTED / "split.json").read_bytes() == committed  # not rewritten


def test_power_of_the_worked_start_remakes_the_committed_power_json_into_out(tmp_path):
    # no runs in tmp_path, so var_run is 0, as when the committed power.json was made
    env_scaling.main(["power", "--start", "worked", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "worked" / "power.json").read_text())
    assert written == json.loads((COMMITTED / "worked" / "power.json").read_text())
    assert [row["var_run"] for row in written] == [0.0] * len(written)


def test_a_named_results_directory_without_a_screening_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        env_scaling.main(["split", "--results", str(tmp_path)])
    assert f"no screening.json in {tmp_path}" in capsys.readouterr().err
