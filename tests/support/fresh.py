"""Test oracles run in a new process that nothing but imports ran in: forked from a server that
imported zarr, numpy, s3fs and ome-zarr-models once (a new interpreter for each took 1.5-3 s of
CPU on these machines).

The process gets the caller's environment and folder, as a new interpreter
would; the oracle sees nothing the tests did in this one (zarr's configuration,
fsspec's caches, this package's codec enabled).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.context
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

PRELOAD = ["support.zarr_read", "support.ome_check"]
"""What the server imports (a module whose imports fail is left out by multiprocessing)."""


def _as_started(function: Callable[..., T], env: dict[str, str], cwd: str, *args: Any) -> T:
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    warnings.simplefilter("ignore")
    return function(*args)


@functools.cache
def _fork_server() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def in_a_fresh_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` (a module-level function of a `PRELOAD` module) in a new process."""
    with ProcessPoolExecutor(1, mp_context=_fork_server(), max_tasks_per_child=1) as one:
        started = one.submit(_as_started, function, dict(os.environ), os.getcwd(), *args)
        return started.result(timeout=300)
