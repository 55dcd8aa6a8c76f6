"""Work on large arrays (copies, checks), split over threads where this machine rewards it.

numpy releases the GIL while it copies or reduces, so large work can run on
several cores. Work is split when all of these hold:

1. Threads are allowed: ``numcodecs_bytes.use_threads`` is True, or None (the
   default) and the caller is the main thread. As with numcodecs' Blosc:
   zarr-python runs codecs on its event-loop thread and dask on worker threads,
   where calls are parallel already and a split only competes for the cores.
2. It is large: at least `MIN_SPLIT_BYTES`. Below, waking a helper thread
   costs as much as it saves or more, on every machine measured, and even
   learning that would cost a few microseconds per call.
3. Splitting pays on this machine for work of this kind and size, as measured
   in this process: the first calls of each kind (`KINDS`) in each size class
   (a power of two) come in pairs, the calling thread alone then a split, and
   the way faster in most of `SAMPLES` pairs is chosen (`split_choices`). The
   choice is checked again at the 8th, 16th, 32nd, ... call of its class: a
   pair, the other way first; where it disagrees with the choice, a round of
   its own decides as the first did, that pair aside (where the ways are close,
   one pair in a few goes the wrong way by chance). A split chosen is timed on
   every call too (two clock reads beside the hand-offs): where the latest
   `SAMPLES` splits all took longer than one thread's median, the check comes
   at once, as when a neighbour takes the other core. One thread chosen is
   numpy's own call, untimed: two clock reads right after a copy of megabytes
   cost 5-7 us, 2% of a 4 MiB copy (benchmarks/README.md). Only calls side by
   side are compared: a slowdown that hits both ways alike for a few calls (new
   pages as a program moves on, a busy neighbour) slows both calls of a pair,
   so it cannot turn a choice, and the one pair it cuts in two is outvoted. So
   a choice made while a process starts (fresh pages, cold caches) does not
   stay if it stops holding, a slow patch does not turn a choice by itself, and
   checking costs a few calls in a thousand. Measured, not derived from the
   cache sizes the system reports: whether a second core pays depends on how
   much bandwidth one core gets from the caches and memory it shares, which VMs
   of one kind report in ways that do not say (benchmarks/README.md).
4. A helper thread is free: at most ``get_nthreads() - 1`` helpers work at once,
   whoever calls; a caller that finds none free works alone (never waits).

Split work has one contiguous part per thread, at most one per CPU the
process may run on. Parts that end together end soonest: a sleeping thread
wakes in 5-300 us on the VMs measured (most right after its caller copied
megabytes), up to a third of a 4 MiB copy, so the caller's part is the larger
by what the latest splits of that kind and size showed: each split's ends move
the next one's cut (`_Learning.ended`), measured, not modelled (a model of
start delays alone cut the caller's part 8% too large on the AMD kind, where
the caller's own steps before its part take as long). `copy_into`,
`copied_as` and `in_parts` are the only ways the codec splits work; below
`MIN_SPLIT_BYTES` the numcodecs codec calls numpy's copy itself in the common
case.
"""

from __future__ import annotations

import operator
import os
import queue
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from itertools import pairwise
from typing import Any, Generic, Literal, SupportsIndex, TypeVar, get_args

import numpy as np

__all__ = [
    "KINDS",
    "MIN_HELPER_SHARE",
    "MIN_SPLIT_BYTES",
    "SAMPLES",
    "copied_as",
    "copy_flat_into",
    "copy_into",
    "get_nthreads",
    "in_parts",
    "set_nthreads",
    "split_choice",
    "split_choices",
]

MIN_SPLIT_BYTES = 2 << 20
"""Work on fewer bytes is never split: on no machine measured did a split pay there
(benchmarks/README.md)."""

MIN_HELPER_SHARE = 0.2
"""The least part of an equal share a part of a split is given, however long helpers take to
start."""

LEAD_STEP = 0.05
"""How far the caller's part of a split may move after one split, as a part of an equal share."""

SAMPLES = 3
"""Pairs of timed calls (one each way, back to back) a choice rests on: the way faster in most of
them."""

Kind = Literal["copy into", "copy to new", "check", "masked copy into", "masked copy to new"]
KINDS: tuple[Kind, ...] = get_args(Kind)
"""The kinds of work learned apart: they move different amounts of memory per byte."""

Record = Callable[[bool, float], None]
"""What takes a call's time: whether it was split, and its seconds per byte."""

T = TypeVar("T")

_ENV_VAR = "NUMCODECS_BYTES_NTHREADS"


def _usable_cores() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a container's cpuset), not the
    machine's.

    A helper thread on a CPU the caller already uses only takes turns with it.
    """
    # Python 3.13: the affinity, or -X cpu_count
    process_cpu_count = getattr(os, "process_cpu_count", None)
    if process_cpu_count is not None:
        return int(process_cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


_CORES = _usable_cores()


def _thread_count(n: Any) -> int:
    try:
        value = operator.index(n)
    except TypeError:
        value = 0
    if isinstance(n, bool) or value < 1:
        raise ValueError(f"the number of threads must be a whole number >= 1, got {n!r}")
    return value


def _nthreads_from_env() -> int:
    default = min(_CORES, 8)
    value = os.environ.get(_ENV_VAR, "").strip()
    if not value:
        return default
    try:
        return _thread_count(int(value))
    except ValueError:
        # A bad setting must not stop `import numcodecs_bytes` (or the program importing it).
        warnings.warn(
            f"ignoring {_ENV_VAR}={value!r}: not a whole number >= 1; using {default} threads",
            RuntimeWarning,
            stacklevel=2,
        )
        return default


class _Learning:
    """What one kind and size class of work has shown: recent seconds per byte alone, wins of each
    way, the choice.

    A choice rests on pairs of calls, one each way back to back, and goes to
    the way faster in most of `SAMPLES` pairs: a slowdown that hits both ways
    alike for a few calls (new pages, a neighbour, the next program phase)
    slows both calls of a pair, so it cannot turn a choice, however large, and
    the one pair it cuts in two is outvoted. Older samples of one way against
    newer ones of the other would let it: the split chosen, seen slow through
    a slowdown, against one thread's best from before it.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.alone: deque[float] = deque(maxlen=SAMPLES)  # one thread's latest
        # The caller's part of a split over an equal part: cut so that the parts end together
        # (`ended`), the caller's the larger by what helpers take to start.
        self.lead = 1.0
        self.choice: bool | None = None
        # The round under way, None between rounds: pairs won each way (alone, split), and the
        # pair's first call. The first round learns; a check begins from the other way and ends
        # after one pair if that pair agrees with the choice, else a round follows that decides
        # afresh, that pair aside: where the ways are close, one pair in a few goes the wrong way
        # by chance, and a choice turned on two such pairs stood until the next check.
        self.wins: list[int] | None = [0, 0]
        self.first: tuple[bool, float] | None = None
        self.checking = False  # a check's first pair under way
        # one thread's median when the choice was made: a split chosen slower than it is slow
        self.bar = 0.0
        self.slow = 0  # splits chosen in a row that were slow: at `SAMPLES`, the next call checks

    def next_way(self) -> tuple[bool, Record | None]:
        """Whether the next call splits, and what takes its time: `add` (it decides), `watch`, or
        None (untimed)."""
        self.calls += 1
        if self.wins is None and (
            self.slow >= SAMPLES or (self.calls >= 8 and self.calls & (self.calls - 1) == 0)
        ):
            # a check: 8, 16, 32, ..., or after slow splits
            self.wins, self.slow, self.checking = [0, 0], 0, True
        if self.wins is None:  # (a choice is made)
            return bool(self.choice), self.watch if self.choice else None
        first = self.first
        # the other way first
        return (self.choice is False) if first is None else not first[0], self.add

    def add(self, split: bool, seconds_per_byte: float) -> None:
        if not split:
            self.alone.append(seconds_per_byte)
        first, wins = self.first, self.wins
        if wins is None:  # (a call that raced the end of its round)
            return
        if first is None or first[0] == split:
            self.first = split, seconds_per_byte
            return
        self.first = None
        faster = split if seconds_per_byte < first[1] else first[0]
        if self.checking:  # a check's first pair: where it agrees with the choice, the check ends
            self.checking = False
            if faster == self.choice:
                self.wins = None
        else:
            wins[faster] += 1
            if max(wins) > SAMPLES // 2:
                self.choice, self.wins = wins[True] > wins[False], None
        if self.wins is None:
            alone = sorted(self.alone)
            self.bar, self.slow = alone[len(alone) // 2], 0

    def watch(self, split: bool, seconds_per_byte: float) -> None:
        """A split chosen, timed: a doubt, never a new choice by itself (a check decides, with both
        ways' time).

        Kept to a counter: a call that has just copied megabytes finds little of Python's state in
        the caches, and each thing more it reads costs cache misses (two `min` over the samples cost
        2 us a call at 2 MiB).
        """
        self.slow = self.slow + 1 if seconds_per_byte > self.bar else 0

    def ended(self, helpers: int, caller: float, late: float) -> None:
        """A split's parts ended: the caller's ``caller`` seconds after the split began, the latest
        helper's ``late`` seconds after the caller's (before, if negative).

        The next split's caller takes what makes them end together, work going
        as fast on either side: ``late`` seconds of the caller's work, shared
        with the helpers. At most `LEAD_STEP` of an equal part at once, so one
        helper woken late (a busy neighbour, a page fault) barely moves it, and
        never past what `_bounds` gives (a lead that drifted past it would take
        as many splits to come back).
        """
        if caller > 0:
            step = self.lead * late * helpers / ((helpers + 1) * caller)
            lead = self.lead + max(-LEAD_STEP, min(LEAD_STEP, step))
            most = helpers + 1 - helpers * MIN_HELPER_SHARE
            self.lead = min(max(lead, MIN_HELPER_SHARE), most)


class _Handoff(Generic[T]):
    """One part given to a helper thread: its result or error, and a lock released when it is
    done."""

    __slots__ = ("done", "ended", "error", "part", "result", "start", "stop")
    result: T  # set by the helper, with error None, before done is released
    ended: float  # when the helper ended the part (perf_counter), set before it is done

    def __init__(self, part: Callable[[int, int], T], start: int, stop: int) -> None:
        self.part, self.start, self.stop = part, start, stop
        self.error: BaseException | None = None
        self.done = threading.Lock()
        self.done.acquire()


def _serve(jobs: queue.SimpleQueue[_Handoff[Any] | None]) -> None:
    """A helper thread's life: the parts it is given, until its pool is closed (None)."""
    while (handoff := jobs.get()) is not None:
        try:
            handoff.result = handoff.part(handoff.start, handoff.stop)
        except BaseException as error:  # the caller raises it
            handoff.error = error
        finally:
            handoff.ended = time.perf_counter()
            handoff.done.release()
        del handoff  # an idle helper holds no part: its arrays are the caller's to free


class _Pool:
    """The helper threads of one `set_nthreads` setting: how many are free, and what splitting was
    found to pay.

    Helpers wait on a queue and signal each part's end with a lock: a
    concurrent.futures pool costs more per split, in its Python bookkeeping on
    both threads around the hand-offs (benchmarks/README.md).
    The count is guarded by a plain lock (a C lock: threading.Semaphore costs
    microseconds per call, in Python, on every split). Learning needs no lock:
    a sample lost to a race only delays a choice.
    """

    def __init__(self, nthreads: int) -> None:
        self.helpers = min(nthreads, _CORES) - 1
        self.free = self.helpers
        self.closed = False
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[_Handoff[Any] | None] = queue.SimpleQueue()
        self.learning: dict[tuple[Kind, int], _Learning] = {}  # by (kind, size class)
        self.threads = [  # daemons: an idle helper waits in C and must not hold up exit
            threading.Thread(
                target=_serve, args=(self.jobs,), name=f"numcodecs-bytes-{index}", daemon=True
            )
            for index in range(self.helpers)
        ]
        for thread in self.threads:
            thread.start()

    def take(self) -> int:
        """Take every free helper (never waits): how many were taken."""
        with self.lock:
            taken, self.free = self.free, 0
        return taken

    def give_back(self, helpers: int) -> None:
        with self.lock:
            self.free += helpers

    def hand_out(self, handoffs: list[_Handoff[Any]]) -> bool:
        """Queue parts for the helpers; False if the pool was closed meanwhile (the caller does
        them)."""
        with self.lock:
            if self.closed:
                return False
            for handoff in handoffs:
                self.jobs.put(handoff)
        return True

    def close(self) -> None:
        """Stop the helpers once the parts already handed out are done (they come first in the
        queue)."""
        with self.lock:
            self.closed = True
            for _ in range(self.helpers):
                self.jobs.put(None)


_lock = threading.Lock()
_nthreads = _nthreads_from_env()
_pool: _Pool | None = None


def set_nthreads(n: SupportsIndex) -> int:
    """Set how many threads a large copy may be split over; 1 turns threading off.

    Returns the previous value, like ``numcodecs.blosc.set_nthreads``. The
    default comes from the environment variable ``NUMCODECS_BYTES_NTHREADS``,
    else the number of CPUs the process may run on when the package is
    imported (its affinity, as ``taskset`` or a container's cpuset sets it; at
    most 8). A copy never uses more threads than that.
    ``numcodecs_bytes.use_threads`` says from which threads copies may be
    split (None: the main thread only; True; False).
    """
    global _nthreads, _pool
    n = _thread_count(n)
    with _lock:
        previous, _nthreads = _nthreads, n
        if _pool is not None and n != previous:
            _pool.close()  # running copies finish; new ones use a new pool
            _pool = None
    return previous


def get_nthreads() -> int:
    """How many threads a large copy may be split over."""
    return _nthreads


def _get_pool() -> _Pool:
    global _pool
    pool = _pool
    if pool is not None:
        return pool
    with _lock:
        if _pool is None:
            _pool = _Pool(_nthreads)
        return _pool


use_threads: bool | None = None
"""From which threads large copies may be split over threads: None (the default) only from the main
thread, as numcodecs' Blosc (zarr-python and dask call codecs from other threads, in parallel
already); True from any thread; False never. Users set it as ``numcodecs_bytes.use_threads``, which
the package passes on here."""
_main_thread = threading.main_thread().ident


def _forget_pool_after_fork() -> None:
    # The child has none of the parent's threads: start afresh, lazily. Its main thread is the one
    # that forked.
    global _pool, _lock, _main_thread
    _pool = None
    _lock = threading.Lock()
    _main_thread = threading.main_thread().ident


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _size_class(nbytes: int) -> int:
    return nbytes.bit_length()  # [2**(k-1), 2**k)


def _split_plan(kind: Kind, nbytes: int) -> tuple[_Pool, _Learning, bool, Record] | None:
    """None where the work is done on the calling thread and not timed: small, threads not allowed,
    or one thread chosen (the common case: cheap).

    Else the pool, what the work's kind and size have shown, whether to split
    now, and what takes its time.
    """
    # (Steps written out: a call here follows a copy of megabytes, which took Python's state out of
    # the caches, and each function called costs microseconds, 1% of a 4 MiB split.)
    if nbytes < MIN_SPLIT_BYTES or _nthreads < 2 or _CORES < 2:
        return None
    if not (threading.get_ident() == _main_thread if use_threads is None else use_threads):
        return None  # (threads not allowed here)
    pool = _pool or _get_pool()
    key = (kind, nbytes.bit_length())  # (kind, _size_class(nbytes))
    learning = pool.learning.get(key)
    if learning is None:
        learning = pool.learning.setdefault(key, _Learning())
    split, record = learning.next_way()
    if record is None:
        return None
    return pool, learning, split, record


def _bounds(length: int, helpers: int, lead: float) -> list[int]:
    """Where the parts of a split begin and end: the caller's first, ``lead`` times an equal part,
    then one per helper, equal.

    Every part keeps at least `MIN_HELPER_SHARE` of an equal part.
    """
    if not helpers:
        return [0, length]
    lead = min(max(lead, MIN_HELPER_SHARE), helpers + 1 - helpers * MIN_HELPER_SHARE)
    first = round(length * lead / (helpers + 1))
    return [0, *(first + (length - first) * i // helpers for i in range(helpers + 1))]


def _run(
    pool: _Pool,
    learning: _Learning,
    record: Record,
    nbytes: int,
    length: int,
    part: Callable[[int, int], T],
) -> list[T]:
    """``part(start, stop)`` over ``range(length)``: one contiguous part per free helper, the first
    here; the parts' results in order.

    With no helper free, all the work is the caller's: it never waits for
    one, and the call teaches nothing. Else the split is timed (``record``)
    and its parts' ends set the next split's parts (`_Learning.ended`).
    """
    start = time.perf_counter()
    helpers = pool.take()
    try:
        bounds = _bounds(length, helpers, learning.lead)
        handoffs = [_Handoff(part, begin, stop) for begin, stop in pairwise(bounds[1:])]
        if not pool.hand_out(handoffs):  # set_nthreads closed this pool meanwhile: every part here
            return [part(begin, stop) for begin, stop in pairwise(bounds)]
        try:
            first = part(0, bounds[1])
        finally:
            ended = time.perf_counter()
            for handoff in handoffs:  # helpers go back only when their parts are done
                handoff.done.acquire()
    finally:
        pool.give_back(helpers)
    for handoff in handoffs:
        if handoff.error is not None:
            raise handoff.error
    if handoffs:
        late = max(handoff.ended for handoff in handoffs) - ended
        learning.ended(helpers, ended - start, late)
        record(True, (ended + max(late, 0.0) - start) / nbytes)
    return [first, *(handoff.result for handoff in handoffs)]


def in_parts(kind: Kind, nbytes: int, length: int, part: Callable[[int, int], T]) -> list[T]:
    """``part(start, stop)`` over ``range(length)``, split over threads by the rule above; the
    parts' results.

    ``nbytes`` is the size of the work (the bytes read); parts must be independent.
    """
    plan = _split_plan(kind, nbytes)
    if plan is None:
        return [part(0, length)]
    pool, learning, split, record = plan
    if not split:
        return _alone(record, nbytes, lambda: [part(0, length)])
    return _run(pool, learning, record, nbytes, length, part)


def _alone(record: Record, nbytes: int, work: Callable[[], T]) -> T:
    """``work()`` on the calling thread, timed: one thread while learning or checking."""
    start = time.perf_counter()
    result = work()
    record(False, (time.perf_counter() - start) / nbytes)
    return result


def split_choice(kind: Kind, nbytes: int) -> bool | None:
    """Whether this process splits work of this kind and size: None where it has not chosen (yet, or
    ever)."""
    pool = _pool
    learning = None if pool is None else pool.learning.get((kind, _size_class(nbytes)))
    return None if learning is None else learning.choice


def split_choices() -> dict[str, bool]:
    """What this process has found so far: per kind and size class, whether work is split."""
    pool = _pool
    if pool is None:
        return {}
    return {
        f"{kind} {_human(1 << (size_class - 1))}..{_human(1 << size_class)}": learning.choice
        for (kind, size_class), learning in sorted(pool.learning.items())
        if learning.choice is not None
    }


def _human(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _copy_part(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    dst[...] = src


def _plain(array: np.ndarray[Any, Any]) -> bool:
    return array.ndim == 1 and type(array) is np.ndarray


def copy_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """``dst[...] = src``, converting byte order; split over threads by the rule above.

    Only flat, plain, non-overlapping arrays of equal length are split;
    anything else is one numpy assignment (numpy handles overlap itself).
    """
    if (
        src.nbytes < MIN_SPLIT_BYTES
        or not (_plain(src) and _plain(dst) and dst.shape == src.shape)
        or np.may_share_memory(dst, src)
    ):
        dst[...] = src
        return
    copy_flat_into(dst, src)


def copy_flat_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """`copy_into` for a caller that knows what it checks: flat plain arrays of one length, apart
    in memory, of `MIN_SPLIT_BYTES` or more (the codec's common case, checked there)."""
    plan = _split_plan("copy into", src.nbytes)
    # (the common case in one plain call: a part of the whole costs microseconds more)
    if plan is None:
        dst[...] = src
        return
    pool, learning, split, record = plan
    if not split:
        _alone(record, src.nbytes, lambda: _copy_part(dst, src))
        return
    _run(
        pool,
        learning,
        record,
        src.nbytes,
        len(src),
        lambda start, stop: _copy_part(dst[start:stop], src[start:stop]),
    )


def copied_as(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new array of ``dtype`` holding ``src``: ``src.astype(dtype)``, or the same made by several
    threads."""
    plan = (
        None
        if src.nbytes < MIN_SPLIT_BYTES or not _plain(src)
        else _split_plan("copy to new", src.nbytes)
    )
    if plan is None:
        return src.astype(dtype)
    pool, learning, split, record = plan
    if not split:
        return _alone(record, src.nbytes, lambda: src.astype(dtype))
    out = np.empty(src.shape, dtype)
    _run(
        pool,
        learning,
        record,
        src.nbytes,
        len(src),
        lambda start, stop: _copy_part(out[start:stop], src[start:stop]),
    )
    return out
