"""A LoRA run's push as the adapter alone (`sync.lora=adapter`), or as every merged weight.

With `sync.lora=merged` each push merges the adapter into the base weights (in new tensors) and
sends all of them: SmolLM2-135M's 135M numbers for an adapter of a few million. With `adapter`
the trainer writes the adapter's own tensors (peft's file layout: `adapter_model.safetensors` and
`adapter_config.json`, in a directory in RAM that the watchdog removes if the run dies) and vLLM
loads them with its LoRA support, in place, under one name and id (`ADAPTER`): the base weights
stay as loaded, and every request after the push runs with the new adapter. A push waits for
the turns in flight (rlve.inference.version_gate), so no request ever needs an older adapter:
one slot is enough, whatever `rollout.max_staleness` is.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import nn

from rlve.sync.shared_memory import weights_directory

ADAPTER_NAME = "rlve-policy"
ADAPTER_ID = 1
"""vLLM's name and integer id of the one adapter a run serves (loaded in place at each push)"""
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""the values vLLM's `max_lora_rank` takes (vllm.config.lora.MaxLoRARanks)"""


def vllm_max_lora_rank(rank: int) -> int:
    """The smallest rank slot vLLM offers that holds an adapter of rank `rank`."""
    fits = [slot for slot in VLLM_LORA_RANKS if slot >= rank]
    if not fits:
        raise ValueError(f"trainer.lora.rank={rank}: vLLM serves LoRA ranks up to "
                         f"{VLLM_LORA_RANKS[-1]}; use sync.lora=merged")  # fmt: skip
    return fits[0]


def write_adapter(peft_model: nn.Module, directory: Path) -> int:
    """The peft model's active adapter as peft saves it, into `directory`; returns the bytes of
    its tensors (what the push moves)."""
    from peft import get_peft_model_state_dict

    directory.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous() for name, t in
               get_peft_model_state_dict(peft_model).items()}  # fmt: skip
    partial = directory / "adapter_model.safetensors.partial"
    save_file(tensors, str(partial))
    partial.replace(directory / "adapter_model.safetensors")
    config = peft_model.peft_config[peft_model.active_adapter].to_dict()
    config = {k: sorted(v) if isinstance(v, set) else v for k, v in config.items()}
    (directory / "adapter_config.json").write_text(json.dumps(config, indent=1, default=str))
    return sum(t.numel() * t.element_size() for t in tensors.values())


@dataclass
class PushResult:
    seconds: float
    bytes: int
    """the bytes of the tensors sent as the trainer holds them (every weight's, or the
    adapter's); a push to a bfloat16 engine halves float32 ones on the way"""


class PolicyPush:
    """Pushes the crew's policy into a serving engine: merged, or the adapter alone."""

    def __init__(self, crew: Any, engine: Any, adapter: bool):
        self.crew = crew
        self.engine = engine
        self.directory = weights_directory() if adapter else None

    def __call__(self, version: int) -> PushResult:
        started = time.perf_counter()
        if self.directory is None:
            weights = self.crew.weights_for_inference()
            self.engine.push_weights(weights, version)
            moved = sum(dtype.itemsize * math.prod(shape) for _, dtype, shape in weights.layout)
            return PushResult(time.perf_counter() - started, moved)
        moved = write_adapter(self.crew.trainer.model, self.directory)
        self.engine.push_adapter(str(self.directory), version)
        return PushResult(time.perf_counter() - started, moved)

    def close(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
