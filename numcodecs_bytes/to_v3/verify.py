"""The sharding pass's checks of what it packed, before an array switches to its shards.

Each check says why an array cannot switch (None: it can); it fails nothing
itself. An array switches only where:

- every shard of it was packed (each one read back and compared with its
  chunk files by the store);
- where its codecs make every chunk one size (no compressor), each chunk
  file is that size;
- one of its chunks reads the same through its sharded document (the shard's
  index and that chunk's byte range, as a reader reads them) as through the
  document it has now (its chunk file: the shard's bytes of it, where the
  version packed says they are the file's, as an MD5 ETag on S3 does), with
  zarr-python's own codecs;
- its chunk files are the versions that were packed, and no chunk file came
  meanwhile where none was (`unchanged`).
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from ..problems import reason
from ..store import ByteRange, Store
from ..store.chunks import INDEX_ENTRY, Packed, source_path
from .check import Buffer, check_sharded_chunk
from .plan import Pack

__all__ = ["packed_right", "unchanged"]


def packed_right(store: Store, pack: Pack, packed: Mapping[str, Packed | Exception]) -> str | None:
    """Why the array cannot switch to the shards packed for it (None: it can): a shard not made, a
    chunk file of the wrong size, or a chunk read otherwise through its new shard than through what
    the array reads now."""
    folder = pack.array.folder
    for shard in pack.shards:
        result = packed[shard.path]
        if isinstance(result, Exception):
            return f"{shard.path[len(folder) + 1 :]}: {reason(result)}; {_left(pack)}"
    fixed = _fixed_chunk_size(pack.sharded)
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        for source, size in zip(shard.sources, result.sizes, strict=True):
            if source is not None and fixed is not None and size is not None and size != fixed:
                where = _relative(pack, source)
                return f"{where}: {size:,} bytes, where its codecs make {fixed:,}: {_left(pack)}"
    return _sample(store, pack, packed)


def unchanged(
    pack: Pack,
    packed: Mapping[str, Packed | Exception],
    versions: Mapping[str, Any],
    names: list[str] | Exception,
) -> str | None:
    """Why the array cannot switch because what it was packed from changed since (None: it did not):
    ``versions``, each source file's version now; ``names``, the files below its folder now. A
    source file that was not packed and is there now was written meanwhile, where there was none (a
    region of fill values)."""
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        for source, version in zip(shard.sources, result.versions, strict=True):
            if source is not None and versions.get(source_path(source)) != version:
                return _written_meanwhile(pack, source)
    for path, version in pack.before.items():  # resharding: each shard as its index was read
        if versions.get(path) != version:
            return _written_meanwhile(pack, path)
    if isinstance(names, Exception):
        return f"its files could not be listed again: {reason(names)}; {_left(pack)}"
    known = set(pack.retired())
    new = sorted(
        name
        for name in pack.sources.stored(names).values()
        if f"{pack.array.folder}/{name}" not in known
    )
    if new:
        return f"{new[0]}: written by someone else while its shards were made: {_left(pack)}"
    return None


def _sample(store: Store, pack: Pack, packed: Mapping[str, Packed | Exception]) -> str | None:
    """The first stored chunk read through the new document and through the document the array has
    now: each side's bytes read from the store as a reader reads them (an index and that chunk's
    range: not whole shards)."""
    for plan, shard in zip(pack.plans, pack.shards, strict=True):
        result = packed[shard.path]
        assert isinstance(result, Packed)
        stored = [i for i, size in enumerate(result.sizes) if size is not None]
        if not stored:
            continue
        index, source = plan.inner[stored[0]], shard.sources[stored[0]]
        assert index is not None and source is not None
        start = sum(size or 0 for size in result.sizes[: stored[0]])
        size, total = result.sizes[stored[0]] or 0, sum(size or 0 for size in result.sizes)
        footer = INDEX_ENTRY * len(result.sizes) + 4
        chunk = source if isinstance(source, ByteRange) else ByteRange(source, 0, size)
        wanted = [
            ByteRange(shard.path, start, start + size),
            ByteRange(shard.path, total, total + footer),
        ]
        read = store.files.read_ranges(wanted)
        with _Sparse() as sparse:
            try:
                inner, index_bytes = (_present(read[part]) for part in wanted)
                # (the version packed speaks for the chunk file, not for an old shard's range)
                version = result.versions[stored[0]] if isinstance(source, str) else None
                before = _chunk_file(store, chunk, inner, version)
                after = sparse.shard(total + footer, {start: inner, total: index_bytes})
                check_sharded_chunk(
                    (pack.array.document, _before(pack, source, before, sparse)),
                    (pack.sharded, {plan.key: after}),
                    _region(pack, index),
                    f"chunk {_relative(pack, source)}",
                )
            except Exception as exc:
                if store.files.versions([chunk.path]).get(chunk.path) != result.versions[stored[0]]:
                    return _written_meanwhile(pack, source)  # the likelier story
                return f"through its shards: {reason(exc)}; {_left(pack)}"
        return None
    return None


def _chunk_file(store: Store, chunk: ByteRange, inner: bytes, version: str | None) -> bytes:
    """The packed chunk's bytes as the array's document now reads them: the new shard's bytes of
    it, where ``version`` (the chunk file's, as packed) says they are its bytes (on S3 an ETag is
    their MD5: not read a second time); else read from ``chunk`` (the chunk file, or the old shard's
    range)."""
    if version is not None and store.files.version_holds(version, inner):
        return inner
    return _present(store.files.read_ranges([chunk])[chunk])


def _before(pack: Pack, source: str | ByteRange, data: bytes, sparse: _Sparse) -> dict[str, Buffer]:
    """The files a reader of the array now reads for one chunk: its chunk file, or its shard now
    (its index and that chunk's range)."""
    key = _relative(pack, source)
    if not isinstance(source, ByteRange):
        return {key: data}
    old, shard = pack.old, pack.old_shards[key]
    assert old is not None
    at = shard.size - len(shard.stored_index) if old.index_at_end else 0
    return {key: sparse.shard(shard.size, {source.start: data, at: shard.stored_index})}


class _Sparse:
    """Shards as a reader sees them, in mappings whose pages hold nothing until written: memory for
    what is read, whatever a shard's size; unmapped at the end (unless a view of one is still held,
    by an error's traceback: it goes with the view)."""

    def __init__(self) -> None:
        self.maps: list[mmap.mmap] = []

    def __enter__(self) -> _Sparse:
        return self

    def __exit__(self, *_: object) -> None:
        for mapped in self.maps:
            with suppress(BufferError):
                mapped.close()

    def shard(self, size: int, parts: Mapping[int, bytes]) -> mmap.mmap:
        mapped = mmap.mmap(-1, max(size, 1))
        self.maps.append(mapped)
        for offset, data in parts.items():
            mapped[offset : offset + len(data)] = data
        return mapped


def _region(pack: Pack, index: tuple[int, ...]) -> tuple[slice, ...]:
    shape = pack.array.document["shape"]
    return tuple(
        slice(i * c, min((i + 1) * c, n))
        for i, c, n in zip(index, pack.layout.inner, shape, strict=True)
    )


def _relative(pack: Pack, source: str | ByteRange) -> str:
    return source_path(source)[len(pack.array.folder) + 1 :]


def _written_meanwhile(pack: Pack, source: str | ByteRange) -> str:
    return (
        f"{_relative(pack, source)}: written by someone else while its shards were made: "
        f"{_left(pack)}"
    )


def _left(pack: Pack) -> str:
    return "left unsharded" if pack.old is None else "left in the shards it has"


def _present(data: bytes | Exception) -> bytes:
    """Bytes as read; what reading them met, raised."""
    if isinstance(data, Exception):
        raise data
    return data


def _fixed_chunk_size(sharded: dict[str, Any]) -> int | None:
    """An inner chunk's stored size where the codecs make every chunk the same size (no compressor);
    else None."""
    configuration = sharded["codecs"][0]["configuration"]
    names = [codec.get("name") for codec in configuration["codecs"]]
    if any(name not in ("bytes", "transpose") for name in names):
        return None
    from ._zarr_api import zarr_api

    itemsize = zarr_api().array_v3.from_dict(dict(sharded)).dtype.to_native_dtype().itemsize
    return int(math.prod(configuration["chunk_shape"]) * itemsize)
