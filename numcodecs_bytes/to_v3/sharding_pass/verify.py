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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any, NamedTuple

from ...problems import reason
from ...store import ByteRange, Store
from ...store.shard_format import Packed, Shard, index_size, source_path
from ..metadata_pass.check import Buffer, check_sharded_chunk
from ..rules.plan import Pack
from ..rules.sharding import ShardPlan

__all__ = ["SAMPLE_BYTES", "packed_right", "unchanged"]


def packed_right(
    store: Store, packs: Sequence[Pack], packed: Mapping[str, Packed | Exception]
) -> dict[str, str | None]:
    """Why each array cannot switch to the shards packed for it (None: it can), by path: a shard
    not made, a chunk file of the wrong size, or a chunk read otherwise through its new shard than
    through what the array reads now. The arrays' chunks are read together, `Files.concurrency` at
    a time (and `SAMPLE_BYTES` of them at most), not one array's after another's."""
    why: dict[str, str | None] = {}
    samples: list[_Sample] = []
    for pack in packs:
        why[pack.array.path] = _made_right(pack, packed)
        if why[pack.array.path] is None and (sample := _sample_of(pack, packed)) is not None:
            samples.append(sample)
    for batch in _batches(samples, store.files.concurrency):
        read = store.files.read_ranges(part for sample in batch for part in sample.wanted)
        files = _chunk_files(store, batch, read)
        for sample in batch:
            why[sample.pack.array.path] = _compared(store, sample, read, files[sample.chunk])
    return why


def _made_right(pack: Pack, packed: Mapping[str, Packed | Exception]) -> str | None:
    """Why the array's shards cannot be switched to as made (None: they can): a shard not made, or
    a chunk file of the wrong size."""
    for shard in pack.shards:
        result = packed[shard.path]
        if isinstance(result, Exception):
            return f"{pack.array.at.below(shard.path)}: {reason(result)}; {_left(pack)}"
    fixed = _fixed_chunk_size(pack.sharded)
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        for source, size in zip(shard.sources, result.sizes, strict=True):
            if source is not None and fixed is not None and size is not None and size != fixed:
                where = _relative(pack, source)
                return f"{where}: {size:,} bytes, where its codecs make {fixed:,}: {_left(pack)}"
    return None


def unchanged(
    pack: Pack,
    packed: Mapping[str, Packed | Exception],
    versions: Mapping[str, Any],
    names: list[str] | Exception,
) -> str | None:
    """Why the array cannot switch because what it was packed from changed since (None: it did not):
    ``versions``, each source file's version now; ``names``, the files below its folder now. A
    source file that was not packed and is there now was written meanwhile, where there was none (a
    region of fill values). Where they could not be asked again, that is the reason given: nothing
    is known to have changed."""
    if isinstance(names, Exception):
        return f"its files could not be listed again: {reason(names)}; {_left(pack)}"
    packed_from: list[tuple[str | ByteRange, str | None]] = []
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        packed_from += [
            (source, version)
            for source, version in zip(shard.sources, result.versions, strict=True)
            if source is not None
        ]
    # each file as packing read it; and, resharding, each old shard as its index was read
    for source, version in [*packed_from, *pack.before.items()]:
        now = versions.get(source_path(source))
        if isinstance(now, Exception):
            return (
                f"{_relative(pack, source)}: could not be asked again: {reason(now)}; {_left(pack)}"
            )
        if now != version:
            return _written_meanwhile(pack, source)
    known = set(pack.retired())
    new = sorted(
        name
        for name in pack.sources.stored(names).values()
        if pack.array.at.file(name) not in known
    )
    if new:
        return f"{new[0]}: written by someone else while its shards were made: {_left(pack)}"
    return None


SAMPLE_BYTES = 256 << 20
"""The chunks the checks of a batch of arrays hold at most (a batch holds one array at least)."""


class _Sample(NamedTuple):
    """The chunk an array's check reads: the first stored one, through the new document (its
    shard's index and its range of the shard: not whole shards) and through the document the array
    has now (its chunk file, or its range of its shard now)."""

    pack: Pack
    plan: ShardPlan
    shard: Shard
    position: int  # in the shard's inner chunks
    start: int  # where its bytes start in the new shard
    total: int  # the new shard's bytes before its index
    packed: Packed

    @property
    def source(self) -> str | ByteRange:
        source = self.shard.sources[self.position]
        assert source is not None
        return source

    @property
    def size(self) -> int:
        return self.packed.sizes[self.position] or 0

    @property
    def footer(self) -> int:
        return index_size(len(self.packed.sizes))

    @property
    def wanted(self) -> tuple[ByteRange, ByteRange]:
        """Its range of the new shard, and the new shard's index."""
        path = self.shard.path
        return (
            ByteRange(path, self.start, self.start + self.size),
            ByteRange(path, self.total, self.total + self.footer),
        )

    @property
    def chunk(self) -> ByteRange:
        """Its bytes as the array reads them now."""
        source = self.source
        return source if isinstance(source, ByteRange) else ByteRange(source, 0, self.size)

    @property
    def version(self) -> str | None:
        """The version packed, where it speaks for the chunk's bytes (a chunk file's; not an old
        shard's: its range is not the file)."""
        return self.packed.versions[self.position] if isinstance(self.source, str) else None


def _sample_of(pack: Pack, packed: Mapping[str, Packed | Exception]) -> _Sample | None:
    """The array's first stored chunk (None where it has none)."""
    for plan, shard in zip(pack.plans, pack.shards, strict=True):
        result = packed[shard.path]
        assert isinstance(result, Packed)
        stored = [i for i, size in enumerate(result.sizes) if size is not None]
        if stored:
            start = sum(size or 0 for size in result.sizes[: stored[0]])
            total = sum(size or 0 for size in result.sizes)
            return _Sample(pack, plan, shard, stored[0], start, total, result)
    return None


def _batches(samples: list[_Sample], concurrency: int) -> Iterator[list[_Sample]]:
    """``samples`` in batches of ``concurrency`` at most and `SAMPLE_BYTES` (a sample at least)."""
    batch: list[_Sample] = []
    held = 0
    for sample in samples:
        if batch and (len(batch) >= concurrency or held + 2 * sample.size > SAMPLE_BYTES):
            yield batch
            batch, held = [], 0
        batch.append(sample)
        held += 2 * sample.size  # (the chunk file's bytes too, where they are read)
    if batch:
        yield batch


def _chunk_files(
    store: Store, batch: list[_Sample], read: Mapping[ByteRange, bytes | Exception]
) -> dict[ByteRange, bytes | Exception]:
    """Each sample's chunk as the array reads it now: the new shard's bytes of it, where the
    version packed says they are its bytes (on S3 an ETag is their MD5: not read a second time);
    else read, the batch's together."""
    found: dict[ByteRange, bytes | Exception] = {}
    for sample in batch:
        inner = read[sample.wanted[0]]
        version = sample.version
        if (
            version is not None
            and isinstance(inner, bytes)
            and store.files.version_holds(version, inner)
        ):
            found[sample.chunk] = inner
    rest = [sample.chunk for sample in batch if sample.chunk not in found]
    return found | (store.files.read_ranges(rest) if rest else {})


def _compared(
    store: Store,
    sample: _Sample,
    read: Mapping[ByteRange, bytes | Exception],
    chunk: bytes | Exception,
) -> str | None:
    """Why the sample reads otherwise through the new document than through the array's now
    (None: it reads the same), each side from the bytes a reader reads."""
    pack = sample.pack
    with _Sparse() as sparse:
        try:
            inner, index_bytes = (_present(read[part]) for part in sample.wanted)
            before = _present(chunk)
            after = sparse.shard(
                sample.total + sample.footer, {sample.start: inner, sample.total: index_bytes}
            )
            index = sample.plan.inner[sample.position]
            assert index is not None
            check_sharded_chunk(
                (pack.array.document, _before(pack, sample.source, before, sparse)),
                (pack.sharded, {sample.plan.key: after}),
                _region(pack, index),
                f"chunk {_relative(pack, sample.source)}",
            )
        except Exception as exc:
            path = sample.chunk.path
            if store.files.versions([path]).get(path) != sample.packed.versions[sample.position]:
                return _written_meanwhile(pack, sample.source)  # the likelier story
            return f"through its shards: {reason(exc)}; {_left(pack)}"
    return None


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
    return pack.array.at.below(source_path(source))


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
    from .._zarr_api import zarr_api

    itemsize = zarr_api().array_v3.from_dict(dict(sharded)).dtype.to_native_dtype().itemsize
    return int(math.prod(configuration["chunk_shape"]) * itemsize)
