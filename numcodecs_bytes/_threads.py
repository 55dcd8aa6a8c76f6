"""Split large byte-order copies over a few threads.

numpy releases the GIL while it copies, so a large swap can run on every
core. Whether that pays depends on the machine: on the 2-core VM of
benchmarks/results.md one thread already reaches the memory bandwidth
(18-20 GB/s into existing memory) and waking a second one costs about 100 us,
so two threads first break even at about 32 MiB; a fresh output (encode), bound
by page faults rather than bandwidth, gains up to 1.4x above that. Smaller
buffers stay on the calling thread.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

__all__ = ["THRESHOLD_BYTES", "copy_into", "get_nthreads", "set_nthreads"]

THRESHOLD_BYTES = 32 << 20
"""Copies of fewer bytes stay on the calling thread (chosen from benchmarks/run.py); parts are at least half this."""

_ENV_VAR = "NUMCODECS_BYTES_NTHREADS"


def _nthreads_from_env() -> int:
    value = os.environ.get(_ENV_VAR)
    if value is None or value.strip() == "":
        return min(os.cpu_count() or 1, 8)
    try:
        return _checked(int(value))
    except ValueError:
        raise ValueError(f"{_ENV_VAR} must be a whole number >= 1, got {value!r}") from None


def _checked(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of threads must be a whole number >= 1, got {n!r}")
    return n


_lock = threading.Lock()
_nthreads = _nthreads_from_env()
_pool: ThreadPoolExecutor | None = None


def set_nthreads(n: int) -> int:
    """Set how many threads a large copy is split over; 1 turns threading off.

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
    return previous


def get_nthreads() -> int:
    """How many threads a large copy is split over."""
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


def copy_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """``dst[...] = src`` for 1-d arrays of equal length, converting byte order.

    Above `THRESHOLD_BYTES` the arrays are cut into one contiguous part per
    thread; the calling thread copies the first part itself.
    """
    nthreads = _nthreads
    if nthreads == 1 or dst.nbytes < THRESHOLD_BYTES:
        dst[...] = src
        return
    parts = min(nthreads, max(1, dst.nbytes // (THRESHOLD_BYTES // 2)))
    bounds = [len(dst) * i // parts for i in range(parts + 1)]
    pool = _get_pool(nthreads - 1 or 1)
    futures: list[Future[None]] = []
    for start, stop in pairwise(bounds[1:]):
        try:
            futures.append(pool.submit(_copy_part, dst[start:stop], src[start:stop]))
        except RuntimeError:  # set_nthreads shut this pool down meanwhile: copy the part here
            _copy_part(dst[start:stop], src[start:stop])
    _copy_part(dst[: bounds[1]], src[: bounds[1]])
    for future in futures:
        future.result()
