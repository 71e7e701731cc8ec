"""Weight pushes and the export of an FSDP2-sharded trainer, measured for what rank 0 holds.

    torchrun --standalone --nproc-per-node 2 tests/integration/scripts/sharded_push.py OUT [cuda]

Every whole tensor a push or the export gathers (`full` of a shard) is counted while it is alive
on rank 0; rank 0 writes OUT/held.json: the most bytes of gathered tensors alive at once in
each of two shared-memory pushes and the export, against the largest tensor and the whole model,
and whether the pushed file and the exported model hold the model's weights exactly (no step
is trained).
"""

from __future__ import annotations

import json
import sys
import weakref
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

import rlve.training.export as export
from rlve.config import TrainerConfig
from rlve.distributed import init_world
from rlve.distributed.world import close_world
from rlve.models import resolve_model_path
from rlve.sync.shared_memory import SharedMemoryTransport
from rlve.training.trainer import Trainer


class HeldBytes:
    """Bytes of the tensors `full` gathered that are still alive, and the most at once."""

    def __init__(self) -> None:
        self.alive = self.peak = 0

    def gathered(self, shard, whole):
        if whole is not shard:  # a new, whole tensor
            size = whole.numel() * whole.element_size()
            self.alive += size
            self.peak = max(self.peak, self.alive)
            weakref.finalize(whole, self._freed, size)
        return whole

    def _freed(self, size: int) -> None:
        self.alive -= size

    def measure(self, action) -> int:
        self.alive = self.peak = 0
        action()
        return self.peak


def main(out: Path, device: str) -> None:
    world, device = init_world(device)
    assert world.sharded and world.size == 2, "run under torchrun with 2 ranks"
    out.mkdir(parents=True, exist_ok=True)
    held = HeldBytes()
    gather = export.full
    export.full = lambda tensor: held.gathered(tensor, gather(tensor))
    trainer = Trainer(TrainerConfig(model="tiny", device=device), world)
    files = SharedMemoryTransport(out / "pushes") if world.is_main else None

    def push(version: int) -> None:
        stream = trainer.named_weights_for_inference()
        if world.is_main:
            files.write(stream, version)
        else:
            for _ in stream:  # the other ranks help gather each tensor
                pass

    peaks = {f"push {v}": held.measure(lambda v=v: push(v)) for v in (1, 2)}
    peaks["export"] = held.measure(lambda: trainer.export(str(out / "model")))
    if world.is_main:
        pushed = load_file(str(files.path))
        exported = load_file(str(out / "model" / "model.safetensors"))
        original = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny")).state_dict()
        sizes = [t.numel() * t.element_size() for t in pushed.values()]
        report = {
            "peaks": peaks,
            "largest_tensor": max(sizes),
            "model_bytes": sum(sizes),
            "pushed_tensors": len(pushed),
            "pushed_equal_model": all(torch.equal(pushed[n], original[n].float()) for n in pushed),
            "exported_equal_pushed": all(torch.equal(exported[n], pushed[n]) for n in exported),
            "exported_tensors": len(exported),
        }
        (out / "held.json").write_text(json.dumps(report, indent=1))
        files.close()
    close_world()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cpu")
