#!/usr/bin/env bash
# Run a command as on an AVX2-only CPU (no AVX512 at all), on a machine that has AVX512:
# torch's kernels (ATEN_CPU_CAPABILITY) and oneDNN's (ONEDNN_MAX_CPU_ISA) held to AVX2, vLLM's
# AVX2 library (avx2_like/sitecustomize.py), and `dtype: auto` resolved to float32, as rlve
# resolves it where bf16 is not native. Example: benchmarks/avx2_like.sh make demo
here="$(cd "$(dirname "$0")" && pwd)"
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 RLVE_AUTO_DTYPE=float32
export PYTHONPATH="$here/avx2_like${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"
