"""A loss chosen by `trainer.loss=X` or by `algorithm=X` is the same run, with X's own settings
(its registration's defaults); explicit settings win; one the loss does not read is refused;
choices that depart from the loss's definition are said at start."""

import logging
import textwrap
from dataclasses import asdict

import pytest

from rlve.algorithms import LOSSES
from rlve.config import RolloutConfig, RunConfig, TrainerConfig
from rlve.config.loss_settings import warn_about_loss_departures
from rlve.train import CONFIG_DIR, load_run_config

DEFINITIONS = {
    # loss: (eps_low, eps_high, is_cap, std_normalize, dynamic_sampling), from the papers
    "cispo": (None, None, 5.0, False, False),  # MiniMax-M1: a capped weight, no clip range
    "dapo": (0.2, 0.28, None, True, True),  # clip-higher and dynamic sampling
    "dppo_kl": (0.05, 0.05, 10.0, False, False),  # the paper's KL threshold, Stable-RL's cap
    "dppo_tv": (0.15, 0.15, 10.0, False, False),  # the paper's TV threshold
    "dr_grpo": (0.2, 0.2, None, False, False),  # GRPO's clip, no std division
    "gmpo": (0.4, 0.4, None, True, False),  # bounds of the log-ratio
    "grpo": (0.2, 0.2, None, True, False),
    "gspo": (3e-4, 4e-4, None, True, False),  # a sequence ratio's range
}


def settings(config: RunConfig) -> tuple:
    t = config.trainer
    return (t.eps_low, t.eps_high, t.is_cap, t.std_normalize, config.rollout.dynamic_sampling)


def test_every_registered_loss_has_an_algorithm_config():
    assert sorted(LOSSES) == sorted(p.stem for p in (CONFIG_DIR / "algorithm").glob("*.yaml"))


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_loss_by_name_and_by_algorithm_is_the_same_run_with_its_own_settings(loss):
    by_name = load_run_config([f"trainer.loss={loss}"])
    by_algorithm = load_run_config([f"algorithm={loss}"])
    assert asdict(by_name.trainer) == asdict(by_algorithm.trainer)
    assert asdict(by_name.rollout) == asdict(by_algorithm.rollout)
    assert settings(by_name) == DEFINITIONS[loss]


def test_explicit_settings_win_over_the_losss_own():
    for route in ("trainer.loss=grpo", "algorithm=grpo"):
        config = load_run_config([route, "trainer.eps_high=0.3"])
        assert (config.trainer.eps_low, config.trainer.eps_high) == (0.2, 0.3)
    config = load_run_config(["algorithm=dapo", "rollout.dynamic_sampling=false"])
    assert config.rollout.dynamic_sampling is False
    config = load_run_config(["trainer.loss=grpo", "trainer.std_normalize=false"])
    assert config.trainer.std_normalize is False


def test_an_experiment_keeps_its_loss_and_its_own_settings():
    # rlve_gym_dapo: DAPO's clip from the loss, the RLVE paper's TIS cap 2 from the experiment
    config = load_run_config(["+experiment=rlve_gym_dapo"])
    assert settings(config) == DEFINITIONS["dapo"] and config.trainer.tis_cap == 2.0
    # tictactoe_cispo with trainer.loss=grpo: GRPO's settings, not CISPO's
    config = load_run_config(["+experiment=tictactoe_cispo", "trainer.loss=grpo"])
    assert settings(config) == DEFINITIONS["grpo"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.loss=grpo", "trainer.is_cap=3"],
         r"trainer.is_cap=3.0 is not read by trainer.loss='grpo' \(of eps_low, eps_high and "
         r"is_cap it reads \['eps_low', 'eps_high'\]\)"),
        (["algorithm=cispo", "trainer.eps_high=0.28"],
         r"trainer.eps_high=0.28 is not read by trainer.loss='cispo' .* reads \['is_cap'\]"),
    ],
)  # fmt: skip
def test_a_hyper_parameter_the_loss_does_not_read_is_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_run_config(overrides)


USER_LOSSES = """
import torch

from rlve.algorithms import LossTerms, register_loss


@register_loss(aggregation="token", uses=("eps_low", "eps_high"),
               defaults={"eps_high": 0.5, "std_normalize": True, "dynamic_sampling": True})
def wide(logp, old_logp, advantages, mask, token_weight, *, eps_low, eps_high):
    return LossTerms(-(advantages * logp).sum(), torch.zeros_like(mask), torch.zeros_like(mask))


@register_loss(aggregation="token", uses=("is_cap",))
def plain(logp, old_logp, advantages, mask, token_weight, *, is_cap):
    return LossTerms(-(advantages * logp).sum(), torch.zeros_like(mask), torch.zeros_like(mask))
"""


def test_a_users_loss_takes_its_registered_defaults_else_the_generic_ones(tmp_path, monkeypatch):
    (tmp_path / "my_settings_losses.py").write_text(textwrap.dedent(USER_LOSSES))
    monkeypatch.syspath_prepend(str(tmp_path))
    wide = load_run_config(["trainer.loss=my_settings_losses:wide"])
    assert settings(wide) == (0.2, 0.5, None, True, True)  # eps_low generic, the rest its own
    plain = load_run_config(["trainer.loss=my_settings_losses:plain"])
    assert settings(plain) == (None, None, 5.0, False, False)  # generic


def departures(caplog, **trainer) -> list[str]:
    rollout = trainer.pop("rollout", {})
    config = RunConfig(trainer=TrainerConfig(**trainer),
                       rollout=RolloutConfig(engine="scripted", **rollout))  # fmt: skip
    config.validate()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlve.config.loss_settings"):
        found = warn_about_loss_departures(config)
    assert [r.getMessage() for r in caplog.records] == found
    return found


def test_settings_that_depart_from_the_losss_definition_are_warned_about(caplog):
    assert departures(caplog, loss="grpo") == []  # GRPO as defined
    assert departures(caplog, loss="grpo", std_normalize=False) == [
        "trainer.std_normalize=False with trainer.loss=grpo: grpo's definition divides a "
        "group's advantages by the group's reward std; without it they are Dr. GRPO's (Liu et "
        "al. 2025): a Dr. GRPO-like run"
    ]
    (found,) = departures(caplog, loss="grpo", eps_high=0.28)
    assert found.startswith("trainer.eps_low=0.2, trainer.eps_high=0.28 with trainer.loss=grpo")
    assert "DAPO's clip-higher" in found
    (found,) = departures(caplog, loss="dr_grpo", std_normalize=True)
    assert found.startswith("trainer.std_normalize=True with trainer.loss=dr_grpo")
    (found,) = departures(caplog, loss="dapo", eps_high=0.2)
    assert found.startswith("trainer.eps_low=0.2, trainer.eps_high=0.2 with trainer.loss=dapo")
    (found,) = departures(caplog, loss="dapo", rollout={"dynamic_sampling": False})
    assert found.startswith("rollout.dynamic_sampling=False with trainer.loss=dapo")
    # CISPO with dynamic sampling (the RLVE recipe's rlve_gym_cispo) departs from nothing
    assert departures(caplog, loss="cispo", rollout={"dynamic_sampling": True}) == []
