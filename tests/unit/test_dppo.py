"""DPPO's masks and loss (rlve/algorithms/dppo.py), on batches whose probabilities a reader can
follow by hand. Probabilities are given, log-probs taken of them in float64, so every comparison
below is exact or within float64 rounding of a handful of operations."""

import math

import pytest
import torch

from rlve.algorithms import LOSSES, dppo_outside, policy_loss
from rlve.algorithms.dppo import binary_kl


def batch(mu: list[float], pi: list[float], advantages: list[float]):
    """One row: a prompt token (masked out) and then one sampled token per probability pair."""
    old = torch.tensor([[0.0] + [math.log(m) for m in mu]], dtype=torch.float64)
    logp = torch.tensor([[0.0] + [math.log(p) for p in pi]], dtype=torch.float64,
                        requires_grad=True)  # fmt: skip
    adv = torch.tensor([[0.0, *advantages]], dtype=torch.float64)
    mask = torch.tensor([[False] + [True] * len(mu)])
    return logp, old, adv, mask


def test_the_tv_mask_judges_the_move_not_the_ratio():
    # a rare token that rose a little (ratio 5), a common one that rose a lot (ratio 1.27),
    # one that fell a lot with A < 0, and one that fell a lot with A > 0 (back towards mu: kept)
    mu, pi = [0.01, 0.6, 0.7, 0.7], [0.05, 0.76, 0.5, 0.5]
    logp, old, adv, mask = batch(mu, pi, [1.0, 1.0, -1.0, 1.0])
    fell, rose = dppo_outside(logp, old, adv, mask, divergence="tv", eps_low=0.15, eps_high=0.15)
    assert rose[0].tolist() == [False, False, True, False, False]  # 0.76 - 0.6 = 0.16 > 0.15
    assert fell[0].tolist() == [False, False, False, True, False]  # 0.7 - 0.5 = 0.2 > 0.15
    # DAPO's clip (0.2 / 0.28) on the same tokens: drops the rare one, keeps the common one
    _, dapo = policy_loss("dapo", logp, old, adv, mask, eps_low=0.2, eps_high=0.28)
    _, dppo = policy_loss("dppo_tv", logp, old, adv, mask, eps_low=0.15, eps_high=0.15)
    assert dapo.clip_frac_high == 0.25 and dppo.clip_frac_high == 0.25  # one token of four each,
    clipped_by_dapo = torch.exp(logp - old)[0, 1] > 1.28  # ... but not the same one
    assert bool(clipped_by_dapo) and not bool(rose[0, 1])


def test_the_kl_mask_by_hand():
    # mu 0.5 -> pi 0.6: D = 0.5 ln(0.5/0.6) + 0.5 ln(0.5/0.4) = 0.0204 (kept at 0.05);
    # mu 0.5 -> pi 0.7: D = 0.5 ln(0.5/0.7) + 0.5 ln(0.5/0.3) = 0.0872 (masked with A > 0,
    # kept with A < 0: a move against the advantage is never masked)
    mu, pi = (
        torch.tensor([0.5, 0.5], dtype=torch.float64),
        torch.tensor([0.6, 0.7], dtype=torch.float64),
    )
    expected = [0.5 * math.log(0.5 / 0.6) + 0.5 * math.log(0.5 / 0.4),
                0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / 0.3)]  # fmt: skip
    # BINARY_KL_EPS (1e-8) inside the second log moves it by (1 - mu) eps |1/(1-mu) - 1/(1-pi)|,
    # under 1e-8 here
    assert binary_kl(mu, pi).tolist() == pytest.approx(expected, abs=1e-8)
    logp, old, adv, mask = batch([0.5, 0.5, 0.5], [0.6, 0.7, 0.7], [1.0, 1.0, -1.0])
    fell, rose = dppo_outside(logp, old, adv, mask, divergence="kl", eps_low=0.05, eps_high=0.05)
    assert rose[0].tolist() == [False, False, True, False]
    assert not fell.any()


def test_the_loss_and_its_gradient_by_hand():
    # tokens: (mu 0.5, pi 0.55, A 2) kept, ratio 1.1; (mu 0.2, pi 0.4, A 1) masked (0.2 > 0.15);
    # (mu 0.1, pi 0.9, A -1) kept (rose against a negative advantage), ratio 9 under the cap 10
    logp, old, adv, mask = batch([0.5, 0.2, 0.1], [0.55, 0.4, 0.9], [2.0, 1.0, -1.0])
    loss, stats = policy_loss("dppo_tv", logp, old, adv, mask, eps_low=0.15, eps_high=0.15,
                              is_cap=10.0)  # fmt: skip
    expected = (-2.0 * 1.1 * math.log(0.55) + 1.0 * 9.0 * math.log(0.9)) / 3  # masked one counts
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([0.0, -2.0 * 1.1 / 3, 0.0, 9.0 / 3], rel=1e-12)
    assert stats.clip_frac_high == pytest.approx(1 / 3)


def test_the_ratio_is_capped_and_the_cap_is_its_own():
    logp, old, adv, mask = batch([0.01], [0.1], [1.0])  # ratio 10, a move of 0.09 (kept)
    loss, _ = policy_loss("dppo_tv", logp, old, adv, mask, eps_low=0.15, eps_high=0.15,
                          is_cap=4.0)  # fmt: skip
    assert loss.item() == pytest.approx(-4.0 * math.log(0.1), rel=1e-12)
    for name, delta in (("dppo_tv", 0.15), ("dppo_kl", 0.05)):
        settings = LOSSES[name].settings()
        assert [settings[k] for k in ("eps_low", "eps_high", "is_cap")] == [delta, delta, 10.0]


def test_an_unknown_divergence_is_refused_by_name():
    logp, old, adv, mask = batch([0.5], [0.5], [1.0])
    with pytest.raises(ValueError, match="'tv' or 'kl'"):
        dppo_outside(logp, old, adv, mask, divergence="js", eps_low=0.1, eps_high=0.1)
