"""Copies that convert byte order, split over threads where the machine rewards it.

numpy releases the GIL while it copies, so a large copy can run on several
cores. A copy is split when all of these hold:

1. Threads are allowed: ``numcodecs_bytes.use_threads`` is True, or None (the
   default) and the caller is the main thread. As with numcodecs' Blosc:
   zarr-python runs codecs on its event-loop thread and dask on worker threads,
   where calls are parallel already and a split only competes for the cores.
2. The copy outgrows the cache: its source and destination together exceed half
   the largest CPU cache (`split_from`; half, because the cache is shared with
   the rest of the program and, on a VM, with other tenants). Below that one
   core copies at full speed and waking a second costs more than it saves;
   above it a second core adds bandwidth. Measured on a 2-core VM with an
   8 MiB cache (benchmarks/threads.py): a split at 1.5 MiB took 1.3x the time
   of one thread, at 2 MiB the same, at 3 MiB 0.75-0.8x, at 4 MiB 0.65-0.7x.
3. A helper thread is free: at most ``get_nthreads() - 1`` helpers copy at once,
   whoever calls; a caller that finds none free copies alone (never waits).

A split copy has one part per thread, at most one per core. `copy_into` and
`copied_as` are the only ways the codec copies data.
"""

from __future__ import annotations

import glob
import operator
import os
import sys
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any, SupportsIndex

import numpy as np

__all__ = ["DEFAULT_CACHE_BYTES", "copied_as", "copy_into", "get_nthreads", "set_nthreads", "split_from"]

DEFAULT_CACHE_BYTES = 8 << 20
"""The largest CPU cache assumed where the system does not say (Linux says, in sysfs)."""

_ENV_VAR = "NUMCODECS_BYTES_NTHREADS"
_CORES = os.cpu_count() or 1


def _checked(n: Any) -> int:
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
        return _checked(int(value))
    except ValueError:
        # A bad setting must not stop `import numcodecs_bytes` (or the program importing it).
        warnings.warn(
            f"ignoring {_ENV_VAR}={value!r}: not a whole number >= 1; using {default} threads",
            RuntimeWarning,
            stacklevel=2,
        )
        return default


class _Pool:
    """The helper threads of one `set_nthreads` setting: a pool and how many of its helpers are free.

    The count is guarded by a plain lock (a C lock: threading.Semaphore costs
    microseconds per call, in Python, on every split copy).
    """

    def __init__(self, nthreads: int) -> None:
        helpers = min(nthreads, _CORES) - 1
        self.free = helpers
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=max(helpers, 1), thread_name_prefix="numcodecs-bytes")

    def take(self) -> int:
        """Take every free helper (never waits): how many were taken."""
        with self.lock:
            taken, self.free = self.free, 0
        return taken

    def give_back(self, helpers: int) -> None:
        with self.lock:
            self.free += helpers


_lock = threading.Lock()
_nthreads = _nthreads_from_env()
_pool: _Pool | None = None


def set_nthreads(n: SupportsIndex) -> int:
    """Set how many threads a large copy may be split over; 1 turns threading off.

    Returns the previous value, like ``numcodecs.blosc.set_nthreads``. The
    default comes from the environment variable ``NUMCODECS_BYTES_NTHREADS``,
    else the number of cores (at most 8). A copy never uses more threads than
    the machine has cores. ``numcodecs_bytes.use_threads`` says from which
    threads copies may be split (None: the main thread only; True; False).
    """
    global _nthreads, _pool
    n = _checked(n)
    with _lock:
        previous, _nthreads = _nthreads, n
        if _pool is not None and n != previous:
            _pool.executor.shutdown(wait=False)  # running copies finish; new ones use a new pool
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


_package = sys.modules.get(__package__ or "")  # where users set use_threads
_main_thread = threading.main_thread().ident


def _forget_pool_after_fork() -> None:
    # The child has none of the parent's threads: start afresh, lazily. Its main thread is the one that forked.
    global _pool, _lock, _main_thread
    _pool = None
    _lock = threading.Lock()
    _main_thread = threading.main_thread().ident


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _threads_allowed() -> bool:
    setting = getattr(_package, "use_threads", None)
    if setting is None:
        return threading.get_ident() == _main_thread
    return bool(setting)


def _copy_part(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    dst[...] = src


def _split_copy(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """One contiguous part per free helper in the pool, and the first on the calling thread.

    With no helper free, the whole copy is the caller's: it never waits.
    """
    pool = _get_pool()
    helpers = pool.take()
    try:
        parts = helpers + 1
        bounds = [len(dst) * i // parts for i in range(parts + 1)]
        futures: list[Future[None]] = []
        for start, stop in pairwise(bounds[1:]):
            try:
                futures.append(pool.executor.submit(_copy_part, dst[start:stop], src[start:stop]))
            except RuntimeError:  # set_nthreads shut this pool down meanwhile: copy the part here
                _copy_part(dst[start:stop], src[start:stop])
        _copy_part(dst[: bounds[1]], src[: bounds[1]])
        for future in futures:
            future.result()
    finally:
        pool.give_back(helpers)


def _largest_cache_bytes() -> int:
    """The size of the largest CPU cache, from Linux's sysfs; `DEFAULT_CACHE_BYTES` where it does not say."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = Path(path).read_text().strip().upper()
            sizes.append(int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text))
        except (OSError, ValueError):
            continue
    return max(sizes, default=DEFAULT_CACHE_BYTES)


_SPLIT_FROM = _largest_cache_bytes() // 4 + 1


def split_from() -> int:
    """The size in bytes from which copies are split: source and destination exceed half the largest cache."""
    return _SPLIT_FROM


def _splits(src: np.ndarray[Any, Any]) -> bool:
    """Whether a copy from ``src`` is split: large enough, flat, plain, and threads allowed here."""
    return (
        src.nbytes >= _SPLIT_FROM and _nthreads > 1 and src.ndim == 1 and type(src) is np.ndarray and _threads_allowed()
    )


def copy_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    """``dst[...] = src``, converting byte order; split over threads by the rule above.

    Only flat, plain, non-overlapping arrays of equal length are split;
    anything else is one numpy assignment (numpy handles overlap itself).
    """
    if _splits(src) and dst.shape == src.shape and type(dst) is np.ndarray and not np.may_share_memory(dst, src):
        _split_copy(dst, src)
    else:
        dst[...] = src


def copied_as(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A new array of ``dtype`` holding ``src``: ``src.astype(dtype)``, or the same made by several threads."""
    if not _splits(src):
        return src.astype(dtype)
    out = np.empty(src.shape, dtype)
    _split_copy(out, src)
    return out
