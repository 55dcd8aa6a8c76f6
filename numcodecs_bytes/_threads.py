"""Large copies and checks split over threads, by one fixed rule.

numpy releases the GIL while it copies or reduces, so large work can run on
several cores. A call's work is split when all of these hold:

1. Threads are allowed: ``numcodecs_bytes.use_threads`` is True, or None (the
   default) and the caller is the main thread. As with numcodecs' Blosc:
   zarr-python runs codecs on its event-loop thread and dask on worker threads,
   where calls are parallel already and a split only competes for the cores.
2. It is large: at least `SPLIT_BYTES` (16 MiB). From there a split over two
   cores beat numpy's own call in new processes on both 2-vCPU VM kinds
   measured; below it, it lost on one of them (benchmarks/README.md, "The
   thread rule"):

   | size | AMD EPYC: fresh output, into ``out`` | Intel Xeon |
   | --- | --- | --- |
   | 2-4 MiB | 0.63-0.96 of numpy's speed | split pays from 3-4 MiB |
   | 8-12 MiB | 0.76-1.38 (one process in three pays) | pays |
   | 16 MiB | 0.86-1.52 (five processes in six pay) | pays |
   | 64 MiB | 1.07-1.44 (fresh outputs page-fault: 0.66-1.27) | pays |

   A constant, not a choice learned per process: a process's first calls run
   on fresh pages and cold caches, which is where learning chose wrong.
3. A helper thread is free: at most ``get_nthreads() - 1`` helpers work at once,
   whoever calls; a caller that finds none free works alone (never waits).

Split work has one contiguous part per thread, equal, at most one per CPU the
process may run on. `copy_into`, `copied_as` and `in_parts` are the only ways
the codec splits work; below `SPLIT_BYTES` the numcodecs codec calls numpy's
copy itself in the common case.
"""

from __future__ import annotations

import operator
import os
import queue
import threading
import warnings
from collections.abc import Callable
from itertools import pairwise
from typing import Any, Generic, SupportsIndex, TypeVar

import numpy as np

__all__ = [
    "SPLIT_BYTES",
    "copied_as",
    "copy_flat_into",
    "copy_into",
    "get_nthreads",
    "in_parts",
    "set_nthreads",
]

SPLIT_BYTES = 16 << 20
"""Work of fewer bytes is never split (the module's rule, point 2)."""

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


class _Handoff(Generic[T]):
    """One part given to a helper thread: its result or error, and a lock released when it is
    done."""

    __slots__ = ("done", "error", "part", "result", "start", "stop")
    result: T  # set by the helper, with error None, before done is released

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
            handoff.done.release()
        del handoff  # an idle helper holds no part: its arrays are the caller's to free


class _Pool:
    """The helper threads of one `set_nthreads` setting, and how many are free.

    Helpers wait on a queue and signal each part's end with a lock: a
    concurrent.futures pool runs more Python on both threads around each
    hand-off (its futures' bookkeeping). The count is guarded by a plain lock
    (a C lock: threading.Semaphore is Python, microseconds a call).
    """

    def __init__(self, nthreads: int) -> None:
        self.helpers = min(nthreads, _CORES) - 1
        self.free = self.helpers
        self.closed = False
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[_Handoff[Any] | None] = queue.SimpleQueue()
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


def _splits(nbytes: int) -> bool:
    """Whether work of ``nbytes`` is split (the module's rule, points 1 and 2)."""
    if nbytes < SPLIT_BYTES or _nthreads < 2 or _CORES < 2:
        return False
    return threading.get_ident() == _main_thread if use_threads is None else use_threads


def _run(length: int, part: Callable[[int, int], T]) -> list[T]:
    """``part(start, stop)`` over ``range(length)``: one equal, contiguous part per free helper and
    one here, the first; the parts' results in order. With no helper free, all the work is the
    caller's: it never waits for one."""
    pool = _pool or _get_pool()
    helpers = pool.take()
    try:
        bounds = [length * i // (helpers + 1) for i in range(helpers + 2)]
        handoffs = [_Handoff(part, begin, stop) for begin, stop in pairwise(bounds[1:])]
        if not pool.hand_out(handoffs):  # set_nthreads closed this pool meanwhile: every part here
            return [part(begin, stop) for begin, stop in pairwise(bounds)]
        try:
            first = part(0, bounds[1])
        finally:
            for handoff in handoffs:  # helpers go back only when their parts are done
                handoff.done.acquire()
    finally:
        pool.give_back(helpers)
    for handoff in handoffs:
        if handoff.error is not None:
            raise handoff.error
    return [first, *(handoff.result for handoff in handoffs)]


def in_parts(nbytes: int, length: int, part: Callable[[int, int], T]) -> list[T]:
    """``part(start, stop)`` over ``range(length)``, split over threads by the rule above; the
    parts' results.

    ``nbytes`` is the size of the work (the bytes read); parts must be independent.
    """
    if not _splits(nbytes):
        return [part(0, length)]
    return _run(length, part)


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
        src.nbytes < SPLIT_BYTES
        or not (_plain(src) and _plain(dst) and dst.shape == src.shape)
        or np.may_share_memory(dst, src)
    ):
        dst[...] = src
        return
    copy_flat_into(dst, src)


def copy_flat_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """`copy_into` for a caller that knows what it checks: flat plain arrays of one length, apart
    in memory, of `SPLIT_BYTES` or more (the codec's common case, checked there)."""
    if not _splits(src.nbytes):
        dst[...] = src
        return
    _run(len(src), lambda start, stop: _copy_part(dst[start:stop], src[start:stop]))


def copied_as(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new array of ``dtype`` holding ``src``: ``src.astype(dtype)``, or the same made by several
    threads."""
    if not _plain(src) or not _splits(src.nbytes):
        return src.astype(dtype)
    out = np.empty(src.shape, dtype)
    _run(len(src), lambda start, stop: _copy_part(out[start:stop], src[start:stop]))
    return out
