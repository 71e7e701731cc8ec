"""The recipe's table: mean and range over seeds, per stage and opponent."""

from rlve.cli.recipe import DEMO, RECIPE, results_table, rl_overrides
from rlve.train import load_run_config


def summary(win, draw, loss, invalid, fmt=1.0):
    return {"game/win": win, "game/draw": draw, "game/loss": loss, "game/invalid": invalid,
            "game/invalid_moves": 3 * invalid, "game/format": fmt}  # fmt: skip


def result(draw_vs_optimal, invalid):
    stage = {"optimal": summary(0.0, draw_vs_optimal, 1 - draw_vs_optimal, invalid),
             "random": summary(0.8, 0.1, 0.1, invalid / 2)}  # fmt: skip
    return {"teacher": stage, "sft": stage, "rl": stage}


def test_the_table_shows_the_mean_and_the_range_over_seeds():
    table = results_table([result(0.5, 0.2), result(0.7, 0.4)]).splitlines()
    assert table[0].startswith("| model | vs optimal W/D/L % | vs random W/D/L %")
    assert [row.split(" | ")[0] for row in table[2:]] == ["| teacher", "| SFT student",
                                                          "| RL student"]  # fmt: skip
    cells = table[2].split(" | ")
    assert cells[1] == "0.0 [0.0-0.0] / 60.0 [50.0-70.0] / 40.0 [30.0-50.0]"
    assert cells[3] == "30.0 [20.0-40.0] / 15.0 [10.0-20.0]"  # invalid: optimal / random
    assert cells[4] == "0.90 [0.60-1.20] / 0.45 [0.30-0.60]"  # invalid moves per game


def test_one_seed_shows_plain_numbers():
    assert "| 0.0 / 50.0 / 50.0 |" in results_table([result(0.5, 0.2)])


def test_the_rl_run_is_the_cispo_experiment_scaled_down(tmp_path):
    config = load_run_config(rl_overrides(tmp_path / "model", tmp_path / "rl", RECIPE, seed=2))
    config.validate()
    assert config.trainer.loss == "cispo" and not config.trainer.lora.enabled
    assert config.trainer.max_steps == RECIPE.rl_steps and config.env.seed == 2
    assert config.env.args["tictactoe"]["seed"] == 2
    assert config.env.args["tictactoe"]["invalid_penalty"] == "per_move"
    assert config.rollout.groups_per_step * config.rollout.group_size == 128
    assert DEMO.rl_steps < RECIPE.rl_steps and DEMO.sft_steps < RECIPE.sft_steps


def test_the_arms_table_has_the_start_and_each_arm_over_seeds():
    from rlve.cli.curriculum_arms import arms_table, highest_solved

    def run(arm, ratio, acc0):
        accuracy = {"0": acc0, "1": 0.0, "2": 0.0, "3": 0.0}
        return {"arm": arm, "effective_prompt_ratio": ratio, "accuracy": accuracy}

    results = [run("adaptive", 0.3, 0.5), run("adaptive", 0.4, 0.7), run("static", 0.2, 0.4)]
    lines = arms_table(results, {"0": 0.5, "1": 0.0, "2": 0.0, "3": 0.0}).splitlines()
    assert lines[2] == "| SFT start | - | - | 0 | 0.50 | 0.00 | 0.00 | 0.00 |"
    assert lines[3].startswith("| adaptive | 2 | 0.35 [0.30-0.40] | 0, 0 | 0.60 [0.50-0.70] |")
    assert lines[4].startswith("| static | 1 | 0.20 [0.20-0.20] | none | 0.40 [0.40-0.40] |")
    assert highest_solved({"0": 0.9, "1": 0.5, "2": 0.4}) == 1
