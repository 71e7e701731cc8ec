"""The batches generation has started ahead of the trainer, in the order it will train on them.

With `rollout.async_level` 0 the loop starts each batch after the weight push (none ahead); with
`async_level` 1 the next batch is generated while the trainer trains; with
`rollout.max_staleness` k up to k batches are. The collector plays them one after another in its
thread, so batch n + k starts only once the trainer has taken batch n: its oldest token is then
at most k versions behind the weights that train on it (the loop still checks, and drops what is
older). A checkpoint keeps the batches already started (`generated`), so a resumed run trains on
exactly them before it generates more.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque

from rlve.rollout.collector import BatchCollector, StepBatch


class BatchQueue:
    """Futures of the collector's batches, oldest first."""

    def __init__(self, collector: BatchCollector, ahead: int, generated: list[StepBatch]):
        self.collector = collector
        self.ahead = ahead
        """batches generation may run ahead of the trainer: 0, 1 or max_staleness"""
        self._pending: deque[concurrent.futures.Future[StepBatch]] = deque(
            _finished(batch) for batch in generated
        )
        while len(self._pending) < max(ahead, 1):
            self.start()

    def start(self) -> None:
        """Start generating one more batch (after the ones started before)."""
        self._pending.append(self.collector.submit())

    def take(self, timeout: float) -> StepBatch:
        """The oldest batch, once generated; with batches ahead, the next one is started."""
        batch = self._pending.popleft().result(timeout=timeout)
        if self.ahead:
            self.start()
        return batch

    def generated(self, timeout: float) -> list[StepBatch]:
        """The started batches, each waited for (raising if one failed): what a checkpoint
        keeps, and what the loop waits for before a push that must not land mid-batch."""
        return [future.result(timeout=timeout) for future in self._pending]


def _finished(batch: StepBatch) -> concurrent.futures.Future[StepBatch]:
    future: concurrent.futures.Future[StepBatch] = concurrent.futures.Future()
    future.set_result(batch)
    return future
