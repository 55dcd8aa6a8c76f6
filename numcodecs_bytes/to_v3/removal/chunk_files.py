"""Clearing the v2 chunk files of arrays sharded by an earlier run: which may go (`clearable`, a
rule on what the store says their shards hold), and their removal with the arrays' v2 metadata
(`clear`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...problems import reason
from ...store import Removal, Store
from ...store.shard_format import source_path
from ..findings import Findings
from ..rules.plan import Clear
from .removals import Removals

__all__ = ["clear", "clearable"]


def clear(store: Store, removals: Removals, clears: list[Clear]) -> Findings:
    """Arrays sharded earlier: their v2 files removed where every chunk file is held by its shard
    (or its shard was written after it: a Zarr v3 writer since, whose write v3 readers read); the
    others fail."""
    found = Findings()
    if not clears:
        return found
    held = store.packing.held(shard for clear in clears for shard in clear.shards)
    going = []
    for each in clears:
        chunk_removals, problem = clearable(each, held)
        if problem is not None:
            found.fail(each.array.path, problem)
        else:
            assert each.array.conversion is not None
            going.append((each.array, each.array.conversion, chunk_removals))
    return found.add(removals.arrays(going))


def clearable(clear: Clear, held: Mapping[str, Any]) -> tuple[list[Removal], str | None]:
    """The removals of an array's chunk files, each where its shard holds its bytes or was written
    after it (a Zarr v3 writer since: v3 readers read that write); or the reason none may go."""
    at = clear.array.at
    removals = []
    for shard in clear.shards:
        found = held[shard.path]
        key = at.below(shard.path)
        if isinstance(found, FileNotFoundError):
            return [], (
                f"{key}: no such shard, where chunk files of it are kept (a Zarr v2 writer wrote "
                "where there was no data since the sharding, or a Zarr v3 writer removed it): its "
                f"v2 files are kept. {_WHAT_TO_DO}"
            )
        if isinstance(found, Exception):
            return [], f"{key}: {reason(found)}; its v2 files are kept"
        for held_source, same, version, written in zip(
            shard.sources, found.same, found.versions, found.written, strict=True
        ):
            if held_source is None or same is None or version is None:
                continue  # no chunk file (or gone since it was listed): nothing to remove
            source = source_path(held_source)
            if same or (
                written is not None
                and found.shard_written is not None
                and written < found.shard_written
            ):
                removals.append(Removal(source, None, version))
                continue
            chunk = at.below(source)
            if (
                written is not None
                and found.shard_written is not None
                and written > found.shard_written
            ):
                return [], (
                    f"{chunk}: written after its shard {key} (by a Zarr v2 writer, since "
                    "the sharding), which holds other bytes: v3 readers do not see that "
                    f"write; its v2 files are kept. {_WHAT_TO_DO}"
                )
            return [], (
                f"{chunk}: other bytes than its shard {key} holds, and their times do not "
                f"tell which was written last: its v2 files are kept. {_WHAT_TO_DO}"
            )
    return removals, None


_WHAT_TO_DO = (
    "Copy that region through Zarr v3 to keep the write (or remove the chunk file to drop it), "
    "then run again"
)
