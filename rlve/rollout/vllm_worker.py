"""The part of rlve that runs inside vLLM's worker process: in-place weight reloads.

vLLM imports this class by name (`worker_extension_cls`) and mixes it into its worker, so its
methods can reach `self.model_runner`; the engine calls them through `collective_rpc`.
"""

from __future__ import annotations


class WeightSyncExtension:
    """Reload the served weights in place, without restarting the engine."""

    def rlve_load_weights_file(self, path: str, version: int) -> int:
        """Load every tensor of a safetensors file (HF checkpoint names) into the model."""
        from safetensors.torch import load_file

        tensors = load_file(path, device=str(self.device))
        self.model_runner.reload_weights(
            weights_iterator=iter(tensors.items()), is_checkpoint_format=True
        )
        return version
