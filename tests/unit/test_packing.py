"""Micro-batch packing by a token budget, padded and packed layouts, and advantages broadcast to
sampled tokens."""

import math
import random

import pytest
import torch

from rlve.algorithms.packed_rows import pack_into_rows, padded_fraction, sequence_ids
from rlve.algorithms.packing import build_train_batch, pack_by_token_budget, split_evenly
from rlve.algorithms.train_sequences import TrainSequence, sequences_from_groups
from rlve.types import Fault, RolloutGroup, SideSequence, Trajectory

PAD = 99


def trajectory(token_ids, loss_mask, reward, sampler_logprobs=()):
    return Trajectory(
        prompt=[],
        completion=[],
        token_ids=list(token_ids),
        loss_mask=list(loss_mask),
        sampler_logprobs=list(sampler_logprobs),
        reward=reward,
    )


def group(*trajectories, example_id=0):
    return RolloutGroup(example_id=example_id, env_name="test", trajectories=list(trajectories))


# ---------------------------------------------------------------------------------------------
# Packing
# ---------------------------------------------------------------------------------------------


def test_packing_sorts_longest_first_and_fills_each_budget():
    # sorted: #1 (5), #3 (5), #0 (3), #2 (2). [1, 3] pads to 2 x 5 = 10 <= 10; adding #0 would
    # make 3 x 5 = 15. [0, 2] pads to 2 x 3 = 6.
    assert pack_by_token_budget([3, 5, 2, 5], max_tokens=10) == [[1, 3], [0, 2]]


def test_equal_lengths_split_evenly():
    assert pack_by_token_budget([4] * 5, max_tokens=8) == [[0, 1], [2, 3], [4]]
    assert pack_by_token_budget([4] * 5, max_tokens=20) == [[0, 1, 2, 3, 4]]
    assert pack_by_token_budget([4] * 3, max_tokens=4) == [[0], [1], [2]]


def test_sequence_over_the_budget_gets_its_own_micro_batch():
    assert pack_by_token_budget([12, 3, 3], max_tokens=10) == [[0], [1, 2]]


def test_packing_loses_and_duplicates_nothing_and_respects_the_budget():
    rng = random.Random(0)
    for _ in range(50):
        lengths = [rng.randint(1, 40) for _ in range(rng.randint(1, 30))]
        budget = rng.randint(1, 120)
        batches = pack_by_token_budget(lengths, budget)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        for batch in batches:
            padded = len(batch) * max(lengths[i] for i in batch)
            assert padded <= budget or len(batch) == 1


def test_micro_batch_is_right_padded_with_padding_masked():
    sequences = [
        TrainSequence([1, 2, 3], [0, 1, 1], advantage=0.5, sampler_logprobs=[0.0, -1.0, -2.0]),
        TrainSequence([4, 5, 6, 7, 8], [0, 0, 1, 0, 1], advantage=-1.0,
                      sampler_logprobs=[9.0, 9.0, -3.0, 9.0, -4.0]),
    ]  # fmt: skip
    batch = build_train_batch(sequences, max_tokens=100, pad_token_id=PAD)
    assert (batch.num_sequences, batch.num_loss_tokens, len(batch.micro_batches)) == (2, 4, 1)
    micro = batch.micro_batches[0]
    assert micro.sequence_index == [1, 0]  # longest first
    assert micro.input_ids.tolist() == [[4, 5, 6, 7, 8], [1, 2, 3, PAD, PAD]]
    assert micro.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert micro.loss_mask.tolist() == [[0, 0, 1, 0, 1], [0, 1, 1, 0, 0]]
    assert micro.advantages.tolist() == [[0, 0, -1.0, 0, -1.0], [0, 0.5, 0.5, 0, 0]]
    # the sampler's log-probs are kept on sampled tokens only
    assert micro.sampler_logprobs.tolist() == [[0, 0, -3.0, 0, -4.0], [0, -1.0, -2.0, 0, 0]]


def test_micro_batch_without_sampler_logprobs_has_none():
    sequences = [
        TrainSequence([1, 2], [0, 1], sampler_logprobs=[0.0, -1.0]),
        TrainSequence([1, 2], [0, 1]),
    ]
    batch = build_train_batch(sequences, max_tokens=100, pad_token_id=PAD)
    assert batch.micro_batches[0].sampler_logprobs is None


def test_mask_on_the_first_token_is_an_error():
    with pytest.raises(ValueError, match="sequence 1: loss_mask is 1 on the first token"):
        build_train_batch(
            [TrainSequence([1, 2], [0, 1]), TrainSequence([1, 2], [1, 1])],
            max_tokens=100,
            pad_token_id=PAD,
        )


# ---------------------------------------------------------------------------------------------
# Packed rows
# ---------------------------------------------------------------------------------------------


def test_rows_take_the_longest_first_and_each_sequence_goes_into_the_first_row_with_room():
    # sorted: #1 (5), #3 (5), #4 (4), #0 (3), #2 (2). #4 fits neither 5-row (9 > 8): new row;
    # #0 fills row 0 (5 + 3 = 8); #2 does not fit row 0 (10), goes to row 1 (5 + 2 = 7).
    assert pack_into_rows([3, 5, 2, 5, 4], row_tokens=8) == [[1, 0], [3, 2], [4]]
    assert pack_into_rows([12, 3, 3], row_tokens=10) == [[0], [1, 2]]  # 12 > 10: a row alone


def test_rows_lose_and_duplicate_nothing_and_respect_their_length():
    rng = random.Random(0)
    for _ in range(50):
        lengths = [rng.randint(1, 40) for _ in range(rng.randint(1, 30))]
        limit = rng.randint(1, 120)
        rows = pack_into_rows(lengths, limit)
        assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
        for row in rows:
            assert sum(lengths[i] for i in row) <= limit or len(row) == 1


def test_packed_rows_put_sequences_end_to_end_with_their_own_positions():
    sequences = [
        TrainSequence([1, 2, 3], [0, 1, 1], advantage=0.5, sampler_logprobs=[0.0, -1.0, -2.0]),
        TrainSequence([4, 5, 6, 7, 8], [0, 0, 1, 0, 1], advantage=-1.0,
                      sampler_logprobs=[9.0, 9.0, -3.0, 9.0, -4.0]),
        TrainSequence([9, 10], [0, 1], advantage=2.0, sampler_logprobs=[9.0, -5.0]),
    ]  # fmt: skip
    # rows up to the longest sequence (5): [#1], then [#0, #2] (3 + 2); both rows fit the budget
    batch = build_train_batch(sequences, max_tokens=100, pad_token_id=PAD, packing="packed")
    assert (batch.num_sequences, batch.num_loss_tokens, len(batch.micro_batches)) == (3, 5, 1)
    micro = batch.micro_batches[0]
    assert micro.sequence_index == [1, 0, 2]
    assert micro.input_ids.tolist() == [[4, 5, 6, 7, 8], [1, 2, 3, 9, 10]]
    assert micro.position_ids.tolist() == [[0, 1, 2, 3, 4], [0, 1, 2, 0, 1]]
    assert micro.attention_mask.tolist() == [[1] * 5, [1] * 5]  # no padding at all
    assert micro.loss_mask.tolist() == [[0, 0, 1, 0, 1], [0, 1, 1, 0, 1]]
    assert micro.advantages.tolist() == [[0, 0, -1.0, 0, -1.0], [0, 0.5, 0.5, 0, 2.0]]
    assert micro.sampler_logprobs.tolist() == [[0, 0, -3.0, 0, -4.0], [0, -1.0, -2.0, 0, -5.0]]
    assert sequence_ids(micro.position_ids).tolist() == [[0, 0, 0, 0, 0], [1, 1, 1, 2, 2]]
    assert padded_fraction(batch.micro_batches) == 0.0


def test_a_short_row_is_padded_at_its_end_continuing_its_last_sequence():
    sequences = [TrainSequence([1, 2, 3, 4], [0, 1, 1, 1]), TrainSequence([5, 6], [0, 1])]
    micro = build_train_batch(
        sequences, max_tokens=100, pad_token_id=PAD, packing="packed"
    ).micro_batches[0]
    # rows up to 4 tokens: [#0], [#1] padded by 2; the padding keeps counting positions (2, 3),
    # so it belongs to #1, whose tokens never attend to it (it comes after them)
    assert micro.input_ids.tolist() == [[1, 2, 3, 4], [5, 6, PAD, PAD]]
    assert micro.position_ids.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert micro.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert micro.loss_mask.tolist() == [[0, 1, 1, 1], [0, 1, 0, 0]]
    assert micro.sampler_logprobs is None
    assert padded_fraction([micro]) == 2 / 8


def test_single_rows_fill_the_budget_one_row_per_micro_batch():
    # flash attention: rows up to max_tokens (10), one per micro-batch. Sorted: #0 (6), #2 (4),
    # #1 (3), #3 (3): [#0, #2] = 10, [#1, #3] = 6; never padded.
    sequences = [TrainSequence([7] * n, [0] + [1] * (n - 1)) for n in (6, 3, 4, 3)]
    batch = build_train_batch(
        sequences, max_tokens=10, pad_token_id=PAD, packing="packed", single_row=True
    )
    assert [m.sequence_index for m in batch.micro_batches] == [[0, 2], [1, 3]]
    assert [tuple(m.input_ids.shape) for m in batch.micro_batches] == [(1, 10), (1, 6)]
    assert batch.micro_batches[1].position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    assert padded_fraction(batch.micro_batches) == 0.0


def test_padded_fraction_counts_the_padding_of_the_padded_layout():
    # lengths 5 and 3 in one padded micro-batch: 2 of 10 positions are padding
    sequences = [TrainSequence([1] * 5, [0, 1, 1, 1, 1]), TrainSequence([1] * 3, [0, 1, 1])]
    padded = build_train_batch(sequences, max_tokens=100, pad_token_id=PAD)
    assert padded_fraction(padded.micro_batches) == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"packing must be one of \['padded', 'packed'\]"):
        build_train_batch(sequences, max_tokens=100, pad_token_id=PAD, packing="tight")


# ---------------------------------------------------------------------------------------------
# Groups -> sequences with advantages
# ---------------------------------------------------------------------------------------------


def test_advantages_reach_exactly_the_sampled_tokens():
    # rewards [1, 0, 0, 0]: mean 0.25, so A = [0.75, -0.25, -0.25, -0.25] (no std division).
    # Multi-turn layout: prompt, completion, environment reply, completion.
    mask = [0, 0, 1, 1, 0, 0, 1]
    rollouts = [trajectory(range(10 + i, 17 + i), mask, reward=float(i == 0)) for i in range(4)]
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert result.skipped_groups == 0
    assert [s.advantage for s in result.sequences] == [0.75, -0.25, -0.25, -0.25]
    micro = build_train_batch(result.sequences, max_tokens=100, pad_token_id=PAD).micro_batches[0]
    expected = torch.tensor(mask, dtype=torch.float32)
    for row, index in enumerate(micro.sequence_index):
        assert torch.equal(micro.advantages[row], expected * [0.75, -0.25, -0.25, -0.25][index])


def test_std_normalize_divides_by_the_group_std():
    # rewards [1, 0]: centered [0.5, -0.5], sample std sqrt(0.5) = 0.7071 -> +-0.7071
    rollouts = [trajectory([1, 2], [0, 1], 1.0), trajectory([1, 3], [0, 1], 0.0)]
    result = sequences_from_groups([group(*rollouts)], std_normalize=True)
    assert [s.advantage for s in result.sequences] == pytest.approx(
        [0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5)], abs=1e-5
    )


def test_bad_groups_are_skipped_and_counted():
    good = group(trajectory([1, 2], [0, 1], 1.0), trajectory([1, 3], [0, 1], 0.0))
    bad = [
        group(),  # empty
        group(trajectory([1, 2], [0, 1], math.nan), trajectory([1, 3], [0, 1], 0.0)),
        group(trajectory([1, 2], [0, 1], math.inf), trajectory([1, 3], [0, 1], 0.0)),
        group(trajectory([1, 2], [0, 1], 1.0, [0.0, math.nan])),  # NaN sampler log-prob
        group(trajectory([1, 2], [0, 0], 1.0), trajectory([1, 3], [0, 0], 0.0)),  # all masked
        group(trajectory([1, 2], [0, 1, 1], 1.0)),  # mask longer than the tokens
        group(trajectory([], [], 1.0)),  # text-only
    ]
    result = sequences_from_groups([bad[0], good, *bad[1:]], std_normalize=False)
    assert result.skipped_groups == len(bad)
    assert [s.token_ids for s in result.sequences] == [[1, 2], [1, 3]]


def test_tis_needs_sampler_logprobs():
    rollouts = [trajectory([1, 2], [0, 1], 1.0), trajectory([1, 3], [0, 1], 0.0)]
    result = sequences_from_groups(
        [group(*rollouts)], std_normalize=False, needs_sampler_logprobs=True
    )
    assert (result.skipped_groups, result.sequences) == (1, [])


def test_rollout_without_sampled_tokens_counts_for_the_mean_but_is_not_trained():
    # rewards [1, 0] -> A = [0.5, -0.5]; the second rollout has no sampled token, so it is dropped
    rollouts = [trajectory([1, 2], [0, 1], 1.0), trajectory([1, 3], [0, 0], 0.0)]
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert [(s.token_ids, s.advantage) for s in result.sequences] == [([1, 2], 0.5)]


def test_faulty_rollouts_are_left_out_of_the_loss_and_of_the_baseline():
    # clean rewards [1, 0, 0] -> mean 1/3, A = [2/3, -1/3, -1/3]; the fourth rollout timed out
    # (its score, -0.1, is the format penalty of an unfinished answer): neither trained nor in
    # the mean
    rollouts = [trajectory([1, 2], [0, 1], r) for r in (1.0, 0.0, 0.0, -0.1)]
    rollouts[3].fault = Fault("timeout", "episode time limit")
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert [s.advantage for s in result.sequences] == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    assert (result.faulty_rollouts, result.skipped_groups) == (1, 0)


def test_a_group_with_only_faulty_rollouts_trains_nothing_and_is_no_bad_input():
    rollouts = [trajectory([1, 2], [0, 1], r) for r in (1.0, 0.0)]
    for t in rollouts:
        t.fault = Fault("engine_error", "connection reset")
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert (result.sequences, result.faulty_rollouts, result.skipped_groups) == ([], 2, 0)


def test_shaping_moves_the_advantages_but_not_the_task_reward():
    # task rewards [1, 0], overlong shaping [-0.5, 0] -> trained rewards [0.5, 0], A = +-0.25
    rollouts = [trajectory([1, 2], [0, 1], 1.0), trajectory([1, 3], [0, 1], 0.0)]
    rollouts[0].shaping = -0.5
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert [s.advantage for s in result.sequences] == pytest.approx([0.25, -0.25])
    assert group(*rollouts).rewards == [1.0, 0.0]


def test_split_evenly_keeps_order_and_sizes_within_one():
    sequences = [TrainSequence([1, i], [0, 1]) for i in range(5)]
    parts = split_evenly(sequences, 2)
    assert [len(p) for p in parts] == [2, 3]
    assert [s for p in parts for s in p] == sequences
    assert [len(p) for p in split_evenly(sequences, 9)] == [1] * 5  # never an empty part
    with pytest.raises(ValueError, match="parts must be >= 1, got 0"):
        split_evenly(sequences, 0)


def test_side_calls_train_with_their_trajectory_advantage():
    # rewards [1, 0] -> A = [0.5, -0.5]; the first rollout carries one llm() side call
    first = trajectory([1, 2, 3], [0, 1, 1], 1.0, [0.0, -0.1, -0.2])
    first.side_sequences = [SideSequence([7, 8, 9], [0, 0, 1], [0.0, 0.0, -0.3])]
    rollouts = [first, trajectory([1, 4], [0, 1], 0.0, [0.0, -0.4])]
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert [(s.token_ids, s.advantage) for s in result.sequences] == [
        ([1, 2, 3], 0.5), ([7, 8, 9], 0.5), ([1, 4], -0.5)]  # fmt: skip
    assert result.sequences[1].sampler_logprobs == [0.0, 0.0, -0.3]
    first.side_sequences = [SideSequence([7, 8], [0, 1, 1], [])]  # a broken side call
    result = sequences_from_groups([group(*rollouts)], std_normalize=False)
    assert result.skipped_groups == 1
