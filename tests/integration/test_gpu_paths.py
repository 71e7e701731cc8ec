"""The GPU paths: the weight broadcast between two processes (gloo on CPU here; NCCL between two
GPUs, marker `gpu`) and the trainer on CUDA against the same step on CPU (marker `gpu`).
`make test` runs the CPU case; the GPU cases need `pytest -m gpu` on a machine with GPUs."""

import multiprocessing

import pytest
import torch

from rlve.config import TrainerConfig
from rlve.sync.broadcast import (
    TensorSpec,
    WeightBroadcaster,
    join_weight_group,
    receive_weights,
)
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory


def receiver_process(port, backend, device, specs, results) -> None:
    """Rank 1 in its own process, like a vLLM worker: receive one push, report checksums."""
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    group = join_weight_group("127.0.0.1", port, 1, 2, backend, timeout_s=60)
    received = dict(receive_weights(group, [TensorSpec.from_wire(s) for s in specs], device))
    results.put({name: (str(t.device), t.double().sum().item()) for name, t in received.items()})


def weights(device: str) -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        ("model.embed_tokens.weight", torch.randn(64, 16, generator=generator).to(device)),
        ("model.norm.weight", torch.randn(16, generator=generator).to(torch.bfloat16).to(device)),
    ]


@pytest.mark.parametrize(
    "backend, sender, receiver",
    [
        ("gloo", "cpu", "cpu"),
        pytest.param("nccl", "cuda:0", "cuda:1", marks=pytest.mark.gpu),
    ],
)
def test_a_push_crosses_processes_exactly(backend, sender, receiver):
    if backend == "nccl" and torch.cuda.device_count() < 2:
        pytest.skip("NCCL between two ranks needs two GPUs")
    broadcaster = WeightBroadcaster(backend, world_size=2, timeout_s=60)
    specs, tensors = broadcaster.plan(weights(sender))
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    wire = [spec.to_wire() for spec in specs]
    process = context.Process(
        target=receiver_process, args=(broadcaster.store_port, backend, receiver, wire, results)
    )
    process.start()
    broadcaster.connect()
    broadcaster.send(tensors)
    got = results.get(timeout=60)
    process.join(60)
    broadcaster.close()
    assert process.exitcode == 0
    for name, tensor in weights("cpu"):
        device, checksum = got[name]
        assert device.startswith(receiver.split(":")[0])
        assert checksum == tensor.double().sum().item()


# ---- the trainer on a GPU --------------------------------------------------------------------


def group() -> RolloutGroup:
    prompt = [82, 272, 91, 223, 90]
    completions = [[284, 19, 7], [289, 20, 8], [298, 21, 9], [365, 22, 10]]
    return RolloutGroup(
        example_id=0,
        env_name="test",
        trajectories=[
            Trajectory(
                prompt=[],
                completion=[],
                token_ids=prompt + completion,
                loss_mask=[0] * len(prompt) + [1] * len(completion),
                reward=float(i == 0),
            )
            for i, completion in enumerate(completions)
        ],
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo"])
def test_a_cuda_step_matches_the_cpu_step(loss):
    metrics = {}
    for device in ("cpu", "cuda"):
        trainer = Trainer(TrainerConfig(model="tiny", loss=loss, lr=1e-3, device=device))
        metrics[device] = [trainer.train_step([group()]) for _ in range(3)]
        weights_on = {str(t.device) for _, t in trainer.named_weights_for_inference()}
        assert weights_on == ({"cpu"} if device == "cpu" else {"cuda:0"})
    for cpu, cuda in zip(metrics["cpu"], metrics["cuda"], strict=True):
        assert cuda["train/loss"] == pytest.approx(cpu["train/loss"], rel=1e-3, abs=1e-5)
        assert cuda["train/num_tokens"] == cpu["train/num_tokens"] == 12


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_bf16_lora_step_on_cuda_is_finite_and_learns():
    from rlve.config import LoraConfig

    config = TrainerConfig(
        model="tiny",
        loss="cispo",
        lr=3e-2,
        device="cuda",
        dtype="bfloat16",
        lora=LoraConfig(enabled=True, rank=4, alpha=8.0),
    )
    trainer = Trainer(config)
    tokens, mask = group().trajectories[0].token_ids, group().trajectories[0].loss_mask
    before = trainer.sequence_logprob(tokens, mask)
    for _ in range(4):
        assert torch.isfinite(torch.tensor(trainer.train_step([group()])["train/loss"]))
    assert trainer.sequence_logprob(tokens, mask) > before
