"""The sampler-mismatch correction at token, sequence and geometric level, on a 2 x 4 batch
worked by hand.

old_logp - sampler_logp on the trained tokens: row 0 (3 tokens) 0.5, 0.5, -0.2; row 1
(2 tokens) -1.0, 0.2. Token ratios e^0.5 = 1.6487, 1.6487, e^-0.2 = 0.8187 and e^-1 = 0.3679,
e^0.2 = 1.2214; sequence ratios (the products) e^0.8 = 2.2255 and e^-0.8 = 0.4493; geometric
means e^(0.8 / 3) = 1.3056 and e^-0.4 = 0.6703. The cap C is 2.
"""

import math

import pytest
import torch

from rlve.algorithms import policy_loss
from rlve.algorithms.mismatch import mismatch_weights

MASK = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 0]], dtype=torch.bool)
GAP = torch.tensor([[0.0, 0.5, 0.5, -0.2], [0.0, -1.0, 0.2, 0.0]], dtype=torch.float64)
OLD = torch.full((2, 4), -1.0, dtype=torch.float64)
SAMPLER = OLD - GAP


def weights(mode, level, **kwargs):
    result = mismatch_weights(OLD, SAMPLER, MASK, cap=2.0, mode=mode, level=level, **kwargs)
    return result.weight.flatten().tolist(), result.masked, result.truncated


def test_token_level_truncates_nothing_below_the_cap_and_masks_outside_half_to_two():
    weight, _, truncated = weights("truncate", "token")
    e = math.exp
    assert weight == pytest.approx([1, e(0.5), e(0.5), e(-0.2), 1, e(-1), e(0.2), 1])
    assert not truncated.any()
    weight, masked, _ = weights("mask", "token")
    assert weight == [1, 1, 1, 1, 1, 0, 1, 1]  # e^-1 = 0.37 < 1/2
    assert masked.sum() == 1


def test_sequence_level_weighs_every_token_by_its_sequence_s_product():
    weight, _, truncated = weights("truncate", "sequence")
    assert weight == pytest.approx([1, 2, 2, 2, 1, math.exp(-0.8), math.exp(-0.8), 1])
    assert truncated.sum() == 3  # row 0's product 2.23 is capped at 2, on its 3 tokens
    weight, masked, _ = weights("mask", "sequence")
    assert weight == [1, 0, 0, 0, 1, 0, 0, 1]  # 2.23 > 2 and 0.45 < 1/2: both sequences out
    assert masked.sum() == 5


def test_geometric_level_keeps_both_sequences_inside_the_cap():
    weight, masked, truncated = weights("mask", "geometric")
    assert weight == [1] * 8 and not masked.any()
    weight, _, truncated = weights("truncate", "geometric")
    assert weight == pytest.approx([1] + [math.exp(0.8 / 3)] * 3 + [1] + [math.exp(-0.4)] * 2 + [1])
    assert not truncated.any()


@pytest.mark.parametrize("level", ["sequence", "geometric"])
def test_packed_rows_get_the_weights_of_one_row_per_sequence(level):
    ids = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])
    packed = mismatch_weights(OLD.reshape(1, 8), SAMPLER.reshape(1, 8), MASK.reshape(1, 8),
                              cap=2.0, mode="truncate", level=level, sequence_ids=ids)  # fmt: skip
    assert packed.weight.flatten().tolist() == pytest.approx(weights("truncate", level)[0])


def test_a_long_sequence_s_product_overflows_into_the_cap_not_into_nan():
    old = torch.zeros(1, 200, dtype=torch.float64)
    sampler = old - 10.0  # e^2000 overflows float64
    mask = torch.ones(1, 200, dtype=torch.bool)
    truncated = mismatch_weights(old, sampler, mask, cap=2.0, mode="truncate", level="sequence")
    assert truncated.weight.unique().tolist() == [2.0]
    masked = mismatch_weights(old, sampler, mask, cap=2.0, mode="mask", level="sequence")
    assert masked.weight.unique().tolist() == [0.0]


def test_the_loss_reports_what_the_correction_did():
    logp = OLD.clone().requires_grad_()
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    common = {"sampler_logp": SAMPLER, "tis_cap": 2.0}
    _, stats = policy_loss("cispo", logp, OLD, advantages, MASK, tis_level="sequence", **common)
    assert stats.tis_truncated_frac == pytest.approx(3 / 5) and stats.tis_masked_frac == 0.0
    assert (stats.num_sequences, stats.tis_sequence_frac) == (2, 0.5)  # row 0 of the two
    _, stats = policy_loss("cispo", logp, OLD, advantages, MASK, tis_level="token",
                           tis_mode="mask", **common)  # fmt: skip
    assert stats.tis_masked_frac == pytest.approx(1 / 5)
    # on-policy CISPO: each token's loss is -w A logp / N; logp = -1: sum of w A over 5 tokens
    loss, _ = policy_loss("cispo", logp, OLD, advantages, MASK, tis_level="geometric", **common)
    expected = (3 * math.exp(0.8 / 3) - 2 * math.exp(-0.4)) / 5
    assert loss.item() == pytest.approx(expected)
    with pytest.raises(ValueError, match=r"tis_level must be one of \['token', 'sequence', "):
        policy_loss("cispo", logp, OLD, advantages, MASK, tis_level="row", **common)


def test_a_level_without_a_correction_is_refused_at_start():
    from rlve.config import TrainerConfig

    with pytest.raises(ValueError, match="tis_level='sequence' .* set trainer.tis_cap"):
        TrainerConfig(tis_level="sequence").validate()
    TrainerConfig(tis_level="sequence", tis_cap=2.0).validate()
