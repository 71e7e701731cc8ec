from rlve.experiments.experiment import RunResult, scores_table


def run(arm: str, seed: int, shared_start: float, own_start: float, after: float) -> RunResult:
    return RunResult(
        arm=arm,
        seed=seed,
        before={"held-out": shared_start, "own": own_start},
        after={"held-out": after, "own": after},
        summary={"minutes": 10.0 + seed},
        minutes=1.0,
        settings={},
    )


def test_a_start_shared_by_the_arms_is_one_column_and_an_arms_own_start_goes_in_its_cell():
    results = [
        run("C1", 0, 0.10, own_start=0.00, after=0.20),
        run("C1", 1, 0.30, own_start=0.10, after=0.40),
        run("C4", 0, 0.10, own_start=0.50, after=0.60),
        run("C4", 1, 0.30, own_start=0.70, after=0.80),
    ]
    lines = scores_table(results).splitlines()
    assert lines[0] == "| score | start | C1 | C4 |"
    # the same model per seed: one start, the mean [min-max] over seeds
    assert lines[2] == "| held-out | 0.20 [0.10-0.30] | 0.30 [0.20-0.40] | 0.70 [0.60-0.80] |"
    # each arm scored on its own environments: its own start beside its result
    assert lines[3] == (
        "| own | per arm | 0.30 [0.20-0.40] (from 0.05 [0.00-0.10])"
        " | 0.70 [0.60-0.80] (from 0.60 [0.50-0.70]) |"
    )
    assert lines[4] == "| minutes | - | 10.50 [10.00-11.00] | 10.50 [10.00-11.00] |"
