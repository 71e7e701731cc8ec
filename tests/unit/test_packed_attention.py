"""Attention within packed rows: the block-diagonal causal mask by hand, the form each attention
implementation gets, and the models packing refuses."""

from types import SimpleNamespace

import pytest
import torch

from rlve.training.packed_attention import (
    block_causal_mask,
    check_packable,
    packed_decoder_inputs,
    separates_sequences,
)
from rlve.training.sequence_attention import SEQUENCE_SDPA, sequence_bounds, sequence_sdpa


def config(implementation, layer_types=("full_attention",), model_type="qwen2"):
    return SimpleNamespace(
        _attn_implementation=implementation, layer_types=list(layer_types), model_type=model_type
    )


def test_the_mask_is_causal_within_each_sequence_and_blind_across():
    # one row: a sequence of 3 tokens, then one of 2 (positions restart at 0 at token 3)
    mask = block_causal_mask(torch.tensor([[0, 1, 2, 0, 1]]))
    assert mask.shape == (1, 1, 5, 5)
    assert mask[0, 0].int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 0, 0, 1, 0],  # token 3 starts the second sequence: sees only itself
        [0, 0, 0, 1, 1],
    ]


def test_sdpa_gets_the_bool_mask_and_eager_adds_zero_or_the_dtype_minimum():
    positions = torch.tensor([[0, 1, 0]])
    sdpa = packed_decoder_inputs(config("sdpa"), positions, torch.float32)
    assert sdpa["attention_mask"].dtype == torch.bool
    assert sdpa["position_ids"] is positions
    eager = packed_decoder_inputs(config("eager"), positions, torch.bfloat16)["attention_mask"]
    low = torch.finfo(torch.bfloat16).min
    assert eager.dtype == torch.bfloat16
    assert eager[0, 0].tolist() == [[0, low, low], [0, 0, low], [low, low, 0]]


def test_flash_attention_reads_the_boundaries_from_the_position_ids_of_one_row():
    positions = torch.tensor([[0, 1, 0]])
    inputs = packed_decoder_inputs(config("flash_attention_2"), positions, torch.bfloat16)
    assert inputs["attention_mask"] is None and inputs["position_ids"] is positions
    with pytest.raises(ValueError, match="flash attention packs one row, got 2"):
        packed_decoder_inputs(config("flash_attention_2"), positions.repeat(2, 1), torch.bfloat16)


def test_packing_refuses_other_attention_and_layers_that_are_not_attention():
    check_packable(config("sdpa"))
    check_packable(config("kernels-community/flash-attn3"))
    with pytest.raises(ValueError, match="needs sdpa, eager or flash attention; .*'flex_attent"):
        check_packable(config("flex_attention"))
    lfm2 = config("sdpa", ["conv", "full_attention"], model_type="lfm2")
    with pytest.raises(ValueError, match=r"lfm2 also has \['conv'\] layers.*packing=padded"):
        check_packable(lfm2)
    with pytest.raises(ValueError, match=r"\['sliding_attention'\]"):
        check_packable(config("sdpa", ["full_attention", "sliding_attention"]))


def test_rows_of_one_sequence_each_need_only_the_causal_mask():
    # each row one sequence (the second one's padding keeps counting positions): no mask at all
    positions = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    for implementation in ("sdpa", "eager"):
        inputs = packed_decoder_inputs(config(implementation), positions, torch.float32)
        assert inputs["attention_mask"] is None and inputs["position_ids"] is positions


def test_sequence_sdpa_finds_each_row_s_sequences_and_gets_a_placeholder_mask():
    positions = torch.tensor([[0, 1, 2, 0, 1], [0, 0, 1, 2, 3]])
    assert sequence_bounds(positions) == [[(0, 3), (3, 5)], [(0, 1), (1, 5)]]
    inputs = packed_decoder_inputs(config(SEQUENCE_SDPA), positions, torch.float32)
    # a 4D mask transformers takes as prepared (it builds no T x T mask); the sequences are
    # found from the position ids
    assert inputs["attention_mask"].shape == (2, 1, 1, 1) and inputs["position_ids"] is positions
    assert separates_sequences(config(SEQUENCE_SDPA)) and not separates_sequences(config("sdpa"))


def test_sequence_sdpa_equals_sdpa_with_the_block_mask():
    # 2 rows of 9 tokens, 4 query heads sharing 2 key/value heads (grouped-query attention)
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 0, 1, 2], [0, 1, 2, 3, 4, 5, 6, 0, 1]])
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, 9, 8, generator=generator)
    key, value = (
        torch.randn(2, 2, 9, 8, generator=generator),
        torch.randn(2, 2, 9, 8, generator=generator),
    )
    module = SimpleNamespace(num_key_value_groups=2, training=False, is_causal=True)
    out, _ = sequence_sdpa(module, query, key, value, None, scaling=0.5, position_ids=positions)
    mask = block_causal_mask(positions)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(2, 1), value.repeat_interleave(2, 1), attn_mask=mask, scale=0.5
    ).transpose(1, 2)
    # the same float32 sums over at most 7 keys in another order: a few units of 2^-24 of
    # values of order 1
    assert out.shape == (2, 9, 4, 8)
    assert (out - expected).abs().max().item() < 1e-6
