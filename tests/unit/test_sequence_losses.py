"""GSPO and GMPO on a 2 x 4 batch worked by hand, packed rows, and the edge cases.

Row 0 trains 3 tokens with log-ratios (logp - old_logp) 0.3, -0.1, 0.1 (mean 0.1) and A = 1;
row 1 trains 2 tokens with -0.2, -0.6 (mean -0.4) and A = -1.
"""

import math

import pytest
import torch

from rlve.algorithms import policy_loss

MASK = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 0]], dtype=torch.bool)
LOG_RATIO = torch.tensor([[0.0, 0.3, -0.1, 0.1], [0.0, -0.2, -0.6, 0.0]], dtype=torch.float64)
ADVANTAGES = torch.tensor([1.0, -1.0], dtype=torch.float64)


def batch():
    old = torch.full((2, 4), -1.0, dtype=torch.float64)
    logp = (old + LOG_RATIO).requires_grad_()
    return logp, old


def test_gspo_clips_the_sequence_ratio_by_hand():
    # s0 = e^0.1 = 1.10517, inside [0.8, 1.2]: -s0 * 1. s1 = e^-0.4 = 0.67032 < 0.8 with A < 0:
    # -min(-0.67032, -0.8) = 0.8, clipped. Loss (-1.10517 + 0.8) / 2 = -0.152585.
    # d/dlogp of row 0's tokens: -(s0 / 3) / 2 = -0.184195 each; row 1 is clipped: 0.
    logp, old = batch()
    loss, stats = policy_loss("gspo", logp, old, ADVANTAGES, MASK, eps_low=0.2, eps_high=0.2)
    loss.backward()
    assert loss.item() == pytest.approx((0.8 - math.exp(0.1)) / 2)
    expected = -math.exp(0.1) / 6
    assert logp.grad.flatten().tolist() == pytest.approx(
        [0, expected, expected, expected, 0, 0, 0, 0]
    )
    assert (stats.clip_frac_low, stats.clip_frac_high) == (pytest.approx(2 / 5), 0.0)
    # the sequence ratios' spread, logged for every loss: e^-0.4 and e^0.1
    assert stats.sequence_ratio_min == pytest.approx(math.exp(-0.4))
    assert stats.sequence_ratio_max == pytest.approx(math.exp(0.1))


def test_gmpo_clips_each_token_in_log_space_inside_the_geometric_mean_by_hand():
    # eps 0.4: row 0's log-ratios are inside [-0.4, 0.4], so its term is -1 * e^0.1. Row 1 has
    # A < 0, so each log-ratio is max(l, clip(l)): -0.2 and max(-0.6, -0.4) = -0.4 (clipped);
    # mean -0.3, term -(-1) * e^-0.3 = 0.740818. Loss (-1.10517 + 0.740818) / 2 = -0.182176.
    # Gradients: row 0 -(e^0.1 / 3) / 2 = -0.184195 each; row 1's first token (e^-0.3 / 2) / 2
    # = 0.185205, its clipped second token 0.
    logp, old = batch()
    loss, stats = policy_loss("gmpo", logp, old, ADVANTAGES, MASK, eps_low=0.4, eps_high=0.4)
    loss.backward()
    assert loss.item() == pytest.approx((math.exp(-0.3) - math.exp(0.1)) / 2)
    row0, row1 = -math.exp(0.1) / 6, math.exp(-0.3) / 4
    assert logp.grad.flatten().tolist() == pytest.approx([0, row0, row0, row0, 0, row1, 0, 0])
    assert (stats.clip_frac_low, stats.clip_frac_high) == (pytest.approx(1 / 5), 0.0)


@pytest.mark.parametrize("kind", ["gspo", "gmpo"])
def test_packed_rows_give_the_loss_and_gradient_of_one_row_per_sequence(kind):
    logp, old = batch()
    loss, _ = policy_loss(kind, logp, old, ADVANTAGES, MASK, eps_low=0.2, eps_high=0.2)
    loss.backward()
    # the two sequences side by side in one row: positions 0-3 are sequence 0, 4-7 sequence 1
    packed_old = old.reshape(1, 8)
    packed = (packed_old + LOG_RATIO.reshape(1, 8)).requires_grad_()
    ids = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])
    packed_loss, _ = policy_loss(kind, packed, packed_old, ADVANTAGES.repeat_interleave(4)[None],
                                 MASK.reshape(1, 8), eps_low=0.2, eps_high=0.2,
                                 sequence_ids=ids)  # fmt: skip
    packed_loss.backward()
    assert packed_loss.item() == pytest.approx(loss.item(), abs=1e-15)
    assert packed.grad.flatten().tolist() == pytest.approx(logp.grad.flatten().tolist(), abs=1e-15)


@pytest.mark.parametrize("kind", ["gspo", "gmpo"])
def test_a_sequence_without_trained_tokens_is_left_out_of_the_mean(kind):
    logp, old = batch()
    loss, _ = policy_loss(kind, logp, old, ADVANTAGES, MASK, eps_low=0.2, eps_high=0.2)
    three = torch.cat([logp.detach(), old[:1]]).requires_grad_()
    mask = torch.cat([MASK, torch.zeros(1, 4, dtype=torch.bool)])
    padded, _ = policy_loss(kind, three, torch.cat([old, old[:1]]),
                            torch.tensor([1.0, -1.0, 5.0], dtype=torch.float64), mask,
                            eps_low=0.2, eps_high=0.2)  # fmt: skip
    assert padded.item() == pytest.approx(loss.item())


def test_on_one_token_gspo_is_grpo():
    # a one-token sequence's geometric mean is its ratio: the same clipped surrogate
    for log_ratio, advantage in [(0.1, 1.0), (1.0, 1.0), (-1.0, -1.0), (-0.1, -2.0)]:
        values = []
        for kind in ("gspo", "grpo"):
            logp = torch.tensor([[log_ratio - 1.0]], dtype=torch.float64, requires_grad=True)
            old = torch.tensor([[-1.0]], dtype=torch.float64)
            mask = torch.ones(1, 1, dtype=torch.bool)
            loss, _ = policy_loss(kind, logp, old, torch.tensor([advantage]), mask,
                                  eps_low=0.2, eps_high=0.2)  # fmt: skip
            loss.backward()
            values.append((loss.item(), logp.grad.item()))
        assert values[0] == pytest.approx(values[1])


def test_all_masked_refuses_without_a_step_count_and_is_zero_with_one():
    logp, old = batch()
    none = torch.zeros(2, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="all tokens are masked out"):
        policy_loss("gspo", logp, old, ADVANTAGES, none)
    loss, stats = policy_loss("gmpo", logp, old, ADVANTAGES, none, num_tokens=10)
    assert loss.item() == 0.0 and stats.num_tokens == 0
