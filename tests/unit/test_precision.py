"""`dtype: auto`: bfloat16 where the CPU or GPU computes it natively, float32 elsewhere."""

import pytest
import torch

from rlve.config import TrainerConfig
from rlve.models.precision import (
    AUTO_ENV,
    auto_dtype,
    cpu_flags,
    cpu_has_native_bf16,
    cpu_kind,
    resolve_dtype,
)
from rlve.training.trainer import Trainer

ZEN4 = """processor\t: 0
flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni
"""
SKYLAKE = "flags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx512f amx_tile amx_bf16 amx_int8\n"
NEOVERSE_V1 = "Features\t: fp asimd sve bf16 i8mm\n"


def test_cpu_flags_come_from_flags_and_features_lines():
    assert cpu_flags(ZEN4) == {"fpu", "vme", "sse2", "avx2", "avx512f", "avx512_bf16",
                               "avx512_vnni"}  # fmt: skip
    assert cpu_flags(NEOVERSE_V1) == {"fp", "asimd", "sve", "bf16", "i8mm"}
    assert cpu_flags("model name\t: avx512_bf16 in its name\n") == set()


@pytest.mark.parametrize(("cpuinfo", "vector_isa", "kind"), [
    (ZEN4, "AVX512", "AVX512-BF16"),
    (ZEN4, "AVX2", "AVX2"),  # torch held to AVX2 (benchmarks/avx2_like.sh)
    (SAPPHIRE_RAPIDS, "AVX512", "AMX"),
    (SKYLAKE, "AVX512", "AVX512"),
    ("flags\t\t: fpu sse2 avx2 fma\n", "AVX2", "AVX2"),
    (NEOVERSE_V1, "DEFAULT", "other"),
])  # fmt: skip
def test_the_cpu_kind_the_docs_group_timings_by(cpuinfo, vector_isa, kind):
    assert cpu_kind(cpu_flags(cpuinfo), vector_isa) == kind


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [(ZEN4, True), (SAPPHIRE_RAPIDS, True), (NEOVERSE_V1, True), (SKYLAKE, False)],
)
def test_native_bf16_cpus(tmp_path, cpuinfo, native):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    assert cpu_has_native_bf16(path) is native


def test_a_missing_cpuinfo_means_float32(tmp_path):
    assert cpu_has_native_bf16(tmp_path / "absent") is False


def test_auto_follows_the_hardware_unless_the_variable_says(monkeypatch):
    monkeypatch.delenv(AUTO_ENV)
    assert auto_dtype(lambda: True) == "bfloat16"
    assert auto_dtype(lambda: False) == "float32"
    monkeypatch.setenv(AUTO_ENV, "float32")
    assert auto_dtype(lambda: pytest.fail("the hardware is not asked")) == "float32"
    monkeypatch.setenv(AUTO_ENV, "bf16")
    with pytest.raises(ValueError, match=r"RLVE_AUTO_DTYPE must be one of .*'bf16'"):
        auto_dtype(lambda: True)


def test_a_named_dtype_is_kept_whatever_the_hardware(monkeypatch):
    monkeypatch.setenv(AUTO_ENV, "bfloat16")
    assert resolve_dtype("float32", "cpu") == "float32"
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    assert resolve_dtype("auto", "cpu") == "bfloat16"


@pytest.mark.parametrize(("auto", "autocast"), [("bfloat16", True), ("float32", False)])
def test_the_trainer_resolves_auto_once_and_keeps_float32_weights(monkeypatch, auto, autocast):
    monkeypatch.setenv(AUTO_ENV, auto)
    trainer = Trainer(TrainerConfig(model="tiny"))
    assert trainer.config.dtype == auto  # also what its checkpoints record
    assert trainer.scorer.autocast_bf16 is autocast
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
