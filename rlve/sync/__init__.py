"""Getting the trainer's weights into the inference engine, and where each of them runs.

`shared_memory`: a safetensors file in RAM that vLLM reloads in place; `broadcast`: a NCCL or
gloo group that streams the tensors with no file; `placement`: the GPUs of vLLM and the trainer,
checked before anything starts. Imports nothing of rlve, so any layer may use it.
"""
