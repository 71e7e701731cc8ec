"""Imported at the start of every Python process whose path holds this folder
(benchmarks/avx2_like.sh puts it there): torch reports no AVX512, so vLLM loads its AVX2 kernels
(vllm/platforms/cpu.py asks torch.cpu), as on a CPU without AVX512. torch's own kernels and
oneDNN's are held to AVX2 by the environment variables the script sets."""

import torch.cpu

torch.cpu._is_avx512_supported = lambda: False
torch.cpu._is_avx512_bf16_supported = lambda: False
