"""The sharding pass's plan: what becomes of each array, from its documents and the files below its folder.

Pure: documents and names in, a plan out. The array's ``zarr.json`` as the
store holds it now decides, whichever side wrote it last:

- unsharded, its chunks under Zarr v2 keys (a converted array, or one a Zarr
  v3 writer appended to since): `Pack` its chunk files into shards;
- sharded by an earlier run, its v2 chunk files kept, in a run that removes
  them: `Clear` them, each where its shard holds it (or was written after it);
- a killed run was removing its v2 chunk files: `Finish` that;
- anything else: `Leave` it, with a note or a problem where that needs telling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..store.chunks import Shard
from ..store.layout import ChunkKeys
from .sharding import (
    ShardLayout,
    ShardPlan,
    chunk_shape,
    holds_chunks_of,
    layout_of,
    shard_layout,
    sharded_document,
    shards_of,
    v2_separator,
)

__all__ = ["ArrayFound", "Clear", "Finish", "Leave", "Pack", "Plan", "chunk_keys", "plan", "shard_count"]


class ArrayFound(NamedTuple):
    """An array as the metadata run leaves it, for the sharding pass."""

    path: str  # relative to the store, "" for the root
    folder: str  # its folder's path in the store
    document: dict[str, Any]  # its zarr.json as the store holds it now
    current: bytes  # those bytes, as this run read or wrote them
    v2: dict[str, Any] | None = None  # its .zarray as v2 readers take it (the chunk layout found); None: no v2 files
    conversion: dict[str, Any] | None = None  # its v2 metadata converted, unsharded: what its v2 chunk files are
    read: Mapping[str, bytes] = {}  # its v2 metadata files as read, by name: their digests (for their removal)
    removing: bool = False  # a killed run was removing its v2 chunk files (see `store.layout.REMOVING_V2`)


class Pack(NamedTuple):
    """An unsharded array whose chunk files go into shards; ``shards`` in the order of ``plans``."""

    array: ArrayFound
    layout: ShardLayout
    sharded: dict[str, Any]  # its document once sharded
    keys: ChunkKeys  # where its chunk files are
    plans: list[ShardPlan]
    shards: list[Shard]


class Clear(NamedTuple):
    """An array sharded by an earlier run, whose v2 chunk files a removing run removes: ``shards`` hold them as
    their sources."""

    array: ArrayFound
    shards: list[Shard]


class Finish(NamedTuple):
    """An array whose v2 chunk files a killed run was removing: the rest of them."""

    array: ArrayFound
    chunks: list[str]  # paths in the store
    folders: list[str]  # the folders they lie in, below the array's (``0/0`` keys)


class Leave(NamedTuple):
    """An array left as it is: a note, or a problem that keeps its v2 files (and its groups')."""

    array: ArrayFound
    note: str | None = None
    problem: str | None = None


Plan = Pack | Clear | Finish | Leave


def chunk_keys(document: dict[str, Any]) -> ChunkKeys | None:
    """Where an unsharded v3 array's chunk files lie, where they lie under v2 keys; None where they do not."""
    separator, chunks = v2_separator(document), chunk_shape(document)
    if separator is None or chunks is None:
        return None
    return ChunkKeys(tuple(document["shape"]), tuple(chunks), separator)


def v2_keys(zarray: dict[str, Any]) -> ChunkKeys:
    """Where a v2 array's chunk files lie (its ``.zarray`` as v2 readers take it)."""
    return ChunkKeys(tuple(zarray["shape"]), tuple(zarray["chunks"]), zarray.get("dimension_separator") or ".")


def shard_count(array: ArrayFound, shard_size: int | None, explicit: Sequence[int] | None) -> int:
    """How many shards packing the array writes at most (0 where it is not packed): what sizes a round."""
    if chunk_keys(array.document) is None:
        return 0
    try:
        layout, _ = shard_layout(array.document, shard_size, explicit)
    except ValueError:
        return 0
    if layout is None:
        return 0
    count = 1
    for extent, size in zip(array.document["shape"], layout.shape, strict=True):
        count *= -(-int(extent) // size)
    return count


def plan(
    array: ArrayFound, names: Iterable[str], shard_size: int | None, explicit: Sequence[int] | None, removing: bool
) -> Plan:
    """What becomes of ``array`` (see the module's docstring); ``names``: the files below its folder.

    Raises
    ------
    rules.UnconvertibleError
        Where a shard shape asked for it is not a multiple of its chunks.
    """
    names = list(names)
    if array.removing:
        return _finish(array, names)
    if layout_of(array.document) is not None:
        return _sharded(array, names, shard_size, explicit, removing)
    keys = chunk_keys(array.document)
    asked = shard_size is not None or explicit is not None
    if keys is None:
        default = "left unsharded: its chunks lie under Zarr v3's default keys (c/...), where its shards would go"
        return Leave(array, default if asked else None)
    layout, note = shard_layout(array.document, shard_size, explicit)
    if layout is None:
        return Leave(array, note)
    stored = keys.stored(names)
    plans = shards_of(keys.shape, layout)
    shards = _shards(array.folder, plans, stored)
    return Pack(array, layout, sharded_document(array.document, layout), keys, plans, shards)


def _sharded(
    array: ArrayFound, names: list[str], shard_size: int | None, explicit: Sequence[int] | None, removing: bool
) -> Plan:
    """An array sharded already: its v2 chunk files cleared where the run removes them; a note where another
    shard shape was asked."""
    layout = layout_of(array.document)
    assert layout is not None
    note = None
    if array.conversion is not None and (shard_size is not None or explicit is not None):
        wanted, _ = shard_layout(array.conversion, shard_size, explicit)
        if wanted is not None and wanted.shape != layout.shape:
            note = (f"sharded already, in shards of {list(layout.shape)} (not {list(wanted.shape)}): kept as it is; "
                    "to-v3 makes shards, it does not make them again")  # fmt: skip
    if array.v2 is None or array.conversion is None or not removing:
        return Leave(array, note)
    keys = v2_keys(array.v2)
    stored = keys.stored(names)
    if not stored:
        return Leave(array, note)
    if not holds_chunks_of(array.document, array.conversion):
        return Leave(array, note, f"{len(stored):,} v2 chunk files kept: its shards are not made of them (their "
                                  "inner chunks have another shape or other codecs); remove them once no Zarr v2 "
                                  "reader needs them")  # fmt: skip
    shards = _shards(array.folder, shards_of(keys.shape, layout), stored)
    return Clear(array, [shard for shard in shards if any(shard.sources)])


def _shards(folder: str, plans: list[ShardPlan], stored: Mapping[tuple[int, ...], str]) -> list[Shard]:
    """Each planned shard with its sources: the chunk files stored at its inner chunks' places."""

    def source(index: tuple[int, ...] | None) -> str | None:
        return None if index is None or index not in stored else f"{folder}/{stored[index]}"

    return [Shard(f"{folder}/{shard.key}", tuple(map(source, shard.inner))) for shard in plans]


def _finish(array: ArrayFound, names: list[str]) -> Finish:
    keys = chunk_keys(array.conversion) if array.conversion is not None else None
    if keys is None and array.v2 is not None:
        keys = v2_keys(array.v2)
    stored = sorted(keys.stored(names).values()) if keys is not None else []
    folders = sorted({name.split("/")[0] for name in stored if "/" in name})
    return Finish(array, [f"{array.folder}/{name}" for name in stored], [f"{array.folder}/{f}" for f in folders])
