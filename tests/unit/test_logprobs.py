"""Log-probs at a sampling temperature: a hand computation, chunked == unchunked, alignment."""

import math

import pytest
import torch
from torch import nn

from rlve.training.logprobs import sequence_logprobs, token_logprobs


def test_three_token_vocab_at_temperature_two_matches_a_hand_computation():
    # logits [1, 2, 3] at T = 2 -> [0.5, 1.0, 1.5]; Z = e^0.5 + e^1 + e^1.5 = 8.8487
    # log p(token 2) = 1.5 - log Z = 1.5 - 2.1803 = -0.6803
    # entropy = -sum p log p with p = [0.1863, 0.3072, 0.5065] -> 1.0202
    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    logp, entropy = token_logprobs(logits, torch.tensor([2, 0]), temperature=2.0)
    z = math.exp(0.5) + math.exp(1.0) + math.exp(1.5)
    probs = [math.exp(x) / z for x in (0.5, 1.0, 1.5)]
    assert logp.tolist() == pytest.approx([1.5 - math.log(z), 0.5 - math.log(z)], abs=1e-6)
    assert logp[0].item() == pytest.approx(-0.6803, abs=1e-4)
    hand_entropy = -sum(p * math.log(p) for p in probs)
    assert entropy.tolist() == pytest.approx([hand_entropy] * 2, abs=1e-6)
    assert hand_entropy == pytest.approx(1.0202, abs=1e-4)


def test_temperature_one_is_the_plain_log_softmax():
    logits = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([0, 6, 3, 3, 1])
    logp, _ = token_logprobs(logits, targets, temperature=1.0)
    assert torch.allclose(logp, torch.log_softmax(logits, -1)[torch.arange(5), targets])


@pytest.mark.parametrize("chunk_tokens", [1, 3, 4, 100])
def test_chunked_equals_unchunked_in_values_and_gradients(chunk_tokens):
    generator = torch.Generator().manual_seed(0)
    head = nn.Linear(8, 50, bias=False)
    head.weight.data = torch.randn(50, 8, generator=generator)
    targets = torch.randint(0, 50, (10,), generator=generator)
    features = torch.randn(10, 8, generator=generator)

    def run(chunk):
        leaf = features.clone().requires_grad_(True)
        head.zero_grad()
        logp, entropy = token_logprobs(
            leaf, targets, head=head, temperature=0.7, chunk_tokens=chunk
        )
        logp.sum().backward()
        return logp.detach(), entropy, leaf.grad, head.weight.grad.clone()

    whole = run(10_000)
    chunked = run(chunk_tokens)
    for a, b in zip(whole, chunked, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


class BigramLM(nn.Module):
    """Hidden state = one-hot of the current token, logits = W[:, token]: next-token log-probs
    are columns of W, so the expected [B, T] log-probs can be read off by hand."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        vocab = weight.shape[0]
        self.embed = nn.Embedding(vocab, vocab, _weight=torch.eye(vocab))
        self.head = nn.Linear(vocab, vocab, bias=False)
        self.head.weight.data = weight

    def get_decoder(self):
        embed = self.embed

        class Decoder(nn.Module):
            def forward(self, input_ids, attention_mask):
                return type("Out", (), {"last_hidden_state": embed(input_ids)})()

        return Decoder()

    def get_output_embeddings(self):
        return self.head


def test_sequence_logprobs_align_each_token_with_the_position_before_it():
    weight = torch.randn(6, 6, generator=torch.Generator().manual_seed(1))
    model = BigramLM(weight)
    input_ids = torch.tensor([[1, 2, 3, 4], [5, 0, 2, 0]])  # row 1: last token is padding
    attention = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    loss_mask = torch.tensor([[0, 1, 0, 1], [0, 1, 1, 0]], dtype=torch.bool)
    logp, entropy = sequence_logprobs(model, input_ids, attention, loss_mask, temperature=2.0)

    table = torch.log_softmax(weight.T / 2.0, dim=-1)  # table[prev, next]
    expected = torch.zeros(2, 4)
    for b, t in loss_mask.nonzero().tolist():
        expected[b, t] = table[input_ids[b, t - 1], input_ids[b, t]]
    assert torch.allclose(logp, expected, atol=1e-6)
    assert entropy[~loss_mask].abs().sum() == 0
    assert bool((entropy[loss_mask] > 0).all())


def test_a_batch_with_nothing_to_train_still_backpropagates_to_every_parameter():
    """A sharded rank's idle micro-batch: all zeros, yet a backward that gives every parameter a
    (zero) gradient, so FSDP's gradient reduction runs on that rank as on the others."""
    model = BigramLM(torch.randn(6, 6, generator=torch.Generator().manual_seed(2)))
    model.embed.weight.requires_grad_(True)
    input_ids = torch.tensor([[3, 3]])
    nothing = torch.zeros((1, 2), dtype=torch.bool)
    logp, _ = sequence_logprobs(model, input_ids, torch.ones_like(input_ids), nothing)
    assert logp.tolist() == [[0.0, 0.0]]
    (logp * 2.0).sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert parameter.grad.abs().sum() == 0, name
    with torch.no_grad():  # old log-probs of an idle micro-batch: no graph wanted
        logp, _ = sequence_logprobs(model, input_ids, torch.ones_like(input_ids), nothing)
    assert logp.grad_fn is None
