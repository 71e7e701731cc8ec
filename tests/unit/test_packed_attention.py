"""Attention within packed rows: the block-diagonal causal mask by hand, the form each attention
implementation gets, and the models packing refuses."""

from types import SimpleNamespace

import pytest
import torch

from rlve.training.packed_attention import (
    block_causal_mask,
    check_packable,
    packed_decoder_inputs,
)


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
