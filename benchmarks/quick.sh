#!/usr/bin/env bash
# `make bench`: the benchmarks quick enough to run on any change, one after another, each printing
# its figures. Each takes well under two minutes on two CPU cores: the embedded tiny model or no
# model at all, and no vLLM. The others (SmolLM2, vLLM, GPUs, TRL) are run by hand with the
# commands in benchmarks/README.md.
#
#   benchmarks/quick.sh            # uses .venv/bin/python when there is one, else python3
#   PYTHON=echo benchmarks/quick.sh   # print the commands only
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
QUICK=(
    "bench_trainer.py --cases tiny-full tiny-lora"   # the trainer's step, tiny model: seconds
    "bench_packing.py"                               # padded vs packed micro-batches, tiny: ~30 s
    "bench_envs.py"                                  # problems per second by env family: ~20 s
    "bench_tool_envs.py --no-vllm --episodes 16"     # tool environments, scripted engine: ~30 s
    "bench_attention.py --repeats 10"                # the CPU's attention kernels, no model
    "bench_tree_attention.py"                        # prefix-tree attention, no model
)
for line in "${QUICK[@]}"; do
    echo "== benchmarks/$line"
    # shellcheck disable=SC2086  # the line is the script's name, then its flags, word by word
    "$PYTHON" benchmarks/$line
done
