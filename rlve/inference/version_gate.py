"""One weights version per request: a push waits for the requests in flight and holds new ones.
Each request admitted goes to the replica with the fewest in flight.

When rollouts span weight pushes (`rollout.max_staleness`), the trainer pushes while episodes
are still being played. The gate makes each request (one model turn) run under one version, so
a turn's tokens all have the version its `Generation` reports, and the prefix cache is reset when
no request holds its blocks: `closed()` stops new requests from starting, waits for those in
flight to finish, and lets the held ones start once the push is done, under the new version.
An episode therefore changes version only between its turns. Without pushes during generation
(`async_level` 0 or 1) the gate is always open and costs a counter.

All of it runs on the engine's own event loop (one thread), so the counter needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class VersionGate:
    """Requests pass while no push is under way, each to the least busy of `replicas`; a push
    waits until none is in flight."""

    def __init__(self, replicas: int = 1) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.in_flight_per_replica = [0] * replicas
        self.requests_per_replica = [0] * replicas
        """requests sent to each replica so far"""

    @property
    def in_flight(self) -> int:
        return sum(self.in_flight_per_replica)

    @contextlib.asynccontextmanager
    async def request(self) -> AsyncIterator[int]:
        """Run one request inside, on the replica it yields (the one with the fewest requests
        in flight, the first of those): it waits while a push holds the gate."""
        while not self._open.is_set():  # another waiter may have been let in, and closed again
            await self._open.wait()
        busy = self.in_flight_per_replica
        replica = min(range(len(busy)), key=lambda i: (busy[i], i))
        busy[replica] += 1
        self.requests_per_replica[replica] += 1
        self._idle.clear()
        try:
            yield replica
        finally:
            busy[replica] -= 1
            if not any(busy):
                self._idle.set()

    async def close(self) -> None:
        """Hold new requests and return once the ones in flight have finished."""
        self._open.clear()
        await self._idle.wait()

    def reopen(self) -> None:
        """Let the held requests start (under the weights now loaded)."""
        self._open.set()
