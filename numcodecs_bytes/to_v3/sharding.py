"""Sharding on conversion, the rules: which arrays get shards, of what shape, and the document that says so.

Pure: metadata in, documents out. A converted array's chunks (its v2 chunk
files, byte for byte) become the inner chunks of ``sharding_indexed`` shards
whose inner codecs are the array's own, under Zarr v3's default chunk key
encoding (``c/0/0``: no shard key is a v2 chunk key).

The shard shape, for ``shard_size`` bytes: as many whole chunks as fit in
that many bytes of uncompressed data, at least one, never more than the array
has; taken from the last axis to the first (whole rows of chunks in C order
first), each axis's count as large as fits.

>>> shard_shape([256, 1024, 1024], [8, 256, 256], 4, 64 * 2**20)
(16, 1024, 1024)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any, NamedTuple

from .rules import UnconvertibleError

__all__ = [
    "INDEX_CODECS",
    "ShardLayout",
    "shard_layout",
    "shard_shape",
    "sharded_document",
    "shards_of",
    "unsharded",
]

INDEX_CODECS = ({"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"})
"""The index codecs of every shard written: what zarr-python writes by default."""
_KEYS = {"name": "default", "configuration": {"separator": "/"}}


def shard_shape(shape: Sequence[int], chunks: Sequence[int], itemsize: int, shard_size: int) -> tuple[int, ...]:
    """The shard shape for an array of ``shape`` in ``chunks`` of ``itemsize``-byte elements: as many whole
    chunks as fit in ``shard_size`` bytes of uncompressed data (at least one), from the last axis to the first,
    never more along an axis than the array has."""
    grid = [-(-extent // size) for extent, size in zip(shape, chunks, strict=True)]
    fit = max(1, shard_size // max(1, math.prod(chunks) * itemsize))
    counts = [1] * len(chunks)
    for axis in reversed(range(len(chunks))):
        counts[axis] = max(1, min(grid[axis], fit))
        fit //= counts[axis]
    return tuple(count * size for count, size in zip(counts, chunks, strict=True))


class ShardLayout(NamedTuple):
    """How one array is sharded."""

    shape: tuple[int, ...]  # the shard shape (the chunk grid of the sharded array)
    inner: tuple[int, ...]  # the inner chunk shape (the v2 chunks)


def shard_layout(document: dict[str, Any], zarray: dict[str, Any], shard_size: int | None,
                 explicit: Sequence[int] | None = None) -> tuple[ShardLayout | None, str | None]:  # fmt: skip
    """How a converted array is sharded (None where it is not), and a note where that needs telling.

    Arrays of one chunk (0-d ones too) and of no element stay as they are;
    so do those whose elements have no fixed size (strings of any length),
    with a note. ``explicit``: a shard shape asked for this array, which must
    be a multiple of its chunks.
    """
    shape, chunks = list(zarray["shape"]), list(zarray["chunks"])
    if shard_size is None and explicit is None:
        return None, None
    if zarray.get("dtype") == "|O" or "|O" in str(zarray.get("dtype")):
        return None, "left unsharded: its elements have no fixed size, so no shard size says how many fit"
    if not all(shape) or math.prod(-(-e // c) for e, c in zip(shape, chunks, strict=True)) <= 1:
        return None, None
    if explicit is not None:
        wanted = tuple(int(n) for n in explicit)
        if len(wanted) != len(chunks) or any(n < c or n % c for n, c in zip(wanted, chunks, strict=True)):
            raise UnconvertibleError(
                f"shard shape {list(wanted)} is not a multiple of its chunks {chunks} on every axis"
            )
        return ShardLayout(wanted, tuple(chunks)), None
    assert shard_size is not None
    itemsize = _itemsize(document)
    return ShardLayout(shard_shape(shape, chunks, itemsize, shard_size), tuple(chunks)), None


def _itemsize(document: dict[str, Any]) -> int:
    """The bytes of one element, uncompressed, from a v3 document's data type (as zarr-python reads it)."""
    from ._zarr_api import zarr_api

    zarr = zarr_api()
    metadata = zarr.array_v3.from_dict(dict(document))
    return int(metadata.dtype.to_native_dtype().itemsize)


def sharded_document(document: dict[str, Any], layout: ShardLayout) -> dict[str, Any]:
    """An array's converted document, sharded: its chunks the inner chunks, its codecs theirs."""
    sharding = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(layout.inner),
            "codecs": document["codecs"],
            "index_codecs": list(INDEX_CODECS),
            "index_location": "end",
        },
    }
    sharded = dict(document)
    sharded["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": list(layout.shape)}}
    sharded["chunk_key_encoding"] = dict(_KEYS)
    sharded["codecs"] = [sharding]
    return sharded


def unsharded(existing: dict[str, Any], document: dict[str, Any]) -> ShardLayout | None:
    """The layout where ``existing`` is ``document`` as `sharded_document` shards it (an earlier run's); None
    where it is anything else."""
    codecs = existing.get("codecs")
    if not (isinstance(codecs, list) and len(codecs) == 1 and isinstance(codecs[0], dict)):
        return None
    grid = existing.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    inner = codecs[0].get("configuration", {}).get("chunk_shape")
    if codecs[0].get("name") != "sharding_indexed" or not isinstance(grid, list) or not isinstance(inner, list):
        return None
    layout = ShardLayout(tuple(grid), tuple(inner))
    same = sharded_document(document, layout) == existing
    return layout if same and list(layout.inner) == document["chunk_grid"]["configuration"]["chunk_shape"] else None


class ShardPlan(NamedTuple):
    """One shard of an array: its key, and the grid index of each inner chunk (None: past the array's edge)."""

    key: str  # below the array's folder, e.g. "c/0/1"
    inner: tuple[tuple[int, ...] | None, ...]  # in C order of the inner grid


def shards_of(shape: Sequence[int], layout: ShardLayout) -> list[ShardPlan]:
    """Every shard of an array that holds an element, in C order, each with its inner chunks."""
    per_shard = [s // c for s, c in zip(layout.shape, layout.inner, strict=True)]
    grid = [-(-extent // size) for extent, size in zip(shape, layout.inner, strict=True)]
    shard_grid = [-(-extent // size) for extent, size in zip(shape, layout.shape, strict=True)]
    plans = []
    for shard in product(*map(range, shard_grid)):
        inner: list[tuple[int, ...] | None] = []
        for local in product(*map(range, per_shard)):
            index = tuple(s * n + i for s, n, i in zip(shard, per_shard, local, strict=True))
            inner.append(index if all(i < g for i, g in zip(index, grid, strict=True)) else None)
        plans.append(ShardPlan("c/" + "/".join(map(str, shard)), tuple(inner)))
    return plans
