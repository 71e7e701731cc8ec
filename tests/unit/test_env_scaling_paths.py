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


def test_power_with_an_effect_remakes_the_committed_seeds_from_the_committed_runs(tmp_path):
    # var_d 0.0851 and var_run 0.000214 from the 5 seeds of C1 and C64; at 32 problems a cell
    # (768 a seed) the normal test needs 2.801585^2 * (0.0851 / 768 + 0.000214) / 0.02^2 = 6.4,
    # so 7 seeds, and the t test over the seeds' means 9
    runs = COMMITTED / "worked" / "binary_stonegame"
    argv = ["power", "--start", "worked", "--out", str(tmp_path), "--runs", str(runs),
            "--seeds", "0", "1", "2", "3", "4", "--effect", "0.02"]  # fmt: skip
    env_scaling.main(argv)
    written = json.loads((tmp_path / "worked" / "power_0020.json").read_text())
    assert written == json.loads((COMMITTED / "worked" / "power_0020.json").read_text())
    assert written["var_d"] == pytest.approx(0.0851, abs=1e-4)
    assert written["var_run"] == pytest.approx(0.000214, abs=1e-6)
    at_32 = next(row for row in written["rows"] if row["per_cell"] == 32)
    assert (at_32["problems"], at_32["seeds_normal"], at_32["seeds"]) == (768, 7, 9)


def test_power_with_an_effect_needs_finished_runs_and_an_effect_in_range(tmp_path, capsys):
    with pytest.raises(ValueError, match="has 0 of seeds"):
        env_scaling.main(["power", "--start", "worked", "--out", str(tmp_path), "--effect", "0.02"])
    with pytest.raises(SystemExit):
        env_scaling.main(["power", "--out", str(tmp_path), "--effect", "1.5"])
    assert "--effect must lie in (0, 1), got 1.5" in capsys.readouterr().err
