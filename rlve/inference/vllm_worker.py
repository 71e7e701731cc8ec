"""The part of rlve that runs inside vLLM's worker process: in-place weight reloads.

vLLM imports this class by name (`worker_extension_cls`) and mixes it into its worker, so its
methods can reach `self.model_runner`; the engine calls them through `collective_rpc`.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def tensors_of_file(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors of a safetensors file, read one by one into CPU memory as they are asked
    for."""
    from safetensors import safe_open

    with safe_open(path, framework="pt", device="cpu") as weights:
        for name in weights.keys():
            yield name, weights.get_tensor(name)


class WeightSyncExtension:
    """Reload the served weights in place, without restarting the engine. Reloads go through
    the worker's `reload_weights` (not its model runner's): vLLM sets its config around the
    call there and, in later versions, lends the KV cache's memory to it."""

    def rlve_load_weights_file(self, path: str, version: int) -> int:
        """Load every tensor of a safetensors file (HF checkpoint names) into the model, one
        tensor at a time from the CPU, as vLLM's own loader reads a checkpoint: the whole file
        never sits in the engine's memory (on a GPU, next to the model) at once."""
        self.reload_weights(weights_iterator=tensors_of_file(path), is_checkpoint_format=True)
        return version

    def rlve_model_dtype(self) -> str:
        """The dtype the model is served in, by vLLM's name ("bfloat16", "float32", ...); a
        server's caller also counts its workers by the answers."""
        return str(self.model_config.dtype).removeprefix("torch.")

    def rlve_join_weight_group(
        self,
        host: str,
        port: int,
        world_size: int,
        first_rank: int,
        backend: str,
        timeout_s: float,
    ) -> int:
        """Join the trainer's broadcast group (the trainer is rank 0; this replica's workers take
        the ranks from `first_rank` on); returns this worker's rank."""
        from rlve.sync.broadcast import join_weight_group

        rank = first_rank + self.rank
        self.rlve_weight_group = join_weight_group(host, port, rank, world_size, backend, timeout_s)
        self.rlve_weight_device = "cpu" if backend == "gloo" else self.device
        return rank

    def rlve_receive_weights(self, specs: list[list], version: int) -> int:
        """Load the tensors the trainer broadcasts, as they arrive (specs as `TensorSpec` wires)."""
        from rlve.sync.broadcast import TensorSpec, receive_weights

        incoming = receive_weights(
            self.rlve_weight_group,
            [TensorSpec.from_wire(row) for row in specs],
            self.rlve_weight_device,
        )
        self.reload_weights(weights_iterator=incoming, is_checkpoint_format=True)
        for _ in incoming:  # the trainer sends every announced tensor; stay in step with it
            pass
        return version
