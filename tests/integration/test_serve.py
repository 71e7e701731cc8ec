"""`python -m rlve.serve` started on its own, as on another node: the trainer generates from it
over HTTP and pushes weights into it over a gloo group on loopback; it serves them exactly.

The served model's generation_config.json asks for top_k 2 and penalties, as hub models do
(Qwen3: top_k 20): vLLM's server applies those to every field a request leaves out, so the
sampled tokens' log-probs would come from a truncated distribution instead of the trainer's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
import torch
from test_loop_vllm import trainer_logprobs

from rlve.config import InferenceConfig, TrainerConfig
from rlve.inference.engine import GenerationRequest, SamplingConfig
from rlve.inference.remote_engine import RemoteVLLMEngine, ServerError
from rlve.inference.serve_guard import SECRET_ENV
from rlve.models import resolve_model_path
from rlve.serve import serve_command
from rlve.training.trainer import Trainer

pytestmark = pytest.mark.vllm


def test_the_serve_command_adds_rlve_options_and_cpu_defaults():
    command = serve_command(["/m", "--port", "9000"], on_cpu=True)
    assert command[3:6] == ["--model", "/m", "--port"]
    assert "rlve.inference.vllm_worker.WeightSyncExtension" in command
    assert command[command.index("--dtype") + 1] == "float32"  # RLVE_AUTO_DTYPE (conftest)
    assert "--no-enable-chunked-prefill" in command
    assert command[command.index("--host") + 1] == "127.0.0.1"  # unless a host is given
    assert command[command.index("--middleware") + 1] == "rlve.inference.serve_guard.ServeGuard"
    assert serve_command(["/m", "--host", "0.0.0.0"], on_cpu=True).count("--host") == 1
    assert "--host" not in serve_command(["/m", "--host=0.0.0.0"], on_cpu=True)
    assert "--dtype" not in serve_command(["/m", "--dtype=bfloat16"], on_cpu=True)
    assert "--dtype" not in serve_command(["/m"], on_cpu=False)
    with pytest.raises(ValueError, match="--logprobs-mode is set by rlve.serve"):
        serve_command(["/m", "--logprobs-mode", "raw_logprobs"], on_cpu=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_with_sampling_defaults(folder) -> str:
    """The tiny model, its generation_config.json asking for a narrow, penalised distribution."""
    model = shutil.copytree(resolve_model_path("tiny"), folder / "tiny_top_k_2")
    config = json.loads((model / "generation_config.json").read_text())
    config.update(top_k=2, min_p=0.2, repetition_penalty=1.5)
    (model / "generation_config.json").write_text(json.dumps(config))
    return str(model)


SECRET = "test-secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    model = tiny_with_sampling_defaults(tmp_path_factory.mktemp("model"))
    process = subprocess.Popen(
        [sys.executable, "-m", "rlve.serve", model, "--port", str(port), "--host", "127.0.0.1",
         "--max-model-len", "512"],
        env={**os.environ, SECRET_ENV: SECRET},
        start_new_session=True,  # its own process group: the engine and workers go with it
    )  # fmt: skip
    yield f"http://127.0.0.1:{port}"
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def test_a_served_teacher_scores_as_the_same_model_held_here(server, monkeypatch):
    """trainer.distill.teacher_server: the teacher's log-probs of a step's sampled tokens come
    from the server's prompt_logprobs (the tiny model's weights, its generation config asking
    for a narrow distribution that the request overrides), and agree with the same model held
    beside the trainer. Runs before any test pushes other weights into the server."""
    from rlve.algorithms.train_sequences import TrainSequence
    from rlve.config.distill import DistillConfig

    monkeypatch.setenv(SECRET_ENV, SECRET)
    here = Trainer(TrainerConfig(distill=DistillConfig(teacher="tiny")))
    served = Trainer(TrainerConfig(distill=DistillConfig(teacher="tiny", teacher_server=server)))
    ids = here.tokenizer.encode("<|im_start|>user\nplay<|im_end|>\n<|im_start|>assistant\n4 5")
    sequences = [TrainSequence(ids, [0] * (len(ids) - 3) + [1] * 3),
                 TrainSequence(ids[:-1], [0] * (len(ids) - 3) + [1, 1])]  # fmt: skip
    mine, theirs = here.teacher.logprobs(sequences), served.teacher.logprobs(sequences)
    assert [len(s) for s in theirs] == [3, 2]
    # float32 on both sides, other kernels: ~1e-5 apart (as in the push test below)
    for a, b in zip(mine, theirs, strict=True):
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-4
    assert served.teacher.check.passed and here.teacher.check.max_difference == 0.0


def test_a_trainer_pushes_into_a_separate_server_and_it_serves_those_weights(server, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    trainer = Trainer(TrainerConfig())
    settings = InferenceConfig(max_model_len=512, weight_transport="gloo", start_timeout_s=600)
    probe = trainer.tokenizer.encode("<|im_start|>user\nplay<|im_end|>\n<|im_start|>assistant\n")
    with RemoteVLLMEngine([server], trainer.tokenizer, settings) as engine:
        before = engine.prompt_logprobs(probe)
        with torch.no_grad():
            for parameter in trainer.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.02)
        assert engine.served_dtype == "float32"  # RLVE_AUTO_DTYPE (tests/conftest.py)
        seconds = engine.push_weights(trainer.named_weights_for_inference(), version=1)
        served = engine.prompt_logprobs(probe)
        mine = trainer_logprobs(trainer, probe)
        assert seconds > 0 and engine.weight_version == 1
        assert max(abs(a - b) for a, b in zip(before, served, strict=True)) > 1e-3
        # float32 on both sides, other kernels: the logits' sums (128 wide, then the softmax
        # over the vocabulary) round differently, ~1e-5 absolute; 1e-4 leaves a factor of 10
        assert max(abs(a - b) for a, b in zip(served, mine, strict=True)) < 1e-4

        import asyncio

        request = GenerationRequest([], SamplingConfig(max_tokens=8, seed=3), prompt_ids=probe)
        generation = asyncio.run(engine.generate(request))
        assert len(generation.token_ids) == len(generation.logprobs) >= 1
        assert generation.weight_version == 1 and engine.requests_per_replica == [1]
        # the sampled tokens' log-probs are the trainer's, of the whole distribution (the same
        # weights in float32 on both sides, temperature 1)
        sequence = probe + generation.token_ids
        mine = trainer_logprobs(trainer, sequence)[len(probe) - 1 :]
        assert max(abs(a - b) for a, b in zip(generation.logprobs, mine, strict=True)) < 1e-4


def test_the_server_refuses_callers_without_its_secret(server, monkeypatch):
    import httpx

    load_a_file = {"method": "rlve_load_weights_file", "args": ["/etc/passwd"]}
    refused = httpx.post(server + "/collective_rpc", json=load_a_file, timeout=30)
    assert refused.status_code == 401
    dev_endpoint = httpx.post(server + "/sleep", timeout=30,
                              headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert dev_endpoint.status_code == 404
    monkeypatch.setenv(SECRET_ENV, "not-the-secret")
    settings = InferenceConfig(max_model_len=512, start_timeout_s=600)
    with pytest.raises(ServerError, match=f"401.*{SECRET_ENV}"):
        RemoteVLLMEngine([server], Trainer(TrainerConfig()).tokenizer, settings)
