"""vLLM failing to start ends with a message that says what to change."""

import pytest

from rlve.config import InferenceConfig
from rlve.inference.vllm_engine import EngineStartError, VLLMEngine
from rlve.inference.vllm_start_hint import start_hint
from rlve.models import load_tokenizer


@pytest.mark.vllm
def test_a_missing_model_directory_is_named_with_the_default_to_use():
    with pytest.raises(EngineStartError, match="'/no/such/model' does not exist .'tiny' is the"):
        VLLMEngine("/no/such/model", load_tokenizer("tiny"), InferenceConfig())


def test_a_memory_failure_names_the_settings_to_change():
    settings = InferenceConfig(cpu_kv_cache_gib=2, gpu_memory_utilization=0.3)
    error = ValueError("No available memory for the cache blocks. Try increasing ...")
    hint = start_hint("/tmp", settings, error)
    assert "lower max_model_len or max_num_seqs" in hint
    assert "cpu_kv_cache_gib (now 2) / gpu_memory_utilization (now 0.3)" in hint
    assert hint.endswith(
        "(ValueError: No available memory for the cache blocks. Try increasing ...)"
    )


def test_a_bare_name_that_is_no_directory_is_not_a_hub_id_either():
    hint = start_hint("tinyy", InferenceConfig(), OSError("not found"))
    assert "model 'tinyy' is neither a local directory nor a hub id" in hint
