"""The device's peak FLOP/s in the run's dtype: the denominator of perf/mfu.

A GPU's comes from its name (GPU_BF16_PEAK_TFLOPS, the vendor's dense bf16 figure); a CPU's is
measured once per process by a short matrix product in the run's dtype on the trainer's threads
(`measured_cpu_tflops`): what this CPU reaches on a square product, a practical peak rather than
the datasheet's, so a CPU's MFU says how far the step is from what its matrix products can do.
"""

from __future__ import annotations

import functools
import time

import torch

GPU_BF16_PEAK_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
)
"""(name substring, dense bf16 tensor TFLOP/s) from NVIDIA's datasheets; the first whose
substring is in torch.cuda.get_device_name() applies (H100 PCIe before H100)"""


def gpu_peak_tflops(name: str, dtype: str) -> float | None:
    """The table's bf16 peak of the GPU called `name`; None for another dtype or an unknown
    card (set trainer.peak_tflops). Example: "NVIDIA H100 80GB HBM3", "bfloat16" -> 989.0."""
    if dtype != "bfloat16":
        return None
    return next((peak for part, peak in GPU_BF16_PEAK_TFLOPS if part in name), None)


@functools.cache
def measured_cpu_tflops(dtype: str, threads: int, size: int = 1024, repeats: int = 8) -> float:
    """TFLOP/s of the fastest of `repeats` [size, size] x [size, size] products in `dtype` on
    `threads` torch threads (about 0.1-0.5 s on two cores); cached per process."""
    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(torch_dtype)
    b = torch.randn(size, size, generator=generator).to(torch_dtype)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.mm(a, b)  # the first call picks and warms up its kernel
        fastest = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            torch.mm(a, b)
            fastest = min(fastest, time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)
    return 2 * size**3 / fastest / 1e12


def peak_tflops(device: torch.device, dtype: str) -> float | None:
    """The peak perf/mfu divides by on `device` computing in `dtype` (module docstring)."""
    if device.type == "cuda":
        return gpu_peak_tflops(torch.cuda.get_device_name(device), dtype)
    if device.type == "cpu":
        return measured_cpu_tflops(dtype, torch.get_num_threads())
    return None
