"""A loss from outside rlve, named by import path, trains the real trainer: REINFORCE written by a
user equals CISPO on-policy (its capped weight is exactly 1 when the ratio is 1), so one step of
each from the same weights gives the same loss and the same gradient norm."""

import textwrap

import pytest
from test_trainer import two_groups

from rlve.config import TrainerConfig
from rlve.training.trainer import Trainer

USER_LOSSES = """
import torch

from rlve.algorithms import LossTerms, register_loss, token_mean


@register_loss(aggregation="token", uses=("num_tokens",))
def reinforce(logp, old_logp, advantages, mask, token_weight, *, num_tokens):
    loss = token_mean(-advantages * logp * token_weight, mask, num_tokens)
    return LossTerms(loss, torch.zeros_like(mask), torch.zeros_like(mask))


def undecorated(logp, old_logp, advantages, mask, token_weight):
    raise AssertionError("never called")
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_losses.py").write_text(textwrap.dedent(USER_LOSSES))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_losses"


def test_a_user_loss_by_import_path_trains_one_step_as_its_builtin_twin(user_module):
    metrics = {}
    for loss in (f"{user_module}:reinforce", "cispo"):
        trainer = Trainer(TrainerConfig(loss=loss, lr=1e-3, seed=0, old_logprobs="recompute"))
        metrics[loss] = trainer.train_step(two_groups())
    user, builtin = metrics[f"{user_module}:reinforce"], metrics["cispo"]
    assert user["train/num_tokens"] == builtin["train/num_tokens"] == 24
    # the same sums in the same order: equal to float32 rounding of the last step of each
    assert user["train/loss"] == pytest.approx(builtin["train/loss"], rel=1e-6, abs=1e-7)
    assert user["train/grad_norm"] == pytest.approx(builtin["train/grad_norm"], rel=1e-5)
    assert user["train/grad_norm"] > 0


def test_an_import_path_to_an_undecorated_or_missing_loss_is_refused_at_start(user_module):
    with pytest.raises(ValueError, match="trainer.loss: loss 'my_losses:undecorated' is not "
                                         "decorated with @register_loss"):  # fmt: skip
        TrainerConfig(loss=f"{user_module}:undecorated").validate()
    with pytest.raises(ValueError, match="cannot be imported: .*no_such"):
        TrainerConfig(loss=f"{user_module}:no_such").validate()
    with pytest.raises(ValueError, match=r"unknown loss 'ppo': use one of \['cispo'"):
        TrainerConfig(loss="ppo").validate()
