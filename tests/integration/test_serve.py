"""`python -m rlve.serve` started on its own, as on another node: the trainer generates from it
over HTTP and pushes weights into it over a gloo group on loopback; it serves them exactly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
import torch
from test_loop_vllm import trainer_logprobs

from rlve.config import InferenceConfig, TrainerConfig
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.remote_engine import RemoteVLLMEngine
from rlve.models import resolve_model_path
from rlve.serve import serve_command
from rlve.training.trainer import Trainer

pytestmark = pytest.mark.vllm


def test_the_serve_command_adds_rlve_options_and_cpu_defaults():
    command = serve_command(["/m", "--port", "9000"], on_cpu=True)
    assert command[3:6] == ["--model", "/m", "--port"]
    assert "rlve.inference.vllm_worker.WeightSyncExtension" in command
    assert command[command.index("--dtype") + 1] == "float32"
    assert "--no-enable-chunked-prefill" in command
    assert "--dtype" not in serve_command(["/m"], on_cpu=False)
    with pytest.raises(ValueError, match="--logprobs-mode is set by rlve.serve"):
        serve_command(["/m", "--logprobs-mode", "raw_logprobs"], on_cpu=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    model = resolve_model_path("tiny")
    process = subprocess.Popen(
        [sys.executable, "-m", "rlve.serve", model, "--port", str(port), "--host", "127.0.0.1",
         "--max-model-len", "512"],
        start_new_session=True,  # its own process group: the engine and workers go with it
    )  # fmt: skip
    yield f"http://127.0.0.1:{port}"
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def test_a_trainer_pushes_into_a_separate_server_and_it_serves_those_weights(server):
    trainer = Trainer(TrainerConfig())
    settings = InferenceConfig(max_model_len=512, weight_transport="gloo", start_timeout_s=600)
    probe = trainer.tokenizer.encode("<|im_start|>user\nplay<|im_end|>\n<|im_start|>assistant\n")
    with RemoteVLLMEngine([server], trainer.tokenizer, settings) as engine:
        before = engine.prompt_logprobs(probe)
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.02)
        seconds = engine.push_weights(trainer.named_weights_for_inference(), version=1)
        served = engine.prompt_logprobs(probe)
        mine = trainer_logprobs(trainer, probe)
        assert seconds > 0 and engine.weight_version == 1
        assert max(abs(a - b) for a, b in zip(before, served, strict=True)) > 1e-3
        assert max(abs(a - b) for a, b in zip(served, mine, strict=True)) < 1e-4

        import asyncio

        request = GenerationRequest([], SamplingConfig(max_tokens=8, seed=3), prompt_ids=probe)
        generation = asyncio.run(engine.generate(request))
        assert len(generation.token_ids) == len(generation.logprobs) >= 1
        assert generation.weight_version == 1 and engine.requests_per_replica == [1]
        # the sampled tokens' log-probs are the served model's own (same weights, temperature 1)
        rescored = engine.prompt_logprobs(probe + generation.token_ids)[len(probe) - 1 :]
        assert max(abs(a - b) for a, b in
                   zip(generation.logprobs, rescored, strict=False)) < 1e-4  # fmt: skip
