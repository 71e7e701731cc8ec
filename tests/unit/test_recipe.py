"""The recipe's table (mean and range over seeds, or one seed's 95% intervals), its RL run, and
the curriculum experiment's table."""

import math
from dataclasses import replace

import pytest

from rlve.envs.tictactoe.prompts import COMPACT
from rlve.experiments.experiment import RunResult, run_overrides
from rlve.experiments.recipe import SFT_FIELDS, evaluation_env, experiment, sft_student
from rlve.experiments.recipe_sizes import DEMO, GRID_RECIPE, RECIPE, TINY
from rlve.experiments.recipe_table import results_table
from rlve.train import load_run_config


def scores(draw_vs_optimal, invalid, fmt=1.0, mistakes=True):
    stage = {}
    for opponent, (win, draw, loss, bad) in {
        "optimal": (0.0, draw_vs_optimal, 1 - draw_vs_optimal, invalid),
        "random": (0.8, 0.1, 0.1, invalid / 2),
    }.items():
        values = {"win": win, "draw": draw, "loss": loss, "invalid": bad,
                  "invalid_moves": 3 * bad, "format": fmt}  # fmt: skip
        if mistakes:
            values["mistakes"] = 1 - draw
        stage.update({f"{opponent}/game/{name}": v for name, v in values.items()})
    return stage


def result(draw_vs_optimal, invalid, seed=0, arm="cispo"):
    stage = scores(draw_vs_optimal, invalid)
    return RunResult(arm, seed, stage, stage, {}, 1.0, {})


def test_the_table_shows_the_mean_and_the_range_over_seeds():
    teacher = scores(0.6, 0.0)
    table = results_table([result(0.5, 0.2), result(0.7, 0.4, seed=1)], teacher, 200)
    lines = table.splitlines()
    assert lines[0].startswith("| model | vs optimal W/D/L % | vs random W/D/L %")
    assert [row.split(" | ")[0] for row in lines[2:]] == ["| teacher", "| SFT student",
                                                          "| RL student"]  # fmt: skip
    cells = lines[3].split(" | ")
    assert cells[1] == "0.0 [0.0-0.0] / 60.0 [50.0-70.0] / 40.0 [30.0-50.0]"
    assert cells[3] == "30.0 [20.0-40.0] / 15.0 [10.0-20.0]"  # invalid: optimal / random
    assert cells[4] == "0.90 [0.60-1.20] / 0.45 [0.30-0.60]"  # invalid moves per game
    assert cells[5] == "0.40 [0.30-0.50] / 0.90 [0.90-0.90]"  # mistakes per game


def test_one_seed_shows_each_rate_with_its_95_percent_interval():
    # 50% of 200 games: Wilson interval 43.1%-56.9%; a count per game has no interval
    table = results_table([result(0.5, 0.2)], scores(0.6, 0.0, mistakes=False), 200)
    teacher, sft = (line.split(" | ") for line in table.splitlines()[2:4])
    assert sft[1] == "0.0 (0-2) / 50.0 (43-57) / 50.0 (43-57)"
    assert sft[4] == "0.60 / 0.30"
    assert sft[5] == "0.50 / 0.90" and teacher[5] == "- / -"  # a teacher.json from before


def test_a_recipe_scored_against_the_optimal_opponent_alone_shows_only_its_columns():
    # make demo scores the optimal opponent only; its teacher states no threats (verdicts)
    optimal = {k: v for k, v in scores(0.5, 0.2).items() if k.startswith("optimal/")}
    optimal["optimal/game/threats_stated_right"] = 0.0
    stage = RunResult("regret", 0, optimal, optimal, {}, 1.0, {})
    table = results_table([stage], optimal, 200, stated_threats=False)
    header, sft = table.splitlines()[0], table.splitlines()[3].split(" | ")
    assert "vs random" not in header and "threats" not in header
    assert "games with an invalid move % (opt) |" in header and "(opt/rand)" not in header
    assert sft[2] == "20.0 (15-26)"  # invalid games against the optimal opponent, no "/ -"
    assert "threats stated right % (opt)" in results_table([stage], optimal, 200)


def test_the_rl_run_is_the_cispo_experiment_scaled_down(tmp_path):
    recipe = experiment(RECIPE)
    overrides = run_overrides(recipe, recipe.arms[0], tmp_path / "model", 2, tmp_path / "rl")
    config = load_run_config(overrides)
    assert config.trainer.loss == "cispo" and not config.trainer.lora.enabled
    assert config.trainer.max_steps == RECIPE.rl_steps and config.env.seed == 2
    assert (config.trainer.dtype, config.inference.dtype) == ("auto", "auto")  # bf16 where native
    assert config.env.args["tictactoe"]["invalid_penalty"] == "per_move"
    assert config.env.args["tictactoe"]["rules"] == "short"
    assert config.env.args["tictactoe"]["board"] == RECIPE.board == "grid"
    assert config.rollout.groups_per_step * config.rollout.group_size == 64
    assert DEMO.model == RECIPE.model == "smollm2-135m" and TINY.model == "tiny"


def test_the_board_reaches_the_evaluation_games_the_rl_run_and_the_sft_students_key(tmp_path):
    compact = replace(RECIPE, board="compact")
    first = evaluation_env("optimal", compact).example(0).prompt
    assert first[0]["content"] == COMPACT.system_prompts["short"] and "|" not in first[1]["content"]
    recipe = experiment(compact)
    config = load_run_config(run_overrides(recipe, recipe.arms[0], tmp_path, 0, tmp_path))
    assert config.env.args["tictactoe"]["board"] == "compact"
    assert "board" in SFT_FIELDS  # an SFT student made on the grid is not reused


def test_each_arm_has_an_rl_row_and_the_first_arm_scores_the_sft_student():
    results = [result(0.5, 0.2), result(0.1, 0.0, arm="turn"), result(0.3, 0.0, arm="self")]
    rows = [line.split(" | ") for line in results_table(results, scores(0.6, 0.0), 200)
            .splitlines()[2:]]  # fmt: skip
    assert [row[0] for row in rows] == ["| teacher", "| SFT student", "| RL student (cispo)",
                                        "| RL student (turn)", "| RL student (self)"]  # fmt: skip
    assert rows[1][1] == "0.0 (0-2) / 50.0 (43-57) / 50.0 (43-57)"  # the cispo run's "before"
    assert rows[3][1] == "0.0 (0-2) / 10.0 (7-15) / 90.0 (85-93)"
    assert rows[4][1] == "0.0 (0-2) / 30.0 (24-37) / 70.0 (63-76)"


def test_the_arms_change_only_credit_penalty_and_opponent(tmp_path):
    names = ["cispo", "turn", "self", "turn_only", "penalty_only", "regret"]
    recipe = experiment(RECIPE, names)
    configs = {arm.name: load_run_config(run_overrides(recipe, arm, tmp_path, 0, tmp_path))
               for arm in recipe.arms}  # fmt: skip
    game = {name: config.env.args["tictactoe"] for name, config in configs.items()}
    assert [configs[n].trainer.credit for n in names] == [
        "episode", "turn", "episode", "turn", "episode", "turn"]  # fmt: skip
    penalty = {**game["cispo"], "mistake_penalty": 0.25}
    assert game["turn"] == game["penalty_only"] == penalty
    assert game["turn_only"] == game["cispo"]
    assert game["self"] == {**game["cispo"], "opponent": "self", "scripted_fraction": 0.5}
    assert game["regret"] == {**game["cispo"], "regret_penalty": 1.0}
    regret = configs["regret"].trainer
    assert (regret.turn_gamma, regret.turn_baseline) == (0.0, "position")
    assert configs["turn"].trainer.turn_baseline == "turn"


def test_the_threats_arms_add_the_stated_threats_reward_then_the_fading_hints(tmp_path):
    stated = replace(GRID_RECIPE, teacher_reasons="threats", max_tokens=64)
    recipe = experiment(stated, ["regret", "threats_reward", "fading_hints"])
    configs = {arm.name: load_run_config(run_overrides(recipe, arm, tmp_path, 0, tmp_path))
               for arm in recipe.arms}  # fmt: skip
    game = {name: config.env.args["tictactoe"] for name, config in configs.items()}
    assert game["threats_reward"] == {**game["regret"], "threats_weight": 0.2}
    assert game["fading_hints"] == {**game["threats_reward"], "hint_levels": 4}
    curriculum = configs["fading_hints"].env.curriculum
    assert (curriculum.enabled, curriculum.tau_num, curriculum.d_delta) == (True, 64, 1)
    assert not configs["threats_reward"].env.curriculum.enabled
    assert configs["fading_hints"].rollout.max_tokens == 64


def test_the_cli_runs_the_board_s_best_arm_from_the_board_s_recipe(monkeypatch, tmp_path):
    import rlve.experiments.recipe as recipe

    asked = {}
    monkeypatch.setattr(recipe, "run", lambda out, size, seeds, arms, train: asked.update(
        size=size, arms=arms))  # fmt: skip
    recipe.main(["--board", "grid", "--seeds", "0", "--out", str(tmp_path)])
    assert asked["size"] == GRID_RECIPE and list(asked["arms"]) == ["regret"]
    assert (GRID_RECIPE.sft_steps, GRID_RECIPE.teacher_reasons) == (30, "verdict")
    recipe.main(["--board", "grid", "--teacher-reasons", "threats", "--opponents", "optimal",
                 "imperfect", "--arms", "fading_hints", "--out", str(tmp_path)])  # fmt: skip
    stated = asked["size"]
    assert (stated.teacher_reasons, stated.max_tokens) == ("threats", 64)
    assert stated.eval_opponents == ("optimal", "imperfect")
    recipe.main(["--board", "threats", "--max-tokens", "48", "--out", str(tmp_path)])
    assert asked["size"].board == "threats" and list(asked["arms"]) == ["regret"]
    # the grid board's evaluation games show no threats line, against every opponent
    for opponent in ("optimal", "random", "imperfect"):
        env = evaluation_env(opponent, stated)
        for i in range(len(env)):
            prompt = env.example(i).prompt
            assert "can win at" not in prompt[1]["content"]
            assert "No line has two" not in prompt[1]["content"]
            assert "A line after the board" not in prompt[0]["content"]


def test_the_arms_table_has_the_start_and_each_arm_over_seeds():
    from rlve.experiments.curriculum_arms import arms_table, highest_solved

    def run(arm, ratio, acc0, high=math.nan, mixed=math.nan):
        scores = {"acc d=0": acc0, "acc d=1": 0.0, "acc d=2": 0.0, "acc d=3": 0.0}
        start = {**scores, "acc d=0": 0.5}
        summary = {"effective prompt ratio": ratio, "mixed outcome ratio": mixed,
                   "final high": high}  # fmt: skip
        return RunResult(arm, 0, start, scores, summary, 1.0, {})

    # the first adaptive run is from before the mixed outcome ratio was measured
    results = [run("adaptive", 0.3, 0.5, 2.0), run("adaptive", 0.4, 0.7, 3.0, 0.25),
               run("static", 0.2, 0.4)]  # fmt: skip
    lines = arms_table(results).splitlines()
    assert lines[2] == "| SFT start | - | - | - | - | 0 | 0.50 | 0.00 | 0.00 | 0.00 |"
    adaptive = (
        "| adaptive | 2 | 0.35 [0.30-0.40] | 0.25 (1 of 2 seeds) | 2, 3 | 0, 0 | 0.60 [0.50-0.70] |"
    )
    assert lines[3].startswith(adaptive)
    assert lines[4].startswith("| static | 1 | 0.20 | - | - | none | 0.40 |")
    assert highest_solved({0: 0.9, 1: 0.5, 2: 0.4}) == 1


def test_the_smollm2_curriculum_arms_differ_only_in_how_levels_are_drawn(tmp_path):
    from dataclasses import asdict

    from rlve.experiments.curriculum_arms import SETUPS
    from rlve.experiments.curriculum_arms import experiment as curriculum

    setup = SETUPS["smollm2"]
    runs = curriculum(setup)
    adaptive, static = (asdict(load_run_config(run_overrides(runs, arm, tmp_path, 1, tmp_path)))
                        for arm in runs.arms)  # fmt: skip
    assert adaptive["env"]["names"] == static["env"]["names"] == [setup.env]
    assert adaptive["env"]["curriculum"]["enabled"] and not static["env"]["curriculum"]["enabled"]
    assert static["env"]["default_args"]["difficulties"] == list(setup.eval_difficulties)
    for section in ("trainer", "rollout", "inference"):
        assert adaptive[section] == static[section]


def sorts_up_to_five(messages) -> str:
    """A scripted solver of rlve/sorting_fine that sorts lists of at most five numbers."""
    numbers = [int(n) for n in messages[-1]["content"].splitlines()[1].split()]
    answer = sorted(numbers) if len(numbers) <= 5 else numbers
    return f"<answer>{' '.join(map(str, answer))}</answer>"


def test_the_curriculum_scores_accuracy_at_each_evaluated_level():
    from dataclasses import replace

    from rlve.experiments.curriculum_arms import SETUPS, accuracy_by_difficulty
    from rlve.inference.scripted import ScriptedEngine

    setup = replace(SETUPS["smollm2"], eval_problems=8)
    accuracy = accuracy_by_difficulty(ScriptedEngine(sorts_up_to_five), setup, 1.0, 48)
    assert accuracy == {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0}  # 3, 4, 5 numbers; 6 and 7


def test_the_sft_student_learns_only_the_teacher_s_best_moves_and_is_keyed_by_it(
    tmp_path, monkeypatch
):
    import rlve.training.sft as sft

    asked = {}

    def teacher_data(tokenizer, games, **kwargs):
        asked.update(kwargs)
        raise InterruptedError("enough: the arguments are what this test reads")

    monkeypatch.setattr(sft, "tictactoe_teacher_data", teacher_data)
    monkeypatch.setattr("rlve.models.load_tokenizer", lambda name: None)
    with pytest.raises(InterruptedError):
        sft_student(tmp_path, RECIPE)
    assert asked["best_moves_only"] is True and "sft_best_moves_only" in SFT_FIELDS


def test_mistakes_per_chance_and_the_stated_threats_reach_the_table():
    from rlve.experiments.recipe import mistake_rates

    # per game: 0.3 missed blocks of 0.6 chances, no fork was ever possible
    summary = {"game/missed_block": 0.3, "game/missed_block_chances": 0.6,
               "game/missed_win": 0.1, "game/missed_win_chances": 0.4,
               "game/fork_allowed": 0.0, "game/fork_allowed_chances": 0.0}  # fmt: skip
    assert mistake_rates(summary) == {"game/missed_block_rate": 0.5, "game/missed_win_rate": 0.25}
    stage = {**scores(0.5, 0.2), "optimal/game/threats_stated_right": 0.9,
             "random/game/threats_stated_right": 0.8,
             "optimal/game/missed_block_rate": 0.5}  # fmt: skip
    table = results_table([RunResult("threats_reward", 0, stage, stage, {}, 1.0, {})],
                          scores(0.6, 0.0), 200)  # fmt: skip
    header, _, teacher, sft, rl = ([c.strip("| ") for c in line.split(" | ")]
                                   for line in table.splitlines())  # fmt: skip
    column = header.index("threats stated right % (opt/rand)")
    assert rl[column] == "90.0 (85-93) / 80.0 (74-85)" and teacher[column] == "- / -"
    blocks = header.index("vs optimal: wins / blocks / forks missed, % of chances")
    assert sft[blocks] == "- / 50.0 (43-57) / -"
    assert "vs 30%-random W/D/L %" not in header  # no stage played the imperfect opponent
