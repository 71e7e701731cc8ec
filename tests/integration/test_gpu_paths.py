"""The GPU paths, each with a CPU twin that `make test` runs: a weight push broadcast into a
process that loads it as vLLM's worker does (gloo here; NCCL between two GPUs), sharded steps
under torchrun (NCCL with gloo for the CPU collectives), the trainer on CUDA against the CPU,
and bf16 on CUDA. `scripts/gpu_check.sh` runs every `gpu` case; none needs vLLM.
"""

import multiprocessing
import subprocess
import sys

import pytest
import torch
from test_bf16_training import trained
from test_sharded_trainer import SCRIPT, assert_same_steps, torchrun

from rlve.config import TrainerConfig
from rlve.sync.broadcast import TensorSpec, WeightBroadcaster, join_weight_group, receive_weights
from rlve.training.trainer import Trainer
from rlve.types import RolloutGroup, Trajectory

GPUS = torch.cuda.device_count()
needs_a_gpu = pytest.mark.skipif(GPUS < 1, reason="needs a GPU")
PROBE = [82, 272, 91, 223, 90, 284, 19, 7]


def probe_logprobs(model, device) -> list[float]:
    """Log-prob of each probe token after the first under `model` (a causal LM), in float64."""
    with torch.no_grad():
        logits = model(torch.tensor([PROBE], device=device)).logits[0, :-1].double()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, torch.tensor(PROBE[1:], device=device)[:, None])[:, 0].tolist()


def receiver_process(port, backend, device, specs, results) -> None:
    """Rank 1 in its own process, as a vLLM worker: join the group, load each tensor into the
    served model as it arrives (vLLM's reload_weights), report the model's probe log-probs."""
    from rlve.models import load_causal_lm

    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    model = load_causal_lm("tiny", device=device).eval()
    parameters = model.state_dict(keep_vars=True)  # the tied head under its own name too
    group = join_weight_group("127.0.0.1", port, 1, 2, backend, timeout_s=60)
    with torch.no_grad():
        for name, tensor in receive_weights(group, [TensorSpec.from_wire(s) for s in specs],
                                            device):  # fmt: skip
            parameters[name].copy_(tensor)
    results.put((str(next(model.parameters()).device), probe_logprobs(model, device)))


@pytest.mark.parametrize(
    "backend, sender, receiver",
    [
        ("gloo", "cpu", "cpu"),
        pytest.param("nccl", "cuda:0", "cuda:1", marks=pytest.mark.gpu),
    ],
)
def test_a_pushed_trainer_is_served_exactly_by_the_receiving_process(backend, sender, receiver):
    if backend == "nccl" and GPUS < 2:
        pytest.skip("NCCL refuses two ranks on one GPU: this needs two")
    trainer = Trainer(TrainerConfig(model="tiny", lr=1e-2, device=sender))
    trainer.train_step([group()])  # weights the receiver's copy from disk does not have
    broadcaster = WeightBroadcaster(backend, world_size=2, timeout_s=60)
    specs, tensors = broadcaster.plan(trainer.named_weights_for_inference())
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    wire = [spec.to_wire() for spec in specs]
    process = context.Process(
        target=receiver_process, args=(broadcaster.store_port, backend, receiver, wire, results)
    )
    process.start()
    broadcaster.connect()
    broadcaster.send(tensors)
    device, served = results.get(timeout=120)
    process.join(60)
    broadcaster.close()
    assert process.exitcode == 0
    assert device == receiver
    mine = probe_logprobs(trainer.causal_lm, sender)
    # the same float32 weights on both sides (the tied head came as its own tensor): log-probs
    # equal up to the kernels' summation order, ~1e-6 on a 128-wide model; 1e-4 to spare
    assert max(abs(a - b) for a, b in zip(mine, served, strict=True)) < 1e-4


# ---- sharded steps under torchrun ------------------------------------------------------------


@pytest.mark.gpu
@needs_a_gpu
def test_sharded_steps_on_gpus_take_the_steps_of_one_gpu_process(tmp_path):
    """One rank per GPU (at most two) with NCCL, against one process on cuda:0; with two ranks
    the later steps give one rank an idle micro-batch. Even one rank reduces CPU tensors (the
    step's counts) through the group's gloo backend."""
    ranks = min(GPUS, 2)
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    subprocess.run([sys.executable, str(SCRIPT), str(one), "--device", "cuda"], check=True)
    subprocess.run(torchrun(ranks, str(SCRIPT), str(sharded), "--device", "cuda"), check=True)
    for case in ("cispo", "dapo_lora"):
        single, split = (torch.load(run / f"{case}.pt") for run in (one, sharded))
        assert_same_steps(single, split, idle=[0, 1, 1] if ranks == 2 else [0, 0, 0])


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
@needs_a_gpu
@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo"])
def test_a_cuda_step_matches_the_cpu_step(loss):
    metrics = {}
    for device in ("cpu", "cuda"):
        config = TrainerConfig(model="tiny", loss=loss, lr=1e-2, adam_eps=1.0, device=device)
        trainer = Trainer(config)
        metrics[device] = [trainer.train_step([group()]) for _ in range(3)]
        weights_on = {str(t.device) for _, t in trainer.named_weights_for_inference()}
        assert weights_on == ({"cpu"} if device == "cpu" else {"cuda:0"})
    for cpu, cuda in zip(metrics["cpu"], metrics["cuda"], strict=True):
        # float32 on both (TF32 is off for matmuls by default): other kernels sum in another
        # order, ~1e-6 relative; adam_eps 1 keeps AdamW smooth in the gradient (see
        # test_sharded_trainer), so later steps stay as close; 1e-4 to spare
        assert cuda["train/loss"] == pytest.approx(cpu["train/loss"], rel=1e-4, abs=1e-6)
        assert cuda["train/num_tokens"] == cpu["train/num_tokens"] == 12


@pytest.mark.gpu
@needs_a_gpu
def test_bf16_full_finetuning_on_cuda_keeps_float32_weights_that_move():
    """The CPU test's premise and check (test_bf16_training) under CUDA's bf16 kernels."""
    (start32, end32), (start16, end16) = trained("float32", "cuda"), trained("bfloat16", "cuda")
    moved32, moved16 = end32 != start32, end16 != start16
    assert float(moved32.float().mean()) > 0.5
    assert float((moved16 == moved32).float().mean()) > 0.999


@pytest.mark.gpu
@needs_a_gpu
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
