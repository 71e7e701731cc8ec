"""Losses by name: the built-ins say how they aggregate and what they read, and a loss is given
exactly the hyper-parameters it declares."""

import pytest
import torch

from rlve.algorithms import LOSSES, LossTerms, find_loss, register_loss


def test_the_builtins_declare_their_aggregation_and_arguments():
    declared = {name: (loss.aggregation, loss.uses) for name, loss in LOSSES.items()}
    assert declared == {
        "grpo": ("sequence", ("eps_low", "eps_high", "sequence_ids")),
        "dapo": ("token", ("eps_low", "eps_high", "num_tokens")),
        "cispo": ("token", ("is_cap", "num_tokens")),
        "dr_grpo": ("sequence", ("eps_low", "eps_high", "length_norm", "sequence_ids")),
        "gspo": ("sequence", ("eps_low", "eps_high", "sequence_ids")),
        "gmpo": ("sequence", ("eps_low", "eps_high", "sequence_ids")),
        "dppo_tv": ("token", ("eps_low", "eps_high", "is_cap", "num_tokens")),
        "dppo_kl": ("token", ("eps_low", "eps_high", "is_cap", "num_tokens")),
    }
    assert find_loss("cispo") is LOSSES["cispo"]
    assert find_loss("rlve.algorithms.losses:cispo_loss") is LOSSES["cispo"]


def test_a_loss_gets_only_the_hyper_parameters_it_uses():
    seen = {}

    @register_loss(aggregation="token", uses=("is_cap",))
    def capped(logp, old_logp, advantages, mask, token_weight, *, is_cap):
        seen["is_cap"] = is_cap
        return LossTerms(logp.sum(), mask, mask)

    ones = torch.ones(2, 4)
    capped.rlve_loss(ones, ones, ones, ones.bool(), ones, eps_low=0.2, eps_high=0.28,
                     is_cap=5.0, num_tokens=8, sequence_ids=None)  # fmt: skip
    assert seen == {"is_cap": 5.0}
    assert capped.rlve_loss.name.endswith(":test_a_loss_gets_only_the_hyper_parameters_it_uses"
                                          ".<locals>.capped")  # fmt: skip
    assert "capped" not in LOSSES  # registered by path only: no name was given


def test_bad_registrations_are_refused_by_name():
    with pytest.raises(ValueError, match=r"aggregation must be one of \['token', 'sequence'\]"):
        register_loss(aggregation="batch")
    with pytest.raises(ValueError, match=r"\['temperature'\] are not among them"):
        register_loss(aggregation="token", uses=("temperature",))
    with pytest.raises(ValueError, match=r"says it uses \['num_tokens'\], but takes no such"):
        register_loss(aggregation="token", uses=("num_tokens",))(lambda *tensors: None)
    with pytest.raises(ValueError, match="a loss named 'cispo' is registered already"):
        register_loss("cispo", aggregation="token")(lambda *tensors: None)


def test_the_docstring_example_runs_as_a_module_and_computes_reinforce(tmp_path, monkeypatch):
    """rlve/algorithms/loss_registry.py's example (CONTRIBUTING.md points to it), written to a
    module of its own and found by import path as `trainer.loss=module:function` finds it."""
    import sys
    import textwrap

    from rlve.algorithms import loss_registry

    doc = loss_registry.__doc__
    example = textwrap.dedent(doc[doc.index("\n    import torch") :])
    (tmp_path / "docs_example_losses.py").write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "docs_example_losses", raising=False)
    loss = find_loss("docs_example_losses:reinforce")
    assert (loss.aggregation, loss.uses) == ("token", ("num_tokens",))

    logp = torch.tensor([[-1.0, -2.0], [-0.5, -4.0]], requires_grad=True)
    advantages = torch.tensor([[1.0, 1.0], [-2.0, -2.0]])
    mask = torch.tensor([[True, True], [True, False]])
    terms = loss(logp, logp.detach(), advantages, mask, torch.ones(2, 2), eps_low=0.2,
                 eps_high=0.28, is_cap=5.0, num_tokens=3, sequence_ids=None)  # fmt: skip
    # -A * logp over the 3 masked tokens: (1 * 1 + 1 * 2 - 2 * 0.5) / 3 = 2/3; the 4th is masked
    assert terms.loss.item() == pytest.approx(2 / 3)
    terms.loss.backward()  # d/dlogp = -A / 3 where masked
    assert logp.grad.flatten().tolist() == pytest.approx([-1 / 3, -1 / 3, 2 / 3, 0.0])
    assert not terms.clipped_low.any() and not terms.clipped_high.any()
    monkeypatch.delitem(sys.modules, "docs_example_losses")


def test_a_losss_defaults_name_settings_it_has_and_reads():
    with pytest.raises(
        ValueError, match=r"defaults are of \['eps_low', .*\['oversample'\] are not"
    ):
        register_loss(aggregation="token", defaults={"oversample": 3.0})
    with pytest.raises(
        ValueError, match=r"defaults \['is_cap'\] are for hyper-parameters the loss"
    ):
        register_loss(aggregation="token", uses=("eps_low",), defaults={"is_cap": 2.0})


def test_a_losss_settings_are_its_defaults_over_the_generic_ones():
    # grpo fixes the clip and std_normalize; it reads no is_cap; dynamic sampling stays generic
    assert LOSSES["grpo"].settings() == {
        "eps_low": 0.2, "eps_high": 0.2, "is_cap": None, "std_normalize": True,
        "dynamic_sampling": False,
    }  # fmt: skip
