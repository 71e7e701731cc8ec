"""LoRA targets: checked against the model's linear layers, `all-linear`, LFM2's own names, and
how much of the model the adapters cover. Tiny random models from configs, no download."""

import pytest
from peft.tuners.lora import LoraLayer
from transformers import Lfm2Config, Lfm2ForCausalLM

from rlve.config import LoraConfig
from rlve.models import with_lora
from rlve.models.lora import linear_layers
from rlve.train import load_run_config

LFM2_LAYERS = ["in_proj", "k_proj", "out_proj", "q_proj", "v_proj", "w1", "w2", "w3"]


def tiny_lfm2() -> Lfm2ForCausalLM:
    """Two layers: a short convolution (in_proj, out_proj) and attention, each with SwiGLU."""
    config = Lfm2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                        layer_types=["conv", "full_attention"])  # fmt: skip
    return Lfm2ForCausalLM(config)


def adapted(model) -> list[str]:
    return sorted(name for name, m in model.named_modules() if isinstance(m, LoraLayer))


def test_the_lfm2_config_targets_every_linear_layer_of_lfm2():
    targets = load_run_config(["model=lfm2_2.6b"]).trainer.lora.target_modules
    assert sorted(targets) == LFM2_LAYERS
    model, coverage = with_lora(
        tiny_lfm2(), LoraConfig(enabled=True, rank=2, target_modules=targets)
    )
    # conv layer: in_proj, out_proj, w1-w3 (5); attention layer: q, k, v, out_proj, w1-w3 (7)
    assert len(adapted(model)) == coverage.layers == 12
    assert coverage.covered_params == coverage.linear_params  # everything but the output head


def test_the_qwen_default_on_lfm2_is_an_error_listing_the_models_layers():
    listed = ", ".join(repr(name) for name in LFM2_LAYERS)
    missing = r"\['o_proj', 'gate_proj', 'up_proj', 'down_proj'\] match no linear layer"
    with pytest.raises(ValueError, match=missing + rf".*layers are \[{listed}\]"):
        with_lora(tiny_lfm2(), LoraConfig(enabled=True, rank=2))


def test_all_linear_covers_every_linear_layer_but_the_head():
    model = tiny_lfm2()
    linear = linear_layers(model)
    wrapped, coverage = with_lora(model, LoraConfig(enabled=True, rank=2,
                                                    target_modules=["all-linear"]))  # fmt: skip
    assert coverage.layers == len(linear) == 12 and len(adapted(wrapped)) == 12
    # each adapter: A [2, in] + B [out, 2]; the adapters are all that trains
    expected = sum(2 * (m.in_features + m.out_features) for m in
                   (wrapped.get_submodule(n).base_layer for n in adapted(wrapped)))  # fmt: skip
    assert coverage.adapter_params == expected


def test_a_partial_target_list_reports_its_share():
    model = tiny_lfm2()
    _, coverage = with_lora(model, LoraConfig(enabled=True, rank=2, target_modules=["q_proj"]))
    # one attention layer, q_proj is 32 x 32 = 1,024 weights
    assert (coverage.layers, coverage.covered_params) == (1, 1024)
    assert "LoRA on 1 linear layers: 1,024 of" in str(coverage)


@pytest.mark.parametrize("targets", [[], ["all-linear", "q_proj"]])
def test_bad_target_lists_fail_in_the_config(targets):
    with pytest.raises(ValueError, match="lora.target_modules: names, or 'all-linear' alone"):
        LoraConfig(enabled=True, target_modules=targets).validate()
