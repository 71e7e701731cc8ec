"""Training only the highest-entropy share of the tokens, by hand."""

import pytest
import torch

from rlve.algorithms import policy_loss
from rlve.algorithms.entropy_selection import high_entropy_mask
from rlve.config import TrainerConfig

MASK = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 0]], dtype=torch.bool)
ENTROPY = torch.tensor([[9.0, 0.1, 2.0, 0.5], [9.0, 3.0, 0.2, 9.0]])
# trained entropies 0.1, 2.0, 0.5, 3.0, 0.2; the prompt and padding (9.0) are never counted


def test_the_top_share_of_the_trained_tokens_is_kept():
    # share 0.4: the 0.6 quantile of [0.1, 0.2, 0.5, 2.0, 3.0] is 0.5 + 0.4 * (2.0 - 0.5) = 1.1
    kept = high_entropy_mask(ENTROPY, MASK, 0.4)
    assert kept.tolist() == [[False, False, True, False], [False, True, False, False]]
    assert high_entropy_mask(ENTROPY, MASK, 1.0).equal(MASK)
    assert not high_entropy_mask(ENTROPY, torch.zeros_like(MASK), 0.2).any()
    with pytest.raises(ValueError, match=r"share must be in \(0, 1\], got 0.0"):
        high_entropy_mask(ENTROPY, MASK, 0.0)


def test_tokens_left_out_add_no_gradient_but_keep_their_place_in_the_denominator():
    # on-policy CISPO, A = 1 everywhere: each kept token's gradient is -1 / N with N = 5 trained
    # tokens, as without the selection; the left-out tokens get 0
    kept = high_entropy_mask(ENTROPY, MASK, 0.4)
    logp = torch.full((2, 4), -1.0, requires_grad=True)
    advantages = torch.where(kept, 1.0, 0.0)
    loss, _ = policy_loss("cispo", logp, logp.detach(), advantages, MASK)
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([0, 0, -0.2, 0, 0, -0.2, 0, 0])


def test_a_sequence_ratio_loss_with_a_selection_is_refused_at_start():
    TrainerConfig(entropy_quantile=0.2).validate()
    with pytest.raises(ValueError, match="entropy_quantile=0.2 .* gspo's per-sequence advantage"):
        TrainerConfig(loss="gspo", entropy_quantile=0.2).validate()
    with pytest.raises(ValueError, match=r"entropy_quantile must be in \(0, 1\], got 1.5"):
        TrainerConfig(entropy_quantile=1.5).validate()
