"""The version gate: a push waits for the requests in flight, and holds new ones until it ends."""

import asyncio

from rlve.inference.version_gate import VersionGate


def test_a_push_waits_for_the_turns_in_flight_and_holds_new_ones():
    async def scenario() -> list[str]:
        gate, events = VersionGate(), []
        version = 1
        release = asyncio.Event()

        async def turn(name: str, wait: asyncio.Event | None = None) -> None:
            async with gate.request():
                events.append(f"{name} starts under v{version}")
                if wait is not None:
                    await wait.wait()
                events.append(f"{name} ends under v{version}")

        async def push() -> None:
            nonlocal version
            await gate.close()
            events.append("push")
            version = 2
            gate.reopen()

        first = asyncio.create_task(turn("a", release))
        await asyncio.sleep(0)
        pushing = asyncio.create_task(push())
        await asyncio.sleep(0)
        second = asyncio.create_task(turn("b"))  # arrives while the push waits for a
        await asyncio.sleep(0.01)
        assert gate.in_flight == 1 and "push" not in events and len(events) == 1
        release.set()
        await asyncio.gather(first, pushing, second)
        return events

    assert asyncio.run(scenario()) == [
        "a starts under v1", "a ends under v1", "push", "b starts under v2", "b ends under v2",
    ]  # fmt: skip


def test_an_open_gate_lets_requests_through_and_an_idle_one_closes_at_once():
    async def scenario() -> int:
        gate = VersionGate()
        async with gate.request(), gate.request():
            inside = gate.in_flight
        await asyncio.wait_for(gate.close(), 1)  # nothing in flight: returns at once
        gate.reopen()
        return inside

    assert asyncio.run(scenario()) == 2


def test_each_request_goes_to_the_replica_with_the_fewest_in_flight():
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        gate, chosen = VersionGate(replicas=2), []
        async with gate.request() as a, gate.request() as b, gate.request() as c:
            chosen += [a, b, c]  # 0, then 1 (0 is busy), then 0 (a tie: the first)
            busy = list(gate.in_flight_per_replica)
        async with gate.request() as d:  # all finished: replica 0 again
            chosen.append(d)
        return chosen, busy, gate.requests_per_replica

    assert asyncio.run(scenario()) == ([0, 1, 0, 0], [2, 1], [3, 1])
