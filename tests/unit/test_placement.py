"""Where the trainer and vLLM run: bad layouts fail at start with the fields to change."""

import logging
import os

import pytest
import torch

from rlve.sync.placement import (
    CPU_SHARE,
    OWN_GPU_SHARE,
    SHARED_GPU_SHARE,
    check_placement,
    cuda_index,
    engine_devices,
    engine_gpus,
    place_run,
    resolve_device,
    visible_devices_for_engine,
)
from rlve.train import load_run_config


def test_cuda_index_of_torch_device_strings():
    assert [cuda_index(d) for d in ("cpu", "cuda", "cuda:0", "cuda:3")] == [None, 0, 0, 3]


def test_vllm_defaults_to_the_first_tensor_parallel_gpus():
    assert engine_gpus(None, 2) == [0, 1]
    assert engine_gpus([2, 3], 2) == [2, 3]


def seen_gpus(monkeypatch, count: int) -> None:
    """This process sees `count` GPUs: torch.cuda mocked, the CPU twin of a GPU machine."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)


def placed(overrides: list[str]) -> tuple[str, list[int] | None, float | None]:
    config = place_run(load_run_config(overrides))
    i = config.inference
    return config.trainer.device, i.gpus, i.gpu_memory_utilization


@pytest.mark.parametrize(
    "gpus, device, share",
    [(0, "cpu", CPU_SHARE), (1, "cuda:0", SHARED_GPU_SHARE), (2, "cuda:1", OWN_GPU_SHARE),
     (8, "cuda:1", OWN_GPU_SHARE)],
)  # fmt: skip
def test_auto_shares_one_gpu_and_takes_the_next_one_of_two(monkeypatch, gpus, device, share):
    seen_gpus(monkeypatch, gpus)
    assert placed([]) == (device, None, share)  # vLLM on its first GPU (gpus=None: GPU 0)
    assert (SHARED_GPU_SHARE, OWN_GPU_SHARE, CPU_SHARE) == (0.4, 0.8, 0.2)
    assert resolve_device("auto") == ("cpu" if gpus == 0 else "cuda")


def test_the_model_configs_leave_the_layout_to_the_machine(monkeypatch):
    for model in ("qwen3_0.6b", "lfm2_2.6b"):
        config = load_run_config([f"model={model}"])
        i = config.inference
        assert (config.trainer.device, i.gpus, i.gpu_memory_utilization) == ("auto", None, None)
        seen_gpus(monkeypatch, 2)
        assert placed([f"model={model}", "inference.weight_transport=nccl"]) == (
            "cuda:1",
            None,
            0.8,
        )
        seen_gpus(monkeypatch, 1)
        assert placed([f"model={model}"]) == ("cuda:0", None, 0.4)
        with pytest.raises(ValueError, match="nccl cannot connect two ranks on one GPU"):
            load_run_config([f"model={model}", "inference.weight_transport=nccl"])


def test_auto_takes_a_gpu_vllm_leaves_free_and_keeps_what_is_set(monkeypatch):
    seen_gpus(monkeypatch, 2)
    assert placed(["inference.gpus=[1]"]) == ("cuda:0", [1], 0.8)
    # vLLM on both GPUs: the trainer shares the first
    assert placed(["inference.tensor_parallel_size=2"]) == ("cuda:0", None, 0.4)
    # a share or a device given stays as given; the share follows the device
    assert placed(["inference.gpu_memory_utilization=0.6"]) == ("cuda:1", None, 0.6)
    assert placed(["trainer.device=cuda:0"]) == ("cuda:0", None, 0.4)
    assert placed(["trainer.device=cpu"]) == ("cpu", None, 0.8)
    # no local vLLM: the trainer takes GPU 0, and no share is decided for an engine not here
    assert placed(["inference.servers=[http://10.0.0.2:8000]"]) == ("cuda:0", None, None)
    assert placed(["rollout.engine=scripted"]) == ("cuda:0", None, None)
    # under torchrun rank r takes cuda:r, and vLLM must be listed after the ranks
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert placed(["inference.gpus=[4]"]) == ("cuda", [4], 0.8)


def test_a_placed_run_is_placed_again_as_it_is(monkeypatch):
    seen_gpus(monkeypatch, 1)
    config = place_run(load_run_config([]))
    seen_gpus(monkeypatch, 2)  # the machine is not asked again: nothing is left to decide
    assert place_run(config) == config


def test_nccl_refuses_a_cpu_trainer_and_a_shared_gpu(monkeypatch):
    with pytest.raises(ValueError, match="trainer.device is 'cpu': use trainer.device=cuda:N"):
        check_placement("cpu", None, 1, "nccl", 0.5)
    with pytest.raises(ValueError, match=r"trainer \(cuda:0\) and vLLM \(\[0\]\) share it"):
        check_placement("cuda:0", None, 1, "nccl", 0.5)
    seen_gpus(monkeypatch, 2)  # vLLM on both: `auto` shares GPU 0, which NCCL cannot
    with pytest.raises(ValueError, match=r"trainer \(cuda:0\) and vLLM \(\[0, 1\]\)"):
        load_run_config(
            ["model=qwen3_0.6b", "inference.weight_transport=nccl", "inference.gpus=[0,1]"]
        )


def test_a_shared_gpu_without_nccl_is_allowed_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rlve.sync.placement"):
        check_placement("cuda:0", [0], 1, "shared_memory", 0.3)
        check_placement("cuda:0", [0], 1, "shared_memory", 0.3)  # validated again at start
    assert caplog.text.count("share cuda:0; vLLM takes 30% of its memory") == 1
    assert (
        "(inference.gpu_memory_utilization=0.3), the trainer what is left: lower it" in caplog.text
    )
    assert "or give each a GPU of its own (inference.gpus=[0] trainer.device=cuda:1)" in caplog.text
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


def test_an_engine_started_outside_a_run_leaves_room_for_a_trainer_on_its_gpu(monkeypatch):
    pytest.importorskip("vllm")
    from vllm.platforms import current_platform

    from rlve.inference.vllm_engine import engine_share

    assert engine_share(0.7) == 0.7
    assert engine_share(None) == (0.2 if current_platform.is_cpu() else 0.4)
    monkeypatch.setattr(current_platform, "is_cpu", lambda: False)
    assert engine_share(None) == 0.4


def test_a_trainer_made_outside_a_run_resolves_auto_itself(monkeypatch):
    from rlve.config import TrainerConfig
    from rlve.training.trainer import Trainer

    seen_gpus(monkeypatch, 0)
    trainer = Trainer(TrainerConfig(model="tiny"))
    assert (trainer.config.device, trainer.device) == ("cpu", torch.device("cpu"))
    assert TrainerConfig().device == "auto"
