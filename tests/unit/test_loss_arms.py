"""The loss comparison's arms, per-run numbers and table (the runs are the curriculum's)."""

import math

import pytest

from rlve.experiments.experiment import RunResult
from rlve.experiments.loss_arms import LOSSES, loss_arm, losses_table, run_means
from rlve.train import load_run_config


@pytest.mark.parametrize("loss", LOSSES)
def test_every_arm_trains_its_loss_on_the_same_rollouts_against_the_sampler(loss):
    config = load_run_config(list(loss_arm(loss).overrides))
    assert config.trainer.loss == loss
    assert config.trainer.old_logprobs == "sampler"
    assert config.trainer.tis_cap is None
    assert not config.rollout.dynamic_sampling
    assert (config.rollout.groups_per_step, config.rollout.group_size) == (8, 8)
    assert config.trainer.max_steps == 40


def test_the_paired_gspo_arm_corrects_the_sampler_apart_from_its_ratio():
    config = load_run_config(list(loss_arm("gspo_recompute").overrides))
    assert (config.trainer.loss, config.trainer.eps_low, config.trainer.eps_high) == (
        "gspo", 3e-4, 4e-4)  # fmt: skip
    assert config.trainer.old_logprobs == "recompute"
    assert (config.trainer.tis_cap, config.trainer.tis_level) == (2.0, "geometric")
    assert (config.rollout.groups_per_step, config.rollout.group_size) == (8, 8)


def test_run_means_average_every_step_and_the_reward_over_the_last_five():
    ratios = {"train/ratio_min": 0.5, "train/ratio_max": 1.5, "train/sequence_ratio_min": 0.9}
    rows = [{"train/clip_frac": 0.01 * i, "reward/mean": float(i), **ratios} for i in range(10)]
    means = run_means(rows)
    assert means["clipped tokens %"] == pytest.approx(4.5)  # 100 x mean(0.00 .. 0.09)
    assert means["reward, last 5 steps"] == pytest.approx(7.0)  # mean(5 .. 9)
    assert (means["token ratio min"], means["token ratio max"]) == (0.5, 1.5)
    assert means["sequence ratio min"] == 0.9
    assert math.isnan(means["sequence ratio max"])  # never logged


def result(loss: str, seed: int, after0: float, clip: float, minutes: float) -> RunResult:
    summary = {"clipped tokens %": clip, "token ratio min": 0.6, "token ratio max": 1.4,
               "sequence ratio min": math.nan, "reward, last 5 steps": 0.5}  # fmt: skip
    before = {"acc d=0": 0.1, "acc d=1": 0.0, "acc d=2": 0.0}
    after = {"acc d=0": after0, "acc d=1": 0.2, "acc d=2": 0.0}
    return RunResult(loss, seed, before, after, summary, minutes, {})


def test_the_table_shows_the_levels_some_run_learned_with_the_spread_over_seeds():
    results = [result("cispo", 0, 0.5, 0.0, 18.0), result("cispo", 1, 0.6, 0.0, 20.0),
               result("grpo", 0, 0.4, 3.0, 19.0)]  # fmt: skip
    lines = losses_table(results).splitlines()
    assert lines[0].startswith("| loss | seeds | acc d=0 | acc d=1 | clipped tokens % |")
    assert lines[2] == "| SFT start | - | 0.10 | 0.00 | - | - | - | - | - | - | - | - |"
    # "-": a column a run has as nan (sequence ratio min) or lacks (stored before it existed,
    # or the sampler correction, which these arms leave off)
    assert lines[3] == (
        "| cispo | 2 | 0.55 [0.50-0.60] | 0.20 [0.20-0.20] | 0.00 [0.00-0.00] "
        "| 0.60 [0.60-0.60] | 1.40 [1.40-1.40] | - | - | - | 0.50 [0.50-0.50] | 19 [18-20] |"
    )
    assert lines[4] == "| grpo | 1 | 0.40 | 0.20 | 3.00 | 0.60 | 1.40 | - | - | - | 0.50 | 19 |"


def test_an_arm_with_extra_overrides_gets_its_own_label_and_folder():
    arm = loss_arm("dppo_tv", ("trainer.mini_batches=4",), "mb4")
    assert arm.name == "dppo_tv_mb4"
    assert arm.overrides[-2:] == ("logging.wandb_mode=disabled", "trainer.mini_batches=4")
    assert loss_arm("cispo").name == "cispo"
