"""The device's peak FLOP/s in the run's dtype: the denominator of perf/mfu.

A GPU's comes from its name (GPU_BF16_PEAK_TFLOPS, the vendor's dense bf16 figure); a CPU's is
measured by a short matrix product in the run's dtype on the trainer's threads
(`measured_cpu_tflops`): what this CPU reaches on a square product, a practical peak rather than
the datasheet's, so a CPU's MFU says how far the step is from what its matrix products can do.
A measurement that shares the cores (vLLM starting beside the trainer, a compile, another run)
reads low and would inflate the MFU, so a CPU's peak is measured CPU_MEASUREMENTS times, at start
and after each of the first train steps, and the fastest counts; `Peak` says where it came from.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

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


logger = logging.getLogger(__name__)

CPU_MEASUREMENTS = 4
"""times a CPU's peak is measured: at start and after each of the first 3 train steps"""


def measured_cpu_tflops(dtype: str, threads: int, size: int = 1024, repeats: int = 8) -> float:
    """TFLOP/s of the fastest of `repeats` [size, size] x [size, size] products in `dtype` on
    `threads` torch threads (about 0.1-0.5 s on two cores)."""
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


@dataclass
class Peak:
    """The TFLOP/s perf/mfu divides by, and where they came from."""

    tflops: float | None
    """None: unknown (no perf/mfu)"""
    source: str
    """"given" (trainer.peak_tflops), "datasheet" (a GPU's) or "measured" (a CPU's)"""
    dtype: str
    threads: int = 0
    """torch threads a measured peak ran on (0: not measured)"""
    measurements_left: int = 0

    def read(self) -> float | None:
        """The peak, measured once more first while measurements are left (the fastest counts)."""
        if self.measurements_left > 0:
            self.measurements_left -= 1
            self.tflops = max(self.tflops or 0.0, measured_cpu_tflops(self.dtype, self.threads))
        return self.tflops

    def __str__(self) -> str:
        if self.tflops is None:
            return f"no known {self.dtype} peak (set trainer.peak_tflops): no perf/mfu"
        if self.source == "measured":
            return (f"{self.tflops:.3f} TFLOP/s, the fastest {self.dtype} 1,024^3 product on "
                    f"{self.threads} threads so far ({CPU_MEASUREMENTS} measurements, at start "
                    "and after each of the first train steps)")  # fmt: skip
        return f"{self.tflops:.1f} TFLOP/s in {self.dtype}, {self.source}"


def run_peak(device: torch.device, dtype: str, given: float | None = None) -> Peak:
    """The peak perf/mfu divides by on `device` computing in `dtype` (module docstring); `given`
    (trainer.peak_tflops) wins, 0 meaning none."""
    if given is not None:
        peak = Peak(given or None, "given", dtype)
    elif device.type == "cuda":
        peak = Peak(gpu_peak_tflops(torch.cuda.get_device_name(device), dtype), "datasheet", dtype)
    elif device.type == "cpu":
        peak = Peak(None, "measured", dtype, torch.get_num_threads(), CPU_MEASUREMENTS)
        peak.read()
    else:
        peak = Peak(None, "unknown", dtype)
    logger.info("perf/mfu divides by %s", peak)
    return peak
