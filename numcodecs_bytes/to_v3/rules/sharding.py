"""Sharding on conversion, the rules: which arrays get shards, of what shape, and the document that
says so.

Pure: metadata in, documents out. An unsharded v3 array whose chunks lie
under Zarr v2 keys (a converted array: its v2 chunk files) has those chunks,
byte for byte, become the inner chunks of ``sharding_indexed`` shards whose
inner codecs are the array's own, under Zarr v3's default chunk key encoding
(``c/0/0``: no shard key is a v2 chunk key). The array's document as it is
now decides (`shard_layout`): where a Zarr v3 writer changed it since the
conversion (an append), its shape and chunk keys are the ones that read the
data.

The shard shape, for ``shard_size`` bytes: as many whole chunks as fit in
that many bytes of uncompressed data, never more than the array has; taken
from the last axis to the first (whole rows of chunks in C order first), each
axis's count as large as fits. Where not even one chunk fits, the array stays
unsharded (`shard_layout`).

>>> shard_shape([256, 1024, 1024], [8, 256, 256], 4, 64 * 2**20)
(16, 1024, 1024)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any, NamedTuple

from ...store.shard_format import index_size
from .arrays import UnconvertibleError

__all__ = [
    "INDEX_CODECS",
    "TOO_SMALL",
    "ShardLayout",
    "ShardPlan",
    "chunk_shape",
    "holds_chunks_of",
    "inner_document",
    "is_sharding_of",
    "layout_of",
    "other_separator",
    "shard_key",
    "shard_layout",
    "shard_shape",
    "sharded_document",
    "shards_of",
]

INDEX_CODECS = ({"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"})
"""The index codecs of every shard written: what zarr-python writes by default."""


def shard_shape(
    shape: Sequence[int], chunks: Sequence[int], itemsize: int, shard_size: int
) -> tuple[int, ...]:
    """The shard shape for an array of ``shape`` in ``chunks`` of ``itemsize``-byte elements: as
    many whole chunks as fit in ``shard_size`` bytes of uncompressed data (at least one), from the
    last axis to the first, never more along an axis than the array has."""
    grid = [-(-extent // size) for extent, size in zip(shape, chunks, strict=True)]
    fit = max(1, shard_size // max(1, math.prod(chunks) * itemsize))
    counts = [1] * len(chunks)
    for axis in reversed(range(len(chunks))):
        counts[axis] = max(1, min(grid[axis], fit))
        fit //= counts[axis]
    return tuple(count * size for count, size in zip(counts, chunks, strict=True))


class ShardLayout(NamedTuple):
    """How one array is sharded: its shards, their keys (v3's default encoding) and where their
    index lies."""

    shape: tuple[int, ...]  # the shard shape (the chunk grid of the sharded array)
    inner: tuple[int, ...]  # the inner chunk shape (the chunks it had unsharded)
    separator: str = "/"  # of its shards' keys: c/0/1 or c.0.1
    index_at_end: bool = True  # else at the start of each shard
    checksum: bool = True  # its index followed by its crc32c

    @property
    def per_shard(self) -> int:
        """Inner chunks per shard."""
        return math.prod(s // c for s, c in zip(self.shape, self.inner, strict=True))

    @property
    def index_size(self) -> int:
        """Bytes of a shard's index: (offset, nbytes) per inner chunk, and its checksum."""
        return index_size(self.per_shard, self.checksum)


def chunk_shape(document: dict[str, Any]) -> list[int] | None:
    """The chunk shape of a v3 array document with a regular chunk grid of whole numbers of 1 or
    more; None where it has none."""
    grid = document.get("chunk_grid")
    shape = grid.get("configuration", {}).get("chunk_shape") if isinstance(grid, dict) else None
    if not isinstance(grid, dict) or grid.get("name") != "regular" or not isinstance(shape, list):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape):
        return None  # no grid anything can be computed from
    return list(shape)


def shard_layout(
    document: dict[str, Any], shard_size: int | None, explicit: Sequence[int] | None = None
) -> tuple[ShardLayout | None, str | None]:
    """How an unsharded v3 array is sharded (None where it is not), and a note where that needs
    telling.

    Arrays of one chunk (0-d ones too) and of no element stay as they are;
    so do those whose elements have no fixed size (strings of any length),
    and those whose chunks hold more than ``shard_size`` of data (`TOO_SMALL`),
    with a note. ``explicit``: a shard shape asked for this array, which must
    be a multiple of its chunks.
    """
    shape, chunks = [int(n) for n in document["shape"]], chunk_shape(document)
    if (shard_size is None and explicit is None) or chunks is None:
        return None, None
    itemsize = _itemsize(document)
    if itemsize is None:
        return (
            None,
            "left unsharded: its elements have no fixed size, so no shard size says how many fit",
        )
    if not all(shape) or math.prod(-(-e // c) for e, c in zip(shape, chunks, strict=True)) <= 1:
        return None, None
    if explicit is not None:
        wanted = tuple(int(n) for n in explicit)
        if len(wanted) != len(chunks) or any(
            n < c or n % c for n, c in zip(wanted, chunks, strict=True)
        ):
            raise UnconvertibleError(
                f"shard shape {list(wanted)} is not a multiple of its chunks {chunks} on every axis"
            )
        return ShardLayout(wanted, tuple(chunks)), None
    assert shard_size is not None
    if math.prod(chunks) * itemsize > shard_size:
        return None, TOO_SMALL
    return ShardLayout(shard_shape(shape, chunks, itemsize, shard_size), tuple(chunks)), None


TOO_SMALL = (
    "left unsharded: each of its chunks holds more than shard_size of data, and a shard holds "
    "whole chunks (a shard of one chunk is that chunk and an index: no fewer files)"
)
"""Why an array whose chunks are larger than the shard size asked for stays unsharded."""


def _itemsize(document: dict[str, Any]) -> int | None:
    """The bytes of one element, uncompressed, from a v3 document's data type (as zarr-python reads
    it); None where elements have no fixed size."""
    from .._zarr_api import zarr_api

    native = zarr_api().array_v3.from_dict(dict(document)).dtype.to_native_dtype()
    return None if native.kind in "OT" else int(native.itemsize)


def sharded_document(document: dict[str, Any], layout: ShardLayout) -> dict[str, Any]:
    """An array's unsharded document, sharded: its chunks the inner chunks, its codecs theirs (the
    index at the end, with its checksum), under v3's default keys with the layout's separator."""
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
    sharded["chunk_grid"] = {
        "name": "regular",
        "configuration": {"chunk_shape": list(layout.shape)},
    }
    sharded["chunk_key_encoding"] = {
        "name": "default",
        "configuration": {"separator": layout.separator},
    }
    sharded["codecs"] = [sharding]
    return sharded


def layout_of(document: dict[str, Any]) -> ShardLayout | None:
    """The layout of an array sharded as this tool, zarr-python and tensorstore shard arrays: one
    ``sharding_indexed`` codec, its index at the end or the start, read by ``bytes`` (little endian)
    with or without ``crc32c``, under v3's default keys; None for any other document."""
    codecs, keys = document.get("codecs"), document.get("chunk_key_encoding")
    if not (isinstance(codecs, list) and len(codecs) == 1 and isinstance(codecs[0], dict)):
        return None
    configuration = codecs[0].get("configuration")
    if codecs[0].get("name") != "sharding_indexed" or not isinstance(configuration, dict):
        return None
    grid, inner = chunk_shape(document), configuration.get("chunk_shape")
    index_codecs = configuration.get("index_codecs", list(INDEX_CODECS))
    location = configuration.get("index_location", "end")
    separator = (
        keys.get("configuration", {}).get("separator", "/") if isinstance(keys, dict) else None
    )
    if (
        grid is None
        or not isinstance(inner, list)
        or index_codecs not in (list(INDEX_CODECS), list(INDEX_CODECS[:1]))
        or location not in ("end", "start")
        or not isinstance(keys, dict)
        or keys.get("name") != "default"
        or separator not in ("/", ".")
    ):
        return None
    inner_shape = tuple(int(n) for n in inner)
    if len(inner_shape) != len(grid) or any(
        c < 1 or s % c for s, c in zip(grid, inner_shape, strict=True)
    ):
        return None
    return ShardLayout(
        tuple(grid), inner_shape, separator, location == "end", len(index_codecs) == 2
    )


def inner_document(sharded: dict[str, Any]) -> dict[str, Any]:
    """A sharded array's document as if its inner chunks were its chunks (unsharded, under the same
    keys): what says how large its chunks are, and what a new sharding of it starts from."""
    configuration = sharded["codecs"][0]["configuration"]
    unsharded = dict(sharded)
    unsharded["chunk_grid"] = {
        "name": "regular",
        "configuration": {"chunk_shape": list(configuration["chunk_shape"])},
    }
    unsharded["codecs"] = configuration.get("codecs", [{"name": "bytes"}])
    return unsharded


def other_separator(separator: str) -> str:
    """The separator of the keys a new sharding writes: never the one of the keys an array reads
    now, so that both live side by side until the switch."""
    return "." if separator == "/" else "/"


def holds_chunks_of(sharded: dict[str, Any], unsharded: dict[str, Any]) -> bool:
    """Whether a sharded array's inner chunks are an unsharded array's chunks, byte for byte: the
    same data type, chunk shape and codecs (then each of its chunk files is an inner chunk as it
    is)."""
    layout = layout_of(sharded)
    return (
        layout is not None
        and list(layout.inner) == chunk_shape(unsharded)
        and sharded["codecs"][0]["configuration"].get("codecs") == unsharded.get("codecs")
        and sharded.get("data_type") == unsharded.get("data_type")
    )


def is_sharding_of(sharded: dict[str, Any], document: dict[str, Any]) -> bool:
    """Whether ``sharded`` is ``document`` as `sharded_document` shards it (an earlier run's,
    unchanged since)."""
    layout = layout_of(sharded)
    return (
        layout is not None
        and sharded_document(document, layout) == sharded
        and holds_chunks_of(sharded, document)
    )


class ShardPlan(NamedTuple):
    """One shard of an array: its key, and the grid index of each inner chunk (None: past the
    array's edge)."""

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
        plans.append(ShardPlan(shard_key(shard, layout.separator), tuple(inner)))
    return plans


def shard_key(index: Sequence[int], separator: str) -> str:
    """A shard's key below its array's folder (v3's default encoding).

    >>> shard_key((0, 1), "/"), shard_key((0, 1), "."), shard_key((), "/")
    ('c/0/1', 'c.0.1', 'c')
    """
    return separator.join(["c", *map(str, index)])
