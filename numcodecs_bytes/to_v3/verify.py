"""The sharding pass's checks of what it packed, before an array switches to its shards.

Each check says why an array cannot switch (None: it can); it fails nothing
itself. An array switches only where:

- every shard of it was packed (each one read back and compared with its
  chunk files by the store);
- where its codecs make every chunk one size (no compressor), each chunk
  file is that size;
- one of its chunks reads the same through its sharded document (the shard's
  index and that chunk's byte range, as a reader reads them) as through the
  document it has now (its chunk file), with zarr-python's own codecs;
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
from ..store.chunks import INDEX_ENTRY, Packed
from .check import check_sharded_chunk
from .plan import Pack

__all__ = ["packed_right", "unchanged"]


def packed_right(store: Store, pack: Pack, packed: Mapping[str, Packed | Exception]) -> str | None:
    """Why the array cannot switch to the shards packed for it (None: it can): a shard not made, a chunk file of
    the wrong size, or a chunk read otherwise through its shard."""
    folder = pack.array.folder
    for shard in pack.shards:
        result = packed[shard.path]
        if isinstance(result, Exception):
            return f"{shard.path[len(folder) + 1 :]}: {reason(result)}; left unsharded"
    fixed = _fixed_chunk_size(pack.array.document)
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        for path, size in zip(shard.sources, result.sizes, strict=True):
            if path is not None and fixed is not None and size is not None and size != fixed:
                return f"{path[len(folder) + 1 :]}: {size:,} bytes, where its codecs make {fixed:,}: left unsharded"
    return _sample(store, pack, packed)


def unchanged(
    pack: Pack, packed: Mapping[str, Packed | Exception], versions: Mapping[str, Any], names: list[str] | Exception
) -> str | None:
    """Why the array cannot switch because its chunk files changed since they were packed (None: they did
    not): ``versions``, each chunk file's version now; ``names``, the files below its folder now. A chunk file
    not packed that is there now was written meanwhile, where there was none (a region of fill values)."""
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        for path, version in zip(shard.sources, result.versions, strict=True):
            if path is not None and versions.get(path) != version:
                return _written_meanwhile(pack, path)
    if isinstance(names, Exception):
        return f"its files could not be listed again: {reason(names)}; left unsharded"
    folder = pack.array.folder
    packed_here = {path for shard in pack.shards for path in shard.sources if path is not None}
    new = sorted(name for name in pack.keys.stored(names).values() if f"{folder}/{name}" not in packed_here)
    if new:
        return f"{new[0]}: written by someone else while its shards were made: left unsharded"
    return None


def _sample(store: Store, pack: Pack, packed: Mapping[str, Packed | Exception]) -> str | None:
    """The first stored chunk read through the sharded document and through the array's document now: the
    shard's index and that chunk's bytes read from the store (not the whole shard)."""
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
        wanted = [ByteRange(source, 0, size), ByteRange(shard.path, start, start + size),
                  ByteRange(shard.path, total, total + footer)]  # fmt: skip
        read = store.files.read_ranges(wanted)
        # The shard as a reader sees it, in a mapping whose pages hold nothing until written: memory for what is
        # read, whatever the shard's size.
        sparse = mmap.mmap(-1, total + footer)
        try:
            chunk, inner, index_bytes = (_present(read[part]) for part in wanted)
            sparse[start : start + size], sparse[total:] = inner, index_bytes
            check_sharded_chunk(pack.array.document, pack.sharded, index, (pack.keys.key(index), chunk),
                                (plan.key, sparse))  # fmt: skip
        except Exception as exc:
            if store.files.versions([source]).get(source) != result.versions[stored[0]]:
                return _written_meanwhile(pack, source)  # the likelier story
            return f"through its shards: {reason(exc)}; left unsharded"
        finally:
            with suppress(BufferError):  # a view of it still held (by an error's traceback): it goes with the view
                sparse.close()
        return None
    return None


def _written_meanwhile(pack: Pack, path: str) -> str:
    return f"{path[len(pack.array.folder) + 1 :]}: written by someone else while its shard was made: left unsharded"


def _present(data: bytes | Exception) -> bytes:
    """Bytes as read; what reading them met, raised."""
    if isinstance(data, Exception):
        raise data
    return data


def _fixed_chunk_size(document: dict[str, Any]) -> int | None:
    """A chunk's stored size where the codecs make every chunk the same size (no compressor); else None."""
    names = [codec.get("name") for codec in document["codecs"]]
    if any(name not in ("bytes", "transpose") for name in names):
        return None
    from ._zarr_api import zarr_api

    itemsize = zarr_api().array_v3.from_dict(dict(document)).dtype.to_native_dtype().itemsize
    return int(math.prod(document["chunk_grid"]["configuration"]["chunk_shape"]) * itemsize)
