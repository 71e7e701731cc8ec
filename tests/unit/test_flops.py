"""The FLOP count of a train step (rlve.training.flops) by hand and against torch's counter, and
the peaks perf/mfu divides by (rlve.training.peak)."""

import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import rlve.training.peak as peak_module
from rlve.algorithms.packing import build_train_batch
from rlve.algorithms.train_sequences import TrainSequence
from rlve.models import load_causal_lm
from rlve.training.flops import ModelShape, forward_flops, forwarded_positions
from rlve.training.logprobs import sequence_logprobs
from rlve.training.peak import Peak, gpu_peak_tflops, measured_cpu_tflops, run_peak
from rlve.training.step_metrics import with_perf

TINY = ModelShape(hidden=128, intermediate=512, layers=4, heads=4, kv_heads=2, head_dim=32,
                  vocab=2048)  # fmt: skip
"""the embedded tiny model's shape (a Qwen2 config)"""


def test_the_tiny_models_shape_and_a_forward_counted_by_hand():
    assert ModelShape.of(load_causal_lm("tiny", "float32", "cpu").config) == TINY
    # q and o: 2 x 128 x 4 x 32; k and v: 2 x 128 x 2 x 32; gate, up, down: 3 x 128 x 512
    assert TINY.layer_weights == 32_768 + 16_384 + 196_608 == 245_760
    # 3 tokens at positions 0, 1, 2 (keys read 1 + 2 + 3), the head on 2 of them
    projections = 2 * 4 * 245_760 * 3
    attention = 4 * 4 * 4 * 32 * 6
    head = 2 * 128 * 2048 * 2
    assert projections + attention + head == 5_898_240 + 12_288 + 1_048_576
    assert forward_flops(TINY, torch.tensor([0, 1, 2]), head_tokens=2) == 6_959_104


def test_the_count_is_torchs_for_the_matrix_products_and_a_backward_is_two_forwards():
    model = load_causal_lm("tiny", "float32", "cpu")
    ids = torch.randint(0, 2048, (1, 16), generator=torch.Generator().manual_seed(0))
    trained = torch.zeros_like(ids, dtype=torch.bool)
    trained[0, 8:] = True
    with FlopCounterMode(display=False) as counter:
        logp, _ = sequence_logprobs(model, ids, torch.ones_like(ids), trained)
        logp.sum().backward()
    ours = forward_flops(TINY, torch.arange(16), head_tokens=8)
    # torch's counter sees the projections and the head (matrix products), not this attention
    attention = 4 * 4 * 4 * 32 * sum(range(1, 17))
    assert counter.get_total_flops() == 3 * (ours - attention)


def test_forwarded_positions_of_a_tree_padded_rows_and_packed_rows():
    sequences = [TrainSequence([5, 6, 7], [0, 1, 1]), TrainSequence([5, 6, 8, 9], [0, 0, 1, 1])]
    tree = build_train_batch(sequences, max_tokens=100, pad_token_id=0, packing="packed",
                             single_row=True, share_prefixes=True).micro_batches[0]  # fmt: skip
    assert forwarded_positions(tree).tolist() == [0, 1, 2, 2, 3]  # 5, 6 forwarded once
    for packing in ("padded", "packed"):
        batch = build_train_batch(sequences, max_tokens=100, pad_token_id=0, packing=packing)
        micro = batch.micro_batches[0]
        assert sorted(forwarded_positions(micro).tolist()) == [0, 0, 1, 1, 2, 2, 3]


def test_perf_metrics_divide_the_flops_by_the_time_and_the_peak():
    batch = build_train_batch([TrainSequence([1, 2, 3], [0, 1, 1])], max_tokens=100, pad_token_id=0)
    started = time.perf_counter() - 2.0
    given = Peak(8.0, "given", "float32")
    metrics = with_perf({}, [batch], started, 1, flops=4e12, peak=given)
    assert metrics["perf/train_flops"] == 4e12
    assert metrics["perf/train_tflops"] == pytest.approx(4 / metrics["perf/train_s"])
    assert metrics["perf/mfu"] == pytest.approx(metrics["perf/train_tflops"] / 8.0)
    assert metrics["perf/peak_threads"] == 0  # not measured
    assert "perf/mfu" not in with_perf({}, [batch], started, 1, flops=4e12, peak=None)
    unknown = Peak(None, "datasheet", "float32")  # a GPU the table does not know
    assert "perf/mfu" not in with_perf({}, [batch], started, 1, flops=4e12, peak=unknown)
    uncounted = with_perf({}, [batch], started, 1, flops=None, peak=given)  # no shape
    assert "perf/train_flops" not in uncounted and "perf/mfu" not in uncounted


@pytest.mark.parametrize(("name", "dtype", "peak"), [
    ("NVIDIA H100 80GB HBM3", "bfloat16", 989.0),
    ("NVIDIA H100 PCIe", "bfloat16", 756.0),
    ("NVIDIA H200", "bfloat16", 989.0),
    ("NVIDIA A100-SXM4-80GB", "bfloat16", 312.0),
    ("NVIDIA H100 80GB HBM3", "float32", None),
    ("NVIDIA GeForce GTX 1080", "bfloat16", None),
])  # fmt: skip
def test_a_gpus_peak_comes_from_its_name_in_bf16_only(name, dtype, peak):
    assert gpu_peak_tflops(name, dtype) == peak


def test_the_cpu_calibration_is_a_positive_rate():
    first = measured_cpu_tflops("float32", 1, size=256, repeats=2)
    assert 0 < first < 100  # two cores reach about 0.1-0.5 TFLOP/s; no CPU core reaches 100


def test_a_cpus_peak_is_the_fastest_of_its_measurements_then_stays(monkeypatch):
    # a measurement that shared the cores reads low: the fastest of CPU_MEASUREMENTS counts
    readings = iter([0.10, 0.30, 0.20, 0.25, 9.0])
    monkeypatch.setattr(peak_module, "measured_cpu_tflops", lambda dtype, threads: next(readings))
    peak = run_peak(torch.device("cpu"), "float32")
    assert (peak.source, peak.threads, peak.tflops) == ("measured", torch.get_num_threads(), 0.10)
    assert [peak.read() for _ in range(5)] == [0.30, 0.30, 0.30, 0.30, 0.30]  # 4 in all
    assert "0.300 TFLOP/s, the fastest float32 1,024^3 product" in str(peak)
    given = run_peak(torch.device("cpu"), "float32", given=2.5)
    assert (given.source, given.read(), given.threads) == ("given", 2.5, 0)
    assert run_peak(torch.device("cpu"), "float32", given=0.0).read() is None  # 0: no perf/mfu


def test_a_steps_time_leaves_out_the_peaks_measurement(monkeypatch):
    # the peak is measured again after the first steps: after their time is taken, not in it
    def slow_measurement(dtype, threads):
        time.sleep(0.5)
        return 1.0

    monkeypatch.setattr(peak_module, "measured_cpu_tflops", slow_measurement)
    from rlve.config import TrainerConfig
    from rlve.training.trainer import Trainer
    from rlve.types import RolloutGroup, Trajectory

    games = [
        Trajectory(prompt=[], completion=[], token_ids=[5, 6, 7, 8 + i], loss_mask=[0, 0, 1, 1],
                   reward=float(i == 0))
        for i in range(4)
    ]  # fmt: skip
    trainer = Trainer(TrainerConfig(dtype="float32"))
    started = time.perf_counter()
    metrics = trainer.train_step([RolloutGroup(example_id=0, env_name="t", trajectories=games)])
    outside = time.perf_counter() - started
    assert outside - metrics["perf/train_s"] >= 0.5
    assert metrics["perf/peak_tflops"] == 1.0 and metrics["perf/peak_threads"] >= 1
