"""store.requests: a batch of requests on the client's loop, and how it stops."""

from __future__ import annotations

import asyncio
import time

import pytest

from numcodecs_bytes.problems import StoreBusyError
from numcodecs_bytes.store.options import StoreOptions
from numcodecs_bytes.store.requests import Requests, loop_thread


def test_a_batch_whose_run_lost_its_lock_stops_whole_and_nothing_goes_on_writing() -> None:
    """One path finds the store's lock lost: the batch raises it, and the other paths' work,
    still waiting for an answer, is stopped there, not left to write on the client's loop (nor to
    end later in an exception nobody reads)."""
    requests = Requests(StoreOptions(jobs=8), None, loop_thread())
    written: list[str] = []

    async def lost() -> None:
        await asyncio.sleep(0.01)
        raise StoreBusyError("another run took this store's lock")

    async def slow(path: str) -> None:
        await asyncio.sleep(0.3)
        written.append(path)

    work = {"lost": lost(), **{f"p{i}": slow(f"p{i}") for i in range(5)}}
    with pytest.raises(StoreBusyError):
        requests.run(work, limit=False)
    time.sleep(0.5)
    assert written == []


def test_one_paths_failure_is_its_own_and_the_rest_is_done() -> None:
    requests = Requests(StoreOptions(jobs=2), None, loop_thread())

    async def fails() -> int:
        raise OSError("refused")

    async def answers(value: int) -> int:
        await asyncio.sleep(0)
        return value

    done = requests.run({"a": fails(), "b": answers(2), "c": answers(3)})
    assert isinstance(done["a"], OSError) and (done["b"], done["c"]) == (2, 3)
