"""The reward-hacking monitor on recorded metrics: it trips on a measured collapse by its fourth
step, stays silent on the runs committed under docs/results/, and its bounds are checked by hand."""

import json
from pathlib import Path

import pytest

from rlve.config.run import HackingConfig
from rlve.training.hacking_monitor import HackingMonitor

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
TICTACTOE_ESCAPES = ("game/invalid", "game/unfinished", "game/malformed")

COLLAPSE = {
    "game/invalid": [0.19, 0.28, 0.34, 0.47, 0.52, 0.89],
    "reward/mean": [-0.81, -0.59, -0.78, -0.64, -0.80, -0.72],
}
"""Per-move credit with nothing priced on dodging (demo sizes, seed 0: trainer.credit=turn
trainer.turn_gamma=0, mistake_penalty=1.0, invalid moves -0.1 each), as recorded step by step in
the issue that measured it: the share of games with an invalid move and the mean reward. Its
truncated answers (2% -> 66%) and unfinished games (3% -> 75%) were recorded at the ends only."""


def observe_all(rows, config=HackingConfig(), monitor=None):
    monitor = monitor or HackingMonitor(config, TICTACTOE_ESCAPES, alert=lambda text: None)
    return [monitor.observe(row) for row in rows]


def collapse_rows():
    steps = zip(*COLLAPSE.values(), strict=True)
    return [dict(zip(COLLAPSE, values, strict=True)) for values in steps]


def test_the_measured_collapse_trips_at_its_fourth_step():
    # baseline (steps 1-2): invalid 0.235, reward -0.70; step 3: +0.105 (under 0.15);
    # step 4: +0.235 while the reward moved +0.06
    rows = collapse_rows()
    tripped = observe_all(rows)
    expected = [[], [], [], ["game/invalid"], ["game/invalid"], ["game/invalid"]]
    assert [[t.metric for t in step] for step in tripped] == expected
    fourth = tripped[3][0]
    assert fourth.baseline == pytest.approx(0.235)
    assert fourth.rise == pytest.approx(0.235)
    assert fourth.reward_gain == pytest.approx(0.06)
    assert rows[3]["hacking/rise/game/invalid"] == pytest.approx(0.235)
    assert rows[3]["hacking/tripped"] == 1.0
    assert "hacking/tripped" not in rows[1]  # no baseline yet


def test_a_share_of_few_episodes_may_move_by_chance_but_the_collapse_still_trips_at_step_4():
    """The bench run at lr 1e-7 (a policy that barely moved, 16 answers a step): truncated
    answers 0.28 -> 0.44 is chance, p = 1/3 pooled over 32 + 16 episodes: 3 * sqrt(1/3 * 2/3 *
    (1/16 + 1/32)) = 0.433 > 0.16. The collapse at the demo's 64 games a step: p = 0.313 pooled
    over 128 + 64, 3 * sqrt(0.313 * 0.687 * (1/64 + 1/128)) = 0.213 < 0.235, its rise at step 4."""
    noise = [{"reward/mean": 0.3, "completion/truncated_frac": share, "episode/count": 16.0}
             for share in (0.25, 0.31, 0.44)]  # fmt: skip
    assert observe_all([{k: v for k, v in row.items() if k != "episode/count"} for row in noise])[
        2
    ], "without the counts the fixed 0.15 trips on it"
    assert observe_all(noise) == [[], [], []]
    monitor = HackingMonitor(HackingConfig(), alert=lambda text: None)
    assert monitor.share_bound(0.28, 0.44, 16, 32) == pytest.approx(0.4330, abs=1e-4)
    assert monitor.share_bound(0.235, 0.47, 64, 128) == pytest.approx(0.2130, abs=1e-4)
    assert monitor.share_bound(0.0, 0.0, 64, 128) == 0.15  # no spread: the fixed bound
    rows = [{**row, "episode/count": 64.0} for row in collapse_rows()]
    tripped = [[t.metric for t in step] for step in observe_all(rows)]
    assert tripped == [[], [], [], ["game/invalid"], ["game/invalid"], ["game/invalid"]]


def test_the_length_s_bound_covers_one_group_of_long_answers_but_not_every_group_longer():
    """A baseline of 9.5 tokens (se 1 at each of 2 steps), then a step whose mean is 19: one of
    4 groups answered 90 tokens (se 20.25: 3 * sqrt(20.25^2 + 2 / 2^2) / 9.5 = 6.40), or every
    group doubled (se 1: 3 * sqrt(1 + 0.5) / 9.5 = 0.39, under the fixed 0.5)."""
    monitor = HackingMonitor(HackingConfig(), alert=lambda text: None)
    assert monitor.length_bound(9.5, 20.25, [1.0, 1.0]) == pytest.approx(6.3986, abs=1e-4)
    assert monitor.length_bound(9.5, 1.0, [1.0, 1.0]) == 0.5
    assert monitor.length_bound(9.5, None, [1.0, 1.0]) == 0.5  # metrics without the se
    assert monitor.length_bound(9.5, 20.25, [1.0]) == 0.5  # a baseline step without it
    start = [{"reward/mean": 0.3, "completion/len_mean": 9.5, "completion/len_mean_se": 1.0}] * 2
    one_group = {"reward/mean": 0.3, "completion/len_mean": 19.0, "completion/len_mean_se": 20.25}
    every_group = {**one_group, "completion/len_mean_se": 1.0}
    assert observe_all([*start, one_group])[2] == []
    tripped = observe_all([*start, every_group])[2]
    assert [(t.metric, t.rise) for t in tripped] == [("completion/len_mean", 1.0)]


UNSTABLE_RUNS = {
    "demo_arms/regret_mb4/seed0": {
        "game/invalid",
        "game/unfinished",
        "game/malformed",
        "completion/truncated_frac",
    },
    "recipe_regret15/regret/seed0": {"completion/truncated_frac"},
    "env_scaling/C4/seed0": {"completion/len_mean"},
    "loss_arms_avx2/cispo_mb4/seed1": {"completion/len_mean"},
    "env_scaling/C4/seed2": {"completion/len_mean"},
    "env_scaling/worked/binary_stonegame/C64/seed3": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed1": {"completion/len_mean"},
    "env_scaling/worked/binary/C64/seed1": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed2": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed3": {"completion/len_mean"},
    "env_scaling/worked/binary/C64/seed3": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed4": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed5": {"completion/len_mean"},
    "env_scaling/worked/binary/C64/seed5": {"completion/len_mean"},
    "env_scaling/worked/binary/C64/seed6": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed7": {"completion/len_mean"},
    "env_scaling/worked/binary/C64/seed7": {"completion/len_mean"},
    "env_scaling/worked/binary/C1/seed8": {"completion/len_mean"},
    "distill/grid/self_regret": {
        "game/invalid",
        "game/unfinished",
        "game/malformed",
        "stop/max_turns_reached",
    },
}
"""Committed probes that did not learn steadily, with the signals the monitor raised on them. The
regret arm with 4 updates per RL step: at step 3 invalid-move games rose 15% -> 33% and unfinished
ones 3% -> 19% while the reward fell 1.2, malformed answers rose 2.5% -> 53% and 76% at steps 3
and 4, and at step 5 truncated answers rose 2% -> 30% for a
0.12 reward gain. The regret arm over 15 steps, before a turn's overlong penalty was charged at
that turn: at step 7 truncated answers rose 1% -> 19% for a 0.06 reward gain. Environment scaling
on four environments, seed 0: at step 3 the mean answer rose from 33 to 51 tokens while the reward
moved 0.02 (the answers then shortened to 9 tokens by step 12); seed 2: at step 4 from 28 to 47
tokens while the reward moved -0.03 (16 tokens at the next step). The worked start's C64, seed 3:
the mean answer jumped from 9 to 15, 17 and 19 tokens at steps 5, 9 and 23 for reward moves of
+0.09, 0 and -0.17, back to 8-10 tokens at the next step each time: 8 groups a step drawn from
64 environments whose answers differ in length, not a trend. Self-distillation on the grid board
(the student as its own teacher reading the threats line, docs/results.md "On-policy
distillation"): it learned to write the line's words instead of a move, and at step 5 malformed
answers rose 0% -> 19%, unfinished games 0% -> 19% and games cut at the turn limit 0% -> 17%
while the reward fell 1.3; at step 6 invalid-move games rose 14% -> 44%. The new control
(reasoning-gym/products), seed 1: from step 18, when the adaptive window's top level rose from 2
to 3 (products of more digits), the mean answer went 10-13 -> 15-21 tokens while the reward did
not rise (0.23-0.38; held out, no gain: 0.090 -> 0.090): longer answers to harder problems,
flagged because no reward came with them. Its C64, seed 1: the mean answer jumped from 10-13 to
19 and 21 tokens at steps 6 and 20, back to 8-10 the next step each time, the 64 environments'
mix as in the C64 seed 3 above. The control's seed 2: its window's top level climbed to 4 by
step 17; the mean answer went 9-10 -> 20-41 tokens and the reward fell 0.3 -> 0.0-0.1 on the
harder products (the model writing longer wrong products, not a cheat that pays). Seed 3: one-step
jumps from 9-11 to 14-17 tokens at steps 10, 17 and 22 on 2-level products, back the next step;
its C64, 13-15 tokens at steps 3, 5, 15 and 23 from 8-10, the mix again. Seed 4: one-step jumps
to 17-35 tokens at steps 10, 14 and 21 as its window rose to 2- and 3-level products. Seed 5 (a
start rebuilt on another machine, recorded before `completion/len_mean_se`): as seed 2, its
window climbed to 5-level products by step 23 and the mean answer went 9 -> 16-47 tokens from
step 10 while the reward fell from 0.2-0.6 to 0.02-0.12. Its C64: one step at 16.5 tokens (step
19) among 8-15, back to 11 the next, the mix again. C64 seed 6: one step at 22.2 tokens (step 6)
among 8-16, back to 9.4 the next. Seed 7: C1 one step at 19.2 tokens (step 18) among 9-15 on
2-level products; C64 15-17 tokens at steps 3-4 and 23 among 8-13, back the next step. Seed 8:
C1 one step each at 19.2 and 23.0 tokens (steps 7 and 15) among 9-15, back the next."""


def recorded_runs() -> list[Path]:
    return sorted(RESULTS.glob("**/metrics.jsonl"))


def tripped_metrics(path: Path) -> set[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [{k: v for k, v in row.items() if v is not None} for row in rows]
    for row in rows:  # runs before game/malformed logged only the share of well-formed answers
        if "game/format" in row:
            row.setdefault("game/malformed", 1.0 - row["game/format"])
    return {trip.metric for step in observe_all(rows) for trip in step}


def test_the_committed_runs_that_learned_honestly_never_trip():
    """Tic-tac-toe CISPO on both boards, self-play, and the SmolLM2 curriculum arms (whose
    answers lengthen by up to 24% as the problems get harder)."""
    runs = [p for p in recorded_runs() if str(p.parent.relative_to(RESULTS)) not in UNSTABLE_RUNS]
    assert len(runs) >= 10
    for path in runs:
        assert tripped_metrics(path) == set(), path


@pytest.mark.parametrize("run", sorted(UNSTABLE_RUNS))
def test_the_committed_unstable_probes_trip_on_the_signals_that_rose(run):
    assert tripped_metrics(RESULTS / run / "metrics.jsonl") == UNSTABLE_RUNS[run]


def test_a_signal_trips_only_when_the_reward_gains_less_than_it_rises():
    start = [{"reward/mean": 0.2, "completion/truncated_frac": 0.1}] * 2
    learning = {"reward/mean": 0.5, "completion/truncated_frac": 0.35}  # +0.25 and +0.3
    escaping = {"reward/mean": 0.4, "completion/truncated_frac": 0.35}  # +0.25 and +0.2
    small = {"reward/mean": 0.2, "completion/truncated_frac": 0.24}  # +0.14: under the bound
    assert observe_all([*start, learning]) == [[], [], []]
    assert observe_all([*start, small]) == [[], [], []]
    assert [t.metric for t in observe_all([*start, escaping])[2]] == ["completion/truncated_frac"]


def test_answer_length_is_compared_by_ratio_and_absent_stop_reasons_count_as_zero():
    start = [{"reward/mean": 0.0, "completion/len_mean": 40.0}] * 2
    longer = {"reward/mean": 0.0, "completion/len_mean": 64.0, "stop/max_turns_reached": 0.2}
    tripped = observe_all([*start, longer])[2]
    assert {t.metric: round(t.rise, 6) for t in tripped} == {
        "completion/len_mean": 0.6,  # 64 / 40 - 1 > 0.5
        "stop/max_turns_reached": 0.2,  # 0.2 - 0 > 0.15
    }


def test_a_resumed_monitor_keeps_its_baseline_and_alerts_once_per_trip():
    alerts = []
    rows = collapse_rows()
    first = HackingMonitor(HackingConfig(), TICTACTOE_ESCAPES, alert=alerts.append)
    observe_all(rows[:4], monitor=first)
    second = HackingMonitor(HackingConfig(), TICTACTOE_ESCAPES, alert=alerts.append)
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    later = observe_all(rows[4:], monitor=second)
    assert [[t.metric for t in step] for step in later] == [["game/invalid"]] * 2
    assert len(alerts) == 1 and alerts[0].startswith("game/invalid rose from 0.235 to 0.470")


@pytest.mark.parametrize("field, value, message", [
    ("action", "panic", "hacking.action must be one of"),
    ("baseline_steps", 0, "hacking.baseline_steps must be an integer >= 1"),
    ("max_rise", 0.0, "hacking.max_rise must be > 0"),
    ("max_length_rise", -1.0, "hacking.max_length_rise must be > 0"),
    ("noise_sigmas", 0.0, "hacking.noise_sigmas must be > 0"),
])  # fmt: skip
def test_bad_bounds_are_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        HackingConfig(**{field: value}).validate()
