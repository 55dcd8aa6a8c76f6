"""The pure parts of packing through obstore: the ordered reads of a shard that goes up in parts,
and the memory a pack's shards reserve."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numcodecs_bytes.store import object_packing
from numcodecs_bytes.store.object_packing import ShardMemory, _in_order


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.none(), st.integers(0, 5000)), max_size=40),
    most=st.integers(1, 16),
    ahead=st.integers(1, 20000),
)
def test_reads_come_in_order_and_never_more_ahead_than_the_bytes_allow(
    sizes: list[int | None], most: int, ahead: int
) -> None:
    """Each source's read is yielded in the sources' order; in flight at once: one until a chunk is
    read, then at most ``most`` and at most what ``ahead`` bytes hold by the largest read so far
    (one at least)."""
    in_flight = [0]
    seen_largest = [0]
    problems: list[str] = []

    async def reading(size: int | None) -> tuple[bytes | None, str | None]:
        await asyncio.sleep(0)
        in_flight[0] -= 1
        return (None if size is None else b"x" * size), None

    def read(source: object) -> Awaitable[tuple[bytes | None, str | None]]:
        # called as the read is started: the bound is checked then
        in_flight[0] += 1
        largest = seen_largest[0]
        allowed = 1 if largest == 0 else max(1, min(most, ahead // largest))
        if in_flight[0] > allowed:
            problems.append(f"{in_flight[0]} in flight, {allowed} allowed")
        return reading(int(source) if isinstance(source, str) else None)

    async def taken() -> list[int | None]:
        found = []
        async for data, _ in _in_order([None if n is None else str(n) for n in sizes], read, most):
            found.append(None if data is None else len(data))
            seen_largest[0] = max(seen_largest[0], len(data or b""))
        return found

    original = object_packing.READ_AHEAD_BYTES
    object_packing.READ_AHEAD_BYTES = ahead
    try:
        assert asyncio.run(taken()) == sizes
    finally:
        object_packing.READ_AHEAD_BYTES = original
    assert not problems, problems


def test_the_reads_not_taken_are_cancelled_when_the_caller_stops() -> None:
    """Two reads taken (the first alone, then four at once), the caller stops: the three others
    are cancelled."""
    started: list[int] = []
    cancelled: list[int] = []

    async def read(source: object) -> tuple[bytes | None, str | None]:
        assert isinstance(source, str)
        started.append(int(source))
        try:
            await asyncio.sleep(0 if int(source) < 2 else 10)
        except asyncio.CancelledError:
            cancelled.append(int(source))
            raise
        return b"x", None

    async def two_only() -> None:
        reads = _in_order([str(n) for n in range(8)], read, 4)
        assert [await anext(reads), await anext(reads)] == [(b"x", None)] * 2
        await reads.aclose()
        await asyncio.sleep(0)

    asyncio.run(two_only())
    assert started == [0, 1, 2, 3, 4] and cancelled == [2, 3, 4]


@pytest.mark.parametrize(
    ("largest", "sources", "expected_mib"),
    [
        (0, 64, 48),  # before any chunk is read: the most a shard may hold (16 MiB read ahead,
        # four parts of 8 MiB going up)
        (2**20, 4, 8),  # twice its chunks by the largest read
        (2**20, 1000, 50),  # up to what a shard going up in parts holds, and two chunks
    ],
)
def test_a_shard_reserves_twice_its_chunks_up_to_what_parts_hold(
    largest: int, sources: int, expected_mib: int
) -> None:
    memory = ShardMemory(128 * 2**20)
    memory.saw(largest)
    assert memory.estimate(sources) == expected_mib * 2**20


def test_shards_wait_while_the_memory_is_reserved_and_all_finish() -> None:
    memory = ShardMemory(10)
    memory.saw(2)  # each shard of 2 sources reserves 8 of the 10
    order: list[str] = []

    async def shard(name: str) -> None:
        async with memory.reserved(2):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    async def both() -> None:
        await asyncio.gather(shard("a"), shard("b"))

    asyncio.run(both())
    assert order == ["a in", "a out", "b in", "b out"]
    assert memory.free == 10
