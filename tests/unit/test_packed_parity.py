"""Packed rows give the padded layout's per-token log-probs, entropies, loss and gradients (tiny
model, sequences of 2 to 160 tokens), and no sequence of a row sees another one.

Tolerances. Both layouts run the same arithmetic in other shapes, so only the order of
floating-point sums differs: dot products of at most K = max(hidden, intermediate) terms,
softmaxes over keys and over the vocabulary. Two orders of a K-term float32 sum differ by about
sqrt(K) * u of the magnitude summed (u = 2^-24, rounding errors adding like a random walk), each
of the L layers adds such a difference to the residual stream, and log-probs and entropies are
at most LOGIT_SCALE nats here (checked), so they may differ by L * sqrt(K) * u * LOGIT_SCALE
(5.4e-5 for the tiny model). The backward pass runs every reduction once more, transposed: a
gradient may differ by 2 * L * sqrt(K) * u (1.1e-5) of its tensor's largest entry. In bfloat16
the layouts' float32 accumulations are rounded to 8 bits, so packing may change a log-prob by no
more than computing in bfloat16 changes it (the padded layout's bf16 - fp32 difference).
"""

import importlib.util
import math
import random
from dataclasses import replace

import pytest
import torch

from rlve.algorithms import policy_loss
from rlve.algorithms.packed_rows import sequence_ids
from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.train_sequences import TrainSequence
from rlve.config import LoraConfig
from rlve.models import load_causal_lm, with_lora
from rlve.training.logprobs import TokenScorer
from rlve.training.packed_attention import separates_sequences
from rlve.training.sequence_attention import SEQUENCE_SDPA

LENGTHS = [160, 7, 60, 23, 2, 100, 33]
U32 = 2.0**-24
LOGIT_SCALE = 10.0
"""bound on |log-prob| and entropy of the tiny model on these tokens (entropy <= log 2048)"""


def fp32_tolerances(config) -> tuple[float, float]:
    """(log-prob/entropy tolerance, gradient tolerance relative to its tensor's largest entry)."""
    reduction = math.sqrt(max(config.hidden_size, config.intermediate_size)) * U32
    layers = config.num_hidden_layers
    return layers * reduction * LOGIT_SCALE, 2 * layers * reduction


def make_sequences(seed: int = 0) -> list[TrainSequence]:
    rng = random.Random(seed)
    sequences = []
    for length in LENGTHS:
        ids = [rng.randrange(2048) for _ in range(length)]
        mask = [0] + [int(rng.random() < 0.6) for _ in range(length - 1)]
        sequences.append(TrainSequence(ids, mask, advantage=rng.uniform(-1.0, 1.0)))
    return sequences


def tiny(tiny_path, implementation="sdpa", dtype="float32"):
    model = load_causal_lm(tiny_path, dtype=dtype)
    model.config.use_cache = False
    model.set_attn_implementation(implementation)
    return model


def run(model, trained, sequences, packing, loss="cispo", autocast=False):
    """One accumulated step as the trainer takes it: {sequence: (logp, entropy) of its trained
    tokens}, the summed loss and the gradient of every parameter in `trained`."""
    scorer = TokenScorer(model, autocast_bf16=autocast)
    single_row = separates_sequences(model.config)  # SEQUENCE_SDPA: one row per micro-batch
    batch = build_train_batch(sequences, max_tokens=2048, pad_token_id=0, packing=packing,
                              single_row=single_row)  # fmt: skip
    for parameter in trained.values():
        parameter.grad = None
    per_sequence, total = {}, 0.0
    device = next(model.parameters()).device
    for micro in batch.micro_batches:
        names = ("input_ids", "attention_mask", "loss_mask", "advantages", "position_ids")
        moved = {n: getattr(micro, n).to(device) for n in names if getattr(micro, n) is not None}
        micro = replace(micro, **moved)
        logp, entropy = scorer(
            micro.input_ids, micro.attention_mask, micro.loss_mask,
            temperature=1.0, chunk_tokens=64, position_ids=micro.position_ids,
        )  # fmt: skip
        packed = micro.position_ids is not None
        ids = sequence_ids(micro.position_ids) if packed else None
        value, _ = policy_loss(loss, logp, logp.detach(), micro.advantages, micro.loss_mask,
                               num_tokens=batch.num_loss_tokens, sequence_ids=ids)  # fmt: skip
        if loss == "grpo":  # as the trainer weighs a micro-batch's sequence mean
            value = value * len(micro.sequence_index) / batch.num_sequences
        value.backward()
        total += value.item()
        rows = torch.arange(len(micro.input_ids), device=device)[:, None].expand_as(micro.loss_mask)
        owner = ids if packed else rows  # the k-th sequence of the micro-batch: a row, or an id
        for k, index in enumerate(micro.sequence_index):
            where = (owner == k) & micro.loss_mask
            per_sequence[index] = (logp[where].detach(), entropy[where])
    grads = {name: p.grad.clone() for name, p in trained.items()}
    return per_sequence, total, grads


def assert_parity(padded, packed, value_tol, grad_tol):
    (logp_a, loss_a, grads_a), (logp_b, loss_b, grads_b) = padded, packed
    assert sorted(logp_a) == sorted(logp_b) == list(range(len(LENGTHS)))
    for index, (logp, entropy) in logp_a.items():
        assert logp.abs().max() < LOGIT_SCALE and entropy.max() < LOGIT_SCALE
        other_logp, other_entropy = logp_b[index]
        assert (logp - other_logp).abs().max().item() <= value_tol, index
        assert (entropy - other_entropy).abs().max().item() <= value_tol, index
    assert abs(loss_a - loss_b) <= value_tol  # a mean of log-probs times |A| <= 1
    for name, grad in grads_a.items():
        scale = grad.abs().max().item()
        assert (grad - grads_b[name]).abs().max().item() <= grad_tol * scale, name


@pytest.mark.parametrize("implementation", ["sdpa", "eager", SEQUENCE_SDPA])
@pytest.mark.parametrize("loss", ["cispo", "grpo"])
def test_packed_rows_give_the_padded_logprobs_loss_and_gradients(tiny_path, implementation, loss):
    model = tiny(tiny_path, implementation)
    trained = dict(model.named_parameters())
    sequences = make_sequences()
    padded = run(model, trained, sequences, "padded", loss)
    packed = run(model, trained, sequences, "packed", loss)
    assert_parity(padded, packed, *fp32_tolerances(model.config))


def test_lora_gradients_are_the_same_packed(tiny_path):
    model, _ = with_lora(tiny(tiny_path), LoraConfig(enabled=True, rank=4, alpha=8.0))
    generator = torch.Generator().manual_seed(0)
    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    with torch.no_grad():  # B starts at 0, which would hide the adapters from the log-probs
        for name, parameter in trained.items():
            if "lora_B" in name:
                parameter.copy_(0.05 * torch.randn(parameter.shape, generator=generator))
    causal_lm = model.get_base_model()
    padded = run(causal_lm, trained, make_sequences(), "padded")
    packed = run(causal_lm, trained, make_sequences(), "packed")
    assert_parity(padded, packed, *fp32_tolerances(causal_lm.config))


@pytest.mark.parametrize("case", ["autocast", "bf16 weights"])
def test_bf16_packing_moves_logprobs_no_more_than_bf16_does(tiny_path, case):
    sequences = make_sequences()
    reference = tiny(tiny_path)
    exact, _, _ = run(reference, {}, sequences, "padded")
    model = reference if case == "autocast" else tiny(tiny_path, dtype="bfloat16")
    padded, _, _ = run(model, {}, sequences, "padded", autocast=case == "autocast")
    packed, _, _ = run(model, {}, sequences, "packed", autocast=case == "autocast")
    bf16_noise = max((padded[i][0] - exact[i][0]).abs().max().item() for i in exact)
    assert 0 < bf16_noise < 0.1
    for index in exact:
        assert (packed[index][0] - padded[index][0]).abs().max().item() <= bf16_noise, index


@pytest.mark.parametrize("implementation", ["sdpa", "eager", SEQUENCE_SDPA])
@pytest.mark.parametrize("autocast", [False, True])
def test_a_sequence_never_sees_the_one_before_it_in_its_row(tiny_path, implementation, autocast):
    # Two sequences, one row (packed rows are up to the longest sequence, 40 tokens: 25 + 15;
    # SEQUENCE_SDPA's one row holds all three).
    # New tokens for the first one leave every bit of the second one's log-probs unchanged:
    # its attention gives the first one's keys weight exactly 0.
    model = tiny(tiny_path, implementation)
    rng = random.Random(1)
    second = TrainSequence([rng.randrange(2048) for _ in range(15)], [0] + [1] * 14)
    results = []
    for seed in (2, 3):
        first_ids = [random.Random(seed).randrange(2048) for _ in range(25)]
        sequences = [TrainSequence([7] * 40, [0] + [1] * 39),
                     TrainSequence(first_ids, [0] + [1] * 24), second]  # fmt: skip
        per_sequence, _, _ = run(model, {}, sequences, "packed", autocast=autocast)
        results.append(per_sequence)
    assert not torch.equal(results[0][1][0], results[1][1][0])  # the first one did change
    assert torch.equal(results[0][2][0], results[1][2][0])
    assert torch.equal(results[0][2][1], results[1][2][1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("implementation", ["sdpa", SEQUENCE_SDPA, "flash_attention_2"])
def test_packed_rows_on_cuda_move_bf16_logprobs_no_more_than_bf16_does(tiny_path, implementation):
    # flash attention packs one row per micro-batch and finds the sequences by their position ids
    if implementation == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        pytest.skip("flash-attn is not installed")
    sequences = make_sequences()
    exact, _, _ = run(tiny(tiny_path).cuda(), {}, sequences, "padded")
    model = tiny(tiny_path, implementation, dtype="bfloat16").cuda()
    padded, _, _ = run(model, {}, sequences, "padded")
    packed, _, _ = run(model, {}, sequences, "packed")
    bf16_noise = max((padded[i][0] - exact[i][0]).abs().max().item() for i in exact)
    for index in exact:
        assert (packed[index][0] - padded[index][0]).abs().max().item() <= bf16_noise, index
