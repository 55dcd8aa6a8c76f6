"""Copies that convert byte order, split over threads where the machine rewards it.

numpy releases the GIL while it copies, so a large copy can run on several
cores. Whether that pays depends on the machine (memory bandwidth per core, the
cost of waking a thread) and on the copy (a fresh output is faulted in page by
page, an existing one is not): on VMs of one kind the size from which a second
thread paid ranged from 4 MiB to more than 32 MiB. So no size is fixed here.
Copies of `MIN_BYTES` or more are timed, per size class (a power of two) and
kind (fresh or existing output), on one thread and on several; a class uses
threads while they measure faster there, and tries the other way again once in
`EXPLORE_EVERY` calls, so the choice follows the machine and its load.

This module holds the whole size policy: `copy_into` and `copied_as` are the
only ways the codec copies data.
"""

from __future__ import annotations

import operator
import os
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from typing import Any, SupportsIndex

import numpy as np

__all__ = ["EXPLORE_EVERY", "MIN_BYTES", "copied_as", "copy_into", "get_nthreads", "set_nthreads"]

MIN_BYTES = 4 << 20
"""Smaller copies stay on the calling thread: waking another costs more than it can save."""

EXPLORE_EVERY = 32
"""A size class tries the way it does not use once in this many calls."""

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
# (size class, fresh output) -> [seconds per byte on one thread, on several (None until measured), calls]
_timings: dict[tuple[int, bool], list[Any]] = {}


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


def copy_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any], *, fresh: bool = False) -> None:
    """``dst[...] = src``, converting byte order; on several threads where that measures faster.

    Only flat, plain, non-overlapping arrays of equal length are split;
    anything else is one numpy assignment (numpy handles overlap itself).
    ``fresh`` says that ``dst`` was just allocated (its pages are not yet mapped).
    """
    nbytes = dst.nbytes
    if nbytes < MIN_BYTES:
        dst[...] = src
        return
    nthreads = _nthreads
    if (
        nthreads == 1
        or dst.ndim != 1
        or dst.shape != src.shape
        or type(dst) is not np.ndarray
        or np.may_share_memory(dst, src)
    ):
        dst[...] = src
        return
    timing = _timings.setdefault((nbytes.bit_length(), fresh), [None, None, 0])
    use_threads = _choose(timing)
    start = time.perf_counter()
    if use_threads:
        _split_copy(dst, src, nthreads)
    else:
        dst[...] = src
    per_byte = (time.perf_counter() - start) / nbytes
    previous = timing[use_threads]
    timing[use_threads] = per_byte if previous is None else previous + (per_byte - previous) / 4


def _choose(timing: list[Any]) -> bool:
    """Whether the next copy of a size class uses threads, from its timings; counts the call."""
    single, threaded, calls = timing
    timing[2] = calls + 1
    if single is None or threaded is None:  # measure each way once
        return single is not None
    return bool((threaded < single) != (calls % EXPLORE_EVERY == 0))


def copied_as(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new flat array of ``dtype`` holding ``src`` (``src.astype(dtype)``), threaded as `copy_into`."""
    if src.nbytes < MIN_BYTES:
        return src.astype(dtype)  # the least overhead per call
    out = np.empty(src.shape, dtype)
    copy_into(out, src, fresh=True)
    return out
