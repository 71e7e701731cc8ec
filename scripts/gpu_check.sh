#!/usr/bin/env bash
# Every `gpu`-marked test, on a machine with CUDA: the first thing to run when a GPU is at hand.
#
#   scripts/gpu_check.sh            # uses .venv/bin/python when there is one, else python3
#   PYTHON=/path/to/python scripts/gpu_check.sh -x
#
# Needs torch with CUDA, transformers, peft, safetensors, tokenizers and pytest. Covers: sharded
# steps under torchrun with NCCL (gloo for the CPU collectives; uneven work with two GPUs), the
# trainer on CUDA against the CPU, bf16 full fine-tuning (float32 weights) and bf16 LoRA, the
# NCCL weight broadcast into a process that loads it as vLLM's worker does (two GPUs), FSDP2
# pushes and the export gathering one tensor at a time (two GPUs), and packed micro-batches on
# CUDA (sdpa, and flash-attention-2 when flash-attn is installed), the prefix tree's attention
# in buckets and in one FlexAttention call against a call per segment (test_tree_buckets.py,
# test_tree_flex.py; timed: bench_tree_attention.py), the fused element-wise kernels
# (torch.compile, and liger-kernel when installed). With a CUDA build of vLLM
# (`pip install -e '.[gpu]'`) also a real engine on GPU 0 that takes a push and serves the
# trainer's log-probs, a two-step run shown one GPU (`trainer.device=auto` puts the trainer
# beside vLLM, which takes 40% of it), the worker's GPU memory during a push
# (bench_push_memory.py), and a LoRA adapter pushed alone (test_gpu_vllm.py, against the merged
# push: bench_adapter_push.py); without one those are skipped, each with a line saying so. Under
# 10 minutes on one GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
"$PYTHON" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: scripts/gpu_check.sh needs one"
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {len(names)} GPU(s): {names}")
PY
"$PYTHON" -m pytest -m gpu -v -p no:cacheprovider -rs tests/integration/test_gpu_paths.py \
    tests/integration/test_gpu_vllm.py tests/unit/test_packed_parity.py tests/unit/test_fused.py \
    tests/unit/test_tree_buckets.py tests/unit/test_tree_flex.py "$@"
# the prefix tree's attention per segment, in buckets and with FlexAttention, Qwen3-0.6B's heads
"$PYTHON" benchmarks/bench_tree_attention.py --groups 8 --group-size 8 --heads 16 --kv-heads 8 \
    --head-dim 128 --device cuda --dtype bfloat16
if "$PYTHON" -c "from vllm.platforms import current_platform as p; assert p.is_cuda()" 2>/dev/null
then
    "$PYTHON" benchmarks/bench_push_memory.py --model tiny --dtype bfloat16
    "$PYTHON" benchmarks/bench_adapter_push.py --model tiny --dtype bfloat16 --pushes 3
else
    echo "skipped: benchmarks/bench_push_memory.py, bench_adapter_push.py (no CUDA build of vLLM)"
fi
