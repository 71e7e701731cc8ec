"""`sync.lora=adapter`: vLLM on the CPU serves the trainer's LoRA adapter pushed alone, as it
serves the same adapter merged into every weight, and as the trainer computes it."""

import json

import pytest
import torch
from test_loop_vllm import PROBE, SMALL, trainer_logprobs

from rlve.config import InferenceConfig, LoraConfig, TrainerConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.loop import train
from rlve.models import resolve_model_path
from rlve.sync.adapter_push import write_adapter
from rlve.sync.shared_memory import weights_directory
from rlve.train import load_run_config
from rlve.training.trainer import Trainer

pytestmark = pytest.mark.vllm

FLOAT32_GAP = 1e-4
"""largest log-prob difference between vLLM's float32 kernels and the trainer's on the probe
(the other tests' bound: both sides float32, only their reduction order differs; an adapter
applied apart, x A B, and one merged, x (W + B A), differ by rounding of the same order)"""


def test_an_adapter_pushed_alone_serves_what_the_merged_push_and_the_trainer_give(tmp_path):
    lora = LoraConfig(enabled=True, rank=8, alpha=16.0)
    trainer = Trainer(TrainerConfig(model="tiny", dtype="float32", lora=lora))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # B starts at zero: give the adapter an effect worth checking
        for name, parameter in trainer.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(0.05 * torch.randn(parameter.shape, generator=generator))
    settings = InferenceConfig(dtype="float32", max_model_len=1024, cpu_kv_cache_gib=1)
    engine = VLLMEngine(resolve_model_path("tiny"), trainer.tokenizer, settings, lora_rank=8)
    directory = weights_directory()
    try:
        probe = trainer.tokenizer.encode(PROBE)
        base = engine.prompt_logprobs(probe)
        moved = write_adapter(trainer.model, directory)
        engine.push_adapter(str(directory), 1)
        adapter = engine.prompt_logprobs(probe)
        assert engine.weight_version == 1
        engine.push_weights(trainer.named_weights_for_inference(), 2)  # into the base weights
        merged = engine.prompt_logprobs(probe)
    finally:
        engine.shutdown()
    mine = trainer_logprobs(trainer, probe)

    def gap(a, b):
        return max(abs(x - y) for x, y in zip(a, b, strict=True))

    print(
        f"gaps: base {gap(base, mine):.3g}, adapter {gap(adapter, mine):.3g}, merged "
        f"{gap(merged, mine):.3g}, adapter-merged {gap(adapter, merged):.3g}"
    )
    assert gap(base, mine) > 100 * FLOAT32_GAP  # the adapter changes the model
    assert gap(adapter, mine) < FLOAT32_GAP and gap(merged, mine) < FLOAT32_GAP
    assert gap(adapter, merged) < FLOAT32_GAP
    adapter_params = sum(p.numel() for n, p in trainer.model.named_parameters() if "lora_" in n)
    assert moved == 4 * adapter_params  # float32 adapter tensors, nothing else


def test_a_tiny_lora_run_pushes_its_adapter_alone(tmp_path, warm_model):
    common = [*SMALL, f"trainer.model={warm_model}", "trainer.max_steps=2",
              "trainer.lora.enabled=true", "trainer.lora.rank=8"]  # fmt: skip
    sent = {}
    for push in ("merged", "adapter"):
        run_dir = tmp_path / push
        train(load_run_config([*common, f"sync.lora={push}", f"output_dir={run_dir}"]))
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [1, 2]
        sent[push] = rows[-1]["perf/sync_mb"]
    print(f"MB a push: {sent}")
    assert sent["adapter"] < sent["merged"] / 10
