"""Shards packed on a dask cluster: each task opens the store where it runs and packs a few shards.

The store must be where every worker reaches it by the same location: an
object store, or a file system every worker mounts at the same path. What
each task packed comes back to the caller, which checks and switches to the
shards (`numcodecs_bytes.to_v3.sharded`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from .options import StoreOptions
from .shard_format import Packed, Shard
from .store import open_store

__all__ = ["pack_on_cluster"]

SHARDS_PER_TASK = 4
"""Shards one task packs: few, so that tasks spread over the workers and one lost worker costs
little."""


def pack_on_cluster(
    client: Any,
    location: str | os.PathLike[str],
    options: StoreOptions,
    shards: Sequence[Shard],
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Packed | Exception]:
    """Each shard packed by a task on ``client``'s cluster; what each task packed, or what it met.
    ``on_progress`` hears of each task's shards and bytes as the task ends."""
    from distributed import as_completed

    tasks = [
        list(shards[start : start + SHARDS_PER_TASK])
        for start in range(0, len(shards), SHARDS_PER_TASK)
    ]
    futures = client.map(
        _pack_task, [os.fspath(location)] * len(tasks), [options] * len(tasks), tasks, pure=False
    )
    task_of = {future.key: task for future, task in zip(futures, tasks, strict=True)}
    results: dict[str, Packed | Exception] = {}
    for future in as_completed(futures):  # type: ignore[no-untyped-call]
        task = task_of[future.key]
        try:
            packed: dict[str, Packed | Exception] = future.result()
        # the task failed as a whole (a worker lost, the store unreachable there)
        except Exception as exc:
            packed = dict.fromkeys((shard.path for shard in task), exc)
        results |= packed
        if on_progress is not None:
            nbytes = sum(
                sum(size or 0 for size in result.sizes)
                for result in packed.values()
                if isinstance(result, Packed)
            )
            on_progress(len(packed), nbytes)
    return results


def _pack_task(
    location: str, options: StoreOptions, shards: list[Shard]
) -> dict[str, Packed | Exception]:
    return open_store(location, options).packing.pack(shards)
