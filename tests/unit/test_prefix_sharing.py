"""Shared prefixes forwarded once (rlve.algorithms.prefix_tree, rlve.training.tree_attention):
the tree's layout by hand, and the same log-probs, entropies, loss and gradients as the
sequences forwarded apart (tiny model), within the float32 tolerances derived in
test_packed_parity: only the order of float sums differs between the two.
"""

import random

import pytest
import torch

from rlve.algorithms import policy_loss
from rlve.algorithms.packed_rows import sequence_ids
from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.prefix_tree import build_prefix_tree, new_tokens, pack_by_new_tokens
from rlve.algorithms.train_sequences import TrainSequence
from rlve.distributed import World
from rlve.models import load_causal_lm
from rlve.training.logprobs import TokenScorer
from rlve.training.rank_batch import batch_on, build_rank_batch, moves_the_loss
from rlve.training.sequence_attention import SEQUENCE_SDPA
from rlve.training.tree_attention import after_prefix_mask
from rlve.training.tree_plan import with_attention_plan
from rlve.types import Segment
from tests.unit.test_packed_parity import fp32_tolerances


def test_the_tree_of_two_sequences_by_hand():
    tree = build_prefix_tree([[5, 6, 7], [5, 6, 8, 9]])
    assert tree.input_ids.tolist() == [[5, 6, 7, 8, 9]]
    assert tree.position_ids.tolist() == [[0, 1, 2, 2, 3]]
    assert tree.node_index.tolist() == [[0, 1, 2, 0, 1, 3, 4]]
    assert tree.segments == (Segment((0, 3), ()), Segment((3, 5), ((0, 2),)))


def test_a_repeated_sequence_adds_no_node_and_a_branch_reaches_back_across_runs():
    # the third shares 5, 6 (first segment) and 8 (second segment): its ancestors are two runs
    tree = build_prefix_tree([[5, 6, 7], [5, 6, 8], [5, 6, 8], [5, 6, 8, 1, 2]])
    assert tree.input_ids.tolist() == [[5, 6, 7, 8, 1, 2]]
    assert tree.node_index.tolist() == [[0, 1, 2, 0, 1, 3, 0, 1, 3, 0, 1, 3, 4, 5]]
    assert tree.segments[-1] == Segment((4, 6), ((0, 2), (3, 4)))
    # what each segment's attention reads: [5, 6, 7]; 5, 6, then 8; 5, 6, 8, then 1, 2
    assert tree.key_index.tolist() == [0, 1, 2, 0, 1, 3, 0, 1, 3, 4, 5]
    assert new_tokens([[5, 6, 7], [5, 6, 8], [5, 6, 8], [5, 6, 8, 1, 2]]) == [3, 1, 0, 2]


def test_micro_batches_hold_at_most_the_budget_in_new_tokens():
    assert pack_by_new_tokens([[1, 2, 3], [9], [1, 2, 4]], max_tokens=4) == [[0, 2], [1]]
    # a lone sequence over the budget still gets its micro-batch
    assert pack_by_new_tokens([[1] * 6, [2]], max_tokens=4) == [[0], [1]]


def test_after_prefix_mask_by_hand():
    mask = after_prefix_mask(2, 1, torch.device("cpu"))
    assert mask.tolist() == [[True, True, False], [True, True, True]]


def test_sequences_without_advantage_are_skipped_but_counted():
    sequences = [
        TrainSequence([1, 2, 3], [0, 1, 1], advantage=0.5),
        TrainSequence([1, 2, 4, 5], [0, 0, 1, 1], advantage=0.0),
        TrainSequence([7, 8], [0, 1], token_advantages=[0.0, 0.0]),
    ]
    assert [moves_the_loss(s) for s in sequences] == [True, False, False]
    layout = {"packing": "packed", "single_row": True, "share_prefixes": True}
    batch = build_rank_batch(
        sequences, World(), max_tokens=64, pad_token_id=0, skip_zero_advantage=True, **layout
    )
    assert batch.num_sequences == 3 and batch.num_loss_tokens == 5
    assert batch.skipped_tokens == 6
    assert [m.sequence_index for m in batch.micro_batches] == [[0]]


def grouped_sequences(seed: int = 0) -> list[TrainSequence]:
    """Three groups of four: a shared prompt, then continuations of their own, one of them
    repeated whole, one repeating another's first 'turn' (trained tokens included) and one a
    strict prefix of another."""
    rng = random.Random(seed)

    def tokens(n):
        return [rng.randrange(2048) for _ in range(n)]

    sequences = []
    for prompt_length in (40, 70, 25):
        prompt = tokens(prompt_length)
        first_turn = tokens(12)
        bodies = [tokens(30), first_turn + tokens(20), first_turn + tokens(45), tokens(3)]
        for body in bodies:
            ids = prompt + body
            mask = [0] * prompt_length + [int(rng.random() < 0.7) for _ in body]
            sequences.append(TrainSequence(ids, mask, advantage=rng.uniform(-1.0, 1.0)))
    sequences.append(sequences[1])  # the same game twice
    sequences.append(TrainSequence(sequences[2].token_ids[:60], sequences[2].loss_mask[:60],
                                   advantage=0.3))  # fmt: skip
    return sequences


def tiny(tiny_path):
    model = load_causal_lm(tiny_path, dtype="float32")
    model.config.use_cache = False
    model.set_attn_implementation(SEQUENCE_SDPA)
    return model


def run(model, sequences, share, loss, max_tokens=2048, autocast=False, attention="segments"):
    """One accumulated step on the model's device (under bf16 autocast with `autocast`; the
    tree's attention as TrainerConfig.tree_attention=`attention` gives it):
    {sequence: (logp, entropy) of its trained tokens}, the summed loss, the gradient of every
    parameter, and the positions forwarded."""
    scorer = TokenScorer(model, autocast_bf16=autocast)
    batch = build_train_batch(sequences, max_tokens=max_tokens, pad_token_id=0, packing="packed",
                              single_row=True, share_prefixes=share)  # fmt: skip
    device = next(model.parameters()).device
    batch = batch_on(with_attention_plan(batch, attention, device), device)
    model.zero_grad(set_to_none=True)
    per_sequence, total = {}, 0.0
    for micro in batch.micro_batches:
        logp, entropy = scorer(
            micro.input_ids, micro.attention_mask, micro.loss_mask, temperature=1.0,
            chunk_tokens=64, position_ids=micro.position_ids, prefix_tree=micro.prefix_tree,
        )  # fmt: skip
        ids = sequence_ids(micro.position_ids)
        value, _ = policy_loss(loss, logp, logp.detach() + 0.05, micro.advantages,
                               micro.loss_mask, num_tokens=batch.num_loss_tokens,
                               sequence_ids=ids)  # fmt: skip
        if loss == "grpo":
            value = value * len(micro.sequence_index) / batch.num_sequences
        value.backward()
        total += value.item()
        for k, index in enumerate(micro.sequence_index):
            where = (ids == k) & micro.loss_mask
            per_sequence[index] = (logp[where].detach(), entropy[where].detach())
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return per_sequence, total, grads, batch.forward_tokens


@pytest.mark.parametrize("attention", ["segments", "buckets"])
@pytest.mark.parametrize("loss", ["cispo", "grpo"])
@pytest.mark.parametrize("max_tokens", [2048, 300])
def test_a_shared_prefix_gives_the_separate_sequences_logprobs_loss_and_gradients(
    tiny_path, loss, max_tokens, attention
):
    model = tiny(tiny_path)
    sequences = grouped_sequences()
    apart, loss_apart, grads_apart, forwarded_apart = run(model, sequences, False, loss)
    shared, loss_shared, grads_shared, forwarded = run(model, sequences, True, loss, max_tokens,
                                                       attention=attention)  # fmt: skip
    value_tol, grad_tol = fp32_tolerances(model.config)
    assert sorted(shared) == sorted(apart) == list(range(len(sequences)))
    for index, (logp, entropy) in apart.items():
        assert (logp - shared[index][0]).abs().max().item() <= value_tol, index
        assert (entropy - shared[index][1]).abs().max().item() <= value_tol, index
    assert abs(loss_apart - loss_shared) <= value_tol
    for name, grad in grads_apart.items():
        scale = grad.abs().max().item()
        assert (grad - grads_shared[name]).abs().max().item() <= grad_tol * scale, name
    # apart: 4 games of each prompt (40, 70, 25) with bodies of 30, 12 + 20, 12 + 45 and 3
    # tokens, the repeated game (40 + 32) and the strict prefix (60)
    assert forwarded_apart == 4 * 135 + 3 * 122 + 72 + 60 == 1038
    # shared: each prompt and first turn once, the repeated game and the strict prefix not at all
    # (300 tokens a micro-batch: two of them, 25 + 110 + 40 + 110 and 70 + 110 nodes)
    assert forwarded == 135 + 3 * (30 + 20 + 12 + 45 + 3) == 465


def test_every_node_sees_only_its_own_prefix(tiny_path):
    # changing the tokens of one branch leaves every bit of the other branches' log-probs as is
    model = tiny(tiny_path)
    sequences = grouped_sequences()
    changed = list(sequences)
    branch = sequences[0]
    changed[0] = TrainSequence(branch.token_ids[:40] + [3] * 30, branch.loss_mask,
                               advantage=branch.advantage)  # fmt: skip
    before, _, _, _ = run(model, sequences, True, "cispo")
    after, _, _, _ = run(model, changed, True, "cispo")
    assert not torch.equal(before[0][0], after[0][0])
    for index in range(1, len(sequences)):
        assert torch.equal(before[index][0], after[index][0]), index


def test_under_bf16_autocast_the_tree_moves_logprobs_no_more_than_bf16_does(tiny_path):
    # As test_packed_parity's bf16 test: the tree (its attention in float32 on the CPU) may move
    # a log-prob away from the padded layout under autocast (transformers' sdpa, in bf16) by no
    # more than computing in bf16 moves the padded layout away from float32
    sequences = grouped_sequences()
    model = tiny(tiny_path)
    exact, _, _, _ = run(model, sequences, False, "cispo")
    padded = {}
    scorer = TokenScorer(load_causal_lm(tiny_path, dtype="float32"), autocast_bf16=True)
    for micro in build_train_batch(sequences, max_tokens=2048, pad_token_id=0).micro_batches:
        with torch.no_grad():
            logp, _ = scorer(micro.input_ids, micro.attention_mask, micro.loss_mask,
                             temperature=1.0, chunk_tokens=64)  # fmt: skip
        for row, index in enumerate(micro.sequence_index):
            padded[index] = logp[row][micro.loss_mask[row]]
    noise = max((padded[i] - exact[i][0]).abs().max().item() for i in exact)
    assert 0 < noise < 0.1
    scorer = TokenScorer(model, autocast_bf16=True)
    tree_batch = build_train_batch(sequences, max_tokens=2048, pad_token_id=0, packing="packed",
                                   single_row=True, share_prefixes=True)  # fmt: skip
    for micro in tree_batch.micro_batches:
        with torch.no_grad():
            logp, _ = scorer(micro.input_ids, micro.attention_mask, micro.loss_mask,
                             temperature=1.0, chunk_tokens=64, position_ids=micro.position_ids,
                             prefix_tree=micro.prefix_tree)  # fmt: skip
        ids = sequence_ids(micro.position_ids)
        for k, index in enumerate(micro.sequence_index):
            got = logp[(ids == k) & micro.loss_mask]
            assert (got - padded[index]).abs().max().item() <= noise, index
