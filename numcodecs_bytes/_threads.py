"""Copies that convert byte order, split over threads where the machine rewards it.

numpy releases the GIL while it copies, so a large copy can run on several
cores. Whether that pays depends on the machine (memory bandwidth per core, the
cost of waking a thread) and on the copy (a fresh output is faulted in page by
page, an existing one is not): on VMs of one kind the size from which a second
thread paid ranged from 4 MiB to more than 32 MiB. So no size is fixed here.
Copies of `MIN_BYTES` or more are timed, per size class (a power of two) and
kind (fresh or existing output), on one thread and on several. Each way is
measured twice first, after one call of each that is not kept (the first call
of a class pays for fresh heap pages or a pool thread's start). Then a class
uses threads only where their recent times (the last `SAMPLES`) beat one
thread's both in the median and in the mean: the median ignores one slow call
(a preemption, a collection), the mean prices in a way that is now and then
ten times slower (on some VMs, a fresh output faulted in from two threads at
once); otherwise numpy's own one-thread copy. The way not in use is tried again
after `EXPLORE_EVERY` calls times how many times slower it measured (in the
mean), which keeps the tries near 1/`EXPLORE_EVERY` of the time however slow
that way is, and lets the choice follow the machine and its load.

This module holds the whole size policy: `copy_into` and `copied_as` are the
only ways the codec copies data.
"""

from __future__ import annotations

import operator
import os
import statistics
import threading
import time
import warnings
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from typing import Any, SupportsIndex

import numpy as np

__all__ = ["EXPLORE_EVERY", "MIN_BYTES", "SAMPLES", "copied_as", "copy_into", "get_nthreads", "set_nthreads"]

MIN_BYTES = 4 << 20
"""Smaller copies stay on the calling thread: waking another costs more than it can save."""

EXPLORE_EVERY = 16
"""A size class tries the way it does not use after this many calls, times how much slower that way measured."""

SAMPLES = 4
"""How many recent times of each way a size class keeps."""

_ENV_VAR = "NUMCODECS_BYTES_NTHREADS"


def _checked(n: Any) -> int:
    try:
        value = operator.index(n)
    except TypeError:
        value = 0
    if isinstance(n, bool) or value < 1:
        raise ValueError(f"the number of threads must be a whole number >= 1, got {n!r}")
    return value


def _nthreads_from_env() -> int:
    default = min(os.cpu_count() or 1, 8)
    value = os.environ.get(_ENV_VAR, "").strip()
    if not value:
        return default
    try:
        return _checked(int(value))
    except ValueError:
        # A bad setting must not stop `import numcodecs_bytes` (or the program importing it).
        warnings.warn(
            f"ignoring {_ENV_VAR}={value!r}: not a whole number >= 1; using {default} threads",
            RuntimeWarning,
            stacklevel=2,
        )
        return default


_lock = threading.Lock()
_nthreads = _nthreads_from_env()
_pool: ThreadPoolExecutor | None = None


class _Timing:
    """One size class's recent seconds per byte, on one thread and on several, and its calls."""

    __slots__ = ("calls", "next_try", "single", "threaded", "warmed")

    def __init__(self) -> None:
        self.single: deque[float] = deque(maxlen=SAMPLES)
        self.threaded: deque[float] = deque(maxlen=SAMPLES)
        self.calls = 0
        self.next_try = EXPLORE_EVERY  # the call that tries the way not in use
        self.warmed: set[bool] = set()  # the ways (threads or not) whose first call is past


_timings: dict[tuple[int, bool], _Timing] = {}  # by (size class, fresh output)


def set_nthreads(n: SupportsIndex) -> int:
    """Set how many threads a large copy may be split over; 1 turns threading off.

    Returns the previous value, like ``numcodecs.blosc.set_nthreads``. The
    default comes from the environment variable ``NUMCODECS_BYTES_NTHREADS``,
    else the number of cores (at most 8).
    """
    global _nthreads, _pool
    n = _checked(n)
    with _lock:
        previous, _nthreads = _nthreads, n
        if _pool is not None and n != previous:
            _pool.shutdown(wait=False)  # running copies finish; new ones use the new pool
            _pool = None
        _timings.clear()  # measured with the old number of threads
    return previous


def get_nthreads() -> int:
    """How many threads a large copy may be split over."""
    return _nthreads


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="numcodecs-bytes")
        return _pool


def _forget_pool_after_fork() -> None:
    # The child has none of the parent's threads: start afresh, lazily.
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _copy_part(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    dst[...] = src


def _split_copy(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any], nthreads: int) -> None:
    """One contiguous part per thread; the calling thread copies the first."""
    bounds = [len(dst) * i // nthreads for i in range(nthreads + 1)]
    pool = _get_pool(nthreads - 1)
    futures: list[Future[None]] = []
    for start, stop in pairwise(bounds[1:]):
        try:
            futures.append(pool.submit(_copy_part, dst[start:stop], src[start:stop]))
        except RuntimeError:  # set_nthreads shut this pool down meanwhile: copy the part here
            _copy_part(dst[start:stop], src[start:stop])
    _copy_part(dst[: bounds[1]], src[: bounds[1]])
    for future in futures:
        future.result()


def copy_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """``dst[...] = src``, converting byte order; on several threads where that measures faster.

    Only flat, plain, non-overlapping arrays of equal length are split;
    anything else is one numpy assignment (numpy handles overlap itself).
    """
    if src.nbytes < MIN_BYTES:  # most copies: no policy to consult
        dst[...] = src
        return
    nthreads = _nthreads  # read once: set_nthreads may run meanwhile
    timing = _timing(src, nthreads, fresh=False)
    if timing is None or dst.shape != src.shape or type(dst) is not np.ndarray or np.may_share_memory(dst, src):
        dst[...] = src
        return
    use_threads, start = _choose(timing), time.perf_counter()
    if use_threads:
        _split_copy(dst, src, nthreads)
    else:
        dst[...] = src
    _record(timing, use_threads, start, dst.nbytes)


def copied_as(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new array of ``dtype`` holding ``src``: ``src.astype(dtype)``, or the same made by several threads."""
    if src.nbytes < MIN_BYTES:  # most copies: no policy to consult
        return src.astype(dtype)
    nthreads = _nthreads
    timing = _timing(src, nthreads, fresh=True)
    if timing is None:
        return src.astype(dtype)
    use_threads, start = _choose(timing), time.perf_counter()
    if use_threads:
        out = np.empty(src.shape, dtype)
        _split_copy(out, src, nthreads)
    else:
        out = src.astype(dtype)
    _record(timing, use_threads, start, out.nbytes)
    return out


def _timing(src: np.ndarray[Any, Any], nthreads: int, fresh: bool) -> _Timing | None:
    """The timings of the size class of ``src`` (of MIN_BYTES or more); None where threads cannot serve."""
    if nthreads == 1 or src.ndim != 1 or type(src) is not np.ndarray:
        return None
    key = (src.nbytes.bit_length(), fresh)  # a fresh output is faulted in page by page: timed apart
    return _timings.get(key) or _timings.setdefault(key, _Timing())


def _record(timing: _Timing, use_threads: bool, start: float, nbytes: int) -> None:
    if use_threads not in timing.warmed:  # a first call's one-off costs would stay in the mean for long
        timing.warmed.add(use_threads)
        return
    (timing.threaded if use_threads else timing.single).append((time.perf_counter() - start) / nbytes)


def _choose(timing: _Timing) -> bool:
    """Whether the next copy of a size class uses threads, from its recent times; counts the call."""
    calls = timing.calls
    timing.calls += 1
    if len(timing.single) < 2 or len(timing.threaded) < 2:  # measure each way twice, alternately
        return calls % 2 == 1
    single, threaded = statistics.fmean(timing.single), statistics.fmean(timing.threaded)
    use_threads = threaded < single and statistics.median(timing.threaded) < statistics.median(timing.single)
    if calls >= timing.next_try:
        timing.next_try = calls + round(EXPLORE_EVERY * max(single, threaded) / min(single, threaded))
        return not use_threads
    return use_threads
