"""Where the trainer and vLLM run: bad layouts fail at start with the fields to change."""

import logging
import os

import pytest

from rlve.sync.placement import (
    check_placement,
    cuda_index,
    engine_devices,
    engine_gpus,
    visible_devices_for_engine,
)
from rlve.train import load_run_config


def test_cuda_index_of_torch_device_strings():
    assert [cuda_index(d) for d in ("cpu", "cuda", "cuda:0", "cuda:3")] == [None, 0, 0, 3]


def test_vllm_defaults_to_the_first_tensor_parallel_gpus():
    assert engine_gpus(None, 2) == [0, 1]
    assert engine_gpus([2, 3], 2) == [2, 3]


def test_the_two_gpu_layout_of_the_model_configs_passes():
    config = load_run_config(["model=qwen3_0.6b"])
    assert (config.trainer.device, config.inference.gpus) == ("cuda:1", [0])
    config = load_run_config(["model=qwen3_0.6b", "inference.weight_transport=nccl"])
    assert config.inference.weight_transport == "nccl"


def test_nccl_refuses_a_cpu_trainer_and_a_shared_gpu():
    with pytest.raises(ValueError, match="trainer.device is 'cpu': use trainer.device=cuda:N"):
        check_placement("cpu", None, 1, "nccl", 0.5)
    with pytest.raises(ValueError, match=r"trainer \(cuda:0\) and vLLM \(\[0\]\) share it"):
        check_placement("cuda:0", None, 1, "nccl", 0.5)
    with pytest.raises(ValueError, match=r"trainer \(cuda:1\) and vLLM \(\[0, 1\]\)"):
        load_run_config(
            ["model=qwen3_0.6b", "inference.weight_transport=nccl", "inference.gpus=[0,1]"]
        )


def test_a_shared_gpu_without_nccl_is_allowed_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlve.sync.placement"):
        check_placement("cuda:0", [0], 1, "shared_memory", 0.3)
        check_placement("cuda:0", [0], 1, "shared_memory", 0.3)  # validated again at start
    assert caplog.text.count("share cuda:0; vLLM takes 30% of its memory") == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlve.sync.placement"):
        check_placement("cuda:1", [0], 1, "nccl", 0.9)
        check_placement("cpu", None, 1, "gloo", 0.9)
    assert caplog.text == ""


def test_bad_gpu_lists_name_the_field():
    with pytest.raises(ValueError, match=r"distinct GPU indices >= 0, got \[0, 0\]"):
        check_placement("cpu", [0, 0], 1, "shared_memory", 0.5)
    with pytest.raises(
        ValueError, match=r"lists 1 GPU\(s\) but inference.tensor_parallel_size is 2"
    ):
        check_placement("cpu", [0], 2, "shared_memory", 0.5)


def test_engine_gpus_follow_the_training_process_numbering():
    assert visible_devices_for_engine([0], None) == "0"
    assert visible_devices_for_engine([0, 1], "") == "0,1"
    assert visible_devices_for_engine([1], "4,6") == "6"
    assert visible_devices_for_engine([0], "GPU-aa11, GPU-bb22") == "GPU-aa11"
    with pytest.raises(ValueError, match=r"sees only 2 GPU\(s\) \(CUDA_VISIBLE_DEVICES=4,6\)"):
        visible_devices_for_engine([2], "4,6")


def test_engine_devices_is_set_only_while_vllm_starts(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    with engine_devices([1]):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "6"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,6"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with engine_devices([0]):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    with engine_devices(None):
        assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_replicas_take_consecutive_gpus_and_must_be_listed_on_gpus():
    from rlve.inference.vllm_engine import replica_gpus

    assert replica_gpus([4, 5, 6, 7], 2, 2) == [[4, 5], [6, 7]]
    assert replica_gpus(None, 1, 2) == [None, None]
    check_placement("cpu", None, 1, "gloo", 0.5, replicas=2)  # CPU replicas need no GPU list
    with pytest.raises(ValueError, match=r"inference.replicas=2 on GPUs needs inference.gpus"):
        check_placement("cuda:0", None, 1, "shared_memory", 0.5, replicas=2)
    with pytest.raises(ValueError, match=r"lists 3 GPU\(s\) .* 2 for each of inference.replicas=2"):
        check_placement("cuda:0", [1, 2, 3], 2, "shared_memory", 0.5, replicas=2)


def test_torchrun_ranks_and_vllm_must_not_share_gpus():
    # 4 trainer ranks on cuda:0-3, 4 replicas on 4-7: the 8-GPU layout of docs/scaling.md
    check_placement("cuda", [4, 5, 6, 7], 1, "nccl", 0.9, replicas=4, trainer_ranks=4)
    with pytest.raises(ValueError, match=r"share GPU\(s\) \[2, 3\]: list vLLM's GPUs from 4 on"):
        check_placement("cuda", [2, 3], 1, "nccl", 0.9, replicas=2, trainer_ranks=4)
