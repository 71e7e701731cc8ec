"""Rank 0 gives the orders, the other ranks follow: every rank runs the same trainer calls.

Only rank 0 has the engine, the environments and the logger. Before each trainer call that
communicates (a train step, gathering the weights for the sampler, a checkpoint, the export) it
broadcasts the call; `follow` runs on the other ranks and makes the same call until rank 0 says
stop. A rank that fails exits with its error; torchrun then stops the others and names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rlve.distributed.world import World


class Crew:
    """Rank 0's handle on the trainer of every rank (one process: just the trainer's calls)."""

    def __init__(self, trainer: Any, world: World) -> None:
        self.trainer = trainer
        self.world = world

    def _order(self, command: str, argument: Any = None) -> None:
        self.world.broadcast((command, argument))

    def train_step(self, groups) -> dict[str, float]:
        self._order("train_step", groups)
        metrics = self.trainer.train_step(groups)
        check_same_step(self.world, self.trainer.step)
        return metrics

    def weights_for_inference(self) -> Iterator:
        """The full weights, one tensor at a time; the caller must read them all."""
        self._order("weights")
        return self.trainer.named_weights_for_inference()

    def save(self, root: str, extra: dict | None = None) -> str:
        self._order("save", root)
        return self.trainer.save(root, extra=extra)

    def export(self, path: str) -> str:
        self._order("export", path)
        return self.trainer.export(path)

    def dismiss(self) -> None:
        """End `follow` on the other ranks (at the end of the run; on an error rank 0 exits, and
        torchrun stops them)."""
        self._order("stop")


def follow(trainer: Any, world: World) -> None:
    """A rank > 0: make the calls rank 0 orders until it dismisses the crew."""
    while True:
        command, argument = world.broadcast()
        if command == "train_step":
            trainer.train_step(argument)
            check_same_step(world, trainer.step)
        elif command == "weights":
            for _ in trainer.named_weights_for_inference():
                pass
        elif command == "save":
            trainer.save(argument)
        elif command == "export":
            trainer.export(argument)
        elif command == "stop":
            return
        else:
            raise RuntimeError(f"rank {world.rank}: unknown order {command!r} from rank 0")


def check_same_step(world: World, step: int) -> None:
    """Every rank has taken the same number of steps, or the run stops naming them."""
    steps = world.gather(step)
    if len(set(steps)) > 1:
        raise RuntimeError(f"ranks disagree on the step: {dict(enumerate(steps))}")
