"""Requests to a store over the network, a batch at a time: at most ``jobs`` in flight on an event
loop, each within its time.

Both network backends (`fsspec_files` through fsspec's loop, `object_files`
through obstore on a loop of their own) run their requests this way.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ..problems import StoreBusyError
from .files import BATCH
from .options import StoreOptions
from .shard_format import Packed, Shard

__all__ = ["PackOne", "Requests", "loop_thread"]

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)
_I = TypeVar("_I")

_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_MADE = threading.Lock()


def loop_thread() -> asyncio.AbstractEventLoop:
    """This process's event loop for store requests, running in a thread of its own (made at the
    first call): the callers' threads wait for their batches on it."""
    global _LOOP
    with _LOOP_MADE:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="numcodecs-bytes-requests", daemon=True
            )
            thread.start()
            atexit.register(_stopped, loop, thread)
            _LOOP = loop
        return _LOOP


def _stopped(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """The loop stopped and closed before the interpreter is torn down: obstore's runtime, which
    answers on it from threads of its own, otherwise aborts the process (SIGABRT) in some exits
    after a run that succeeded."""
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
    gc.collect()


def _on_loop(loop: asyncio.AbstractEventLoop, work: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    return asyncio.run_coroutine_threadsafe(work(), loop).result()


PackOne = Callable[
    [Shard, asyncio.Semaphore, dict[str, "asyncio.Task[str | None]"]], Awaitable[Packed]
]
"""How a backend packs one shard through its client: the shard, the semaphore of the requests in
flight, and the versions of the files byte ranges are read from (asked once per pack)."""


class Requests:
    """The requests of one store: ``jobs`` in flight at most, each ``request_timeout`` seconds at
    most and none past the run's ``deadline``; ``on_loop`` runs a coroutine on the loop the
    store's client works on and waits for it."""

    def __init__(
        self,
        options: StoreOptions,
        deadline: float | None,
        loop: asyncio.AbstractEventLoop,
        on_loop: Callable[[asyncio.AbstractEventLoop, Callable[[], Any]], Any] = _on_loop,
    ) -> None:
        self.deadline = deadline
        self.jobs = self.concurrency = options.jobs
        self.request_timeout = options.request_timeout
        self._loop, self._sync = loop, on_loop

    def _timeout(self) -> float:
        """The seconds the next request may take: its own limit, or what is left of the run's."""
        if self.deadline is None:
            return self.request_timeout
        return max(0.0, min(self.request_timeout, self.deadline - time.monotonic()))

    async def in_time(self, job: Awaitable[_T]) -> _T:
        """``job``, within the time its request may take."""
        timeout = self._timeout()
        try:
            return await asyncio.wait_for(job, timeout)
        except TimeoutError:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise TimeoutError("no answer before the run's time limit (run_timeout)") from None
            raise TimeoutError(f"no answer within {timeout:g} s (request_timeout)") from None

    def on_loop(self, work: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """``work()`` run on the client's loop; what it returned (what it raised, raised)."""
        result: _T = self._sync(self._loop, work)
        return result

    def run(self, work: Mapping[_K, Awaitable[_T]], limit: bool = True) -> dict[_K, _T | Exception]:
        """Each path's work (a coroutine not started yet), at most ``jobs`` at a time, each in its
        time, on the client's loop; what each returned or raised. ``limit=False``: the work bounds
        its own requests, each in its time."""

        async def run_all() -> dict[_K, _T | Exception]:
            jobs = asyncio.Semaphore(self.jobs if limit else len(work) or 1)

            async def one(path: _K, job: Awaitable[_T]) -> tuple[_K, _T | Exception]:
                async with jobs:
                    try:
                        return path, await (self.in_time(job) if limit else job)
                    except StoreBusyError:  # the run lost the store's lock: it stops, not one path
                        raise
                    # each client fails in its own words: reported per path
                    except Exception as exc:
                        return path, exc

            tasks = [asyncio.ensure_future(one(path, job)) for path, job in work.items()]
            try:
                return dict(await asyncio.gather(*tasks))
            except BaseException:
                # the run stops (its lock lost, its time up, interrupted): the rest of the batch
                # stops too, each task awaited, so that none goes on writing meanwhile
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

        return self.on_loop(run_all)

    def each_of(
        self,
        items: Iterable[_I],
        job: Callable[[_I], Awaitable[_T]],
        key: Callable[[_I], _K] | None = None,
    ) -> dict[_K, _T | Exception]:
        """``job`` of each item, `BATCH` items at a time (each batch's requests made together, at
        most ``jobs`` in flight): what each returned or raised, by ``key`` of its item (the item
        itself by default). The caller may hand any number of items: only a batch's requests are
        held at once."""
        results: dict[_K, _T | Exception] = {}
        batch: list[_I] = []
        for item in [*items, None]:
            if item is not None:
                batch.append(item)
            if batch and (item is None or len(batch) >= BATCH):
                results |= self.run(
                    {(key(one) if key else cast(_K, one)): job(one) for one in batch}
                )
                batch = []
        return results

    def pack_each(
        self,
        shards: Iterable[Shard],
        pack_one: PackOne,
        on_progress: Callable[[int, int], None] | None = None,
        shards_at_once: int | None = None,
    ) -> dict[str, Packed | Exception]:
        """Each shard packed by ``pack_one`` (``jobs`` requests in flight); in memory a shard at a
        time per ``jobs`` requests: memory grows with ``jobs`` and the shard size (unless
        ``shards_at_once`` says how many, ``pack_one`` bounding its memory itself).
        ``on_progress`` hears of (shards done, bytes packed) as they go."""
        shards = list(shards)
        if not shards:
            return {}
        # Shards in memory at once: enough to keep ``jobs`` requests busy (two at least: one is
        # written while the next one's chunks are read).
        at_once = shards_at_once or max(
            2, self.jobs // max(1, max(len(shard.sources) for shard in shards))
        )
        limits: list[asyncio.Semaphore] = []
        # the files byte ranges are read from: a version each
        versions: dict[str, asyncio.Task[str | None]] = {}

        async def one(shard: Shard) -> Packed:
            if not limits:  # made on the client's loop, where the work runs
                limits.extend((asyncio.Semaphore(self.jobs), asyncio.Semaphore(at_once)))
            async with limits[1]:
                try:
                    packed = await pack_one(shard, limits[0], versions)
                finally:
                    if on_progress is not None:
                        on_progress(1, 0)
            if on_progress is not None:
                on_progress(0, sum(size or 0 for size in packed.sizes))
            return packed

        return self.run({shard.path: one(shard) for shard in shards}, limit=False)
