"""Shards packed through an fsspec file system (`fsspec_files`): each shard's sources read at once,
the shard written in one request, then read back and compared.

A shard is held whole in memory while it is made, a shard per request in
flight: memory grows with ``jobs`` and the shard size (S3 and Azure pack
through obstore instead: `object_packing`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from contextlib import suppress

from . import shards_held
from .fsspec_files import FsspecFiles
from .per_path import content_version, info_version
from .shard_format import (
    ByteRange,
    Packed,
    Shard,
    ShardError,
    gone,
    shard_index,
    source_path,
)

__all__ = ["FsspecPacking", "pack_one"]

Read = tuple[bytes | None, str | None]  # a source's bytes and version (None, None: no source)


class FsspecPacking(shards_held.NetworkPacking[FsspecFiles]):
    """The packing of an fsspec file system's shards (`files.ShardPacking`): each shard's sources
    read (``jobs`` requests in flight), the shard written in one request and read back, a shard in
    memory at a time per ``jobs`` requests: memory grows with ``jobs`` and the shard size
    (`pack_one`); what a shard holds, through the requests (`shards_held`)."""

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        files = self.files
        return files.pack_each(
            shards,
            lambda shard, requests, versions: pack_one(files, shard, requests, versions),
            on_progress,
        )

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """`FsspecFiles.files_below`, then `versions` (a listing here tells no version)."""
        return self.files.files_below(folders), self.files.versions(paths)


async def pack_one(
    files: FsspecFiles,
    shard: Shard,
    requests: asyncio.Semaphore,
    versions: dict[str, asyncio.Task[str | None]],
) -> Packed:
    """``shard`` made of its sources (each with its version as read; a byte range of an old shard
    held on that shard's version, asked once per pack in ``versions``), at most the requests
    ``requests`` lets in flight: written in one request where it has a chunk, read back."""

    async def source(read: str | ByteRange | None) -> Read:
        if read is None:
            return None, None
        # its file's version, not the range's: asked for while the range is read
        file_version = (
            _version_task(files, versions, read.path) if isinstance(read, ByteRange) else None
        )
        async with requests:
            data, version = await files.in_time(_read_source(files, read))
        if file_version is not None:
            version = await file_version
        if data is None or version is None:
            raise gone(source_path(read).rsplit("/", 1)[-1])
        return data, version

    read = await asyncio.gather(*(source(path) for path in shard.sources))
    sizes = tuple(None if data is None else len(data) for data, _ in read)
    versions_read = tuple(version for _, version in read)
    present = [data for data, _ in read if data is not None]
    async with requests:
        # no chunk: no shard (an interrupted run's object there says otherwise: it goes)
        if not present:
            files.before_write()
            with suppress(FileNotFoundError):
                await files.in_time(files.call("rm_file", shard.path))
            return Packed(sizes, versions_read, False)
        body = b"".join(present) + shard_index(sizes)
        written = await files.in_time(_write_shard(files, shard, body))
    return Packed(sizes, versions_read, written)


def _version_task(
    files: FsspecFiles, versions: dict[str, asyncio.Task[str | None]], path: str
) -> asyncio.Task[str | None]:
    """The version of a file that byte ranges are read from (an old shard): asked for once per
    pack (``versions``), shared by the shards that read from it."""
    if path not in versions:
        versions[path] = asyncio.ensure_future(files.in_time(files.version_of(path)))
    return versions[path]


async def _read_source(files: FsspecFiles, source: str | ByteRange) -> Read:
    """A chunk file's bytes and its version as read (None, None where there is none): its ETag,
    taken before the bytes (a write between makes a version the later check does not find), or
    their digest. A byte range of a file: those bytes (its version is its file's:
    `FsspecFiles.version_of`)."""
    try:
        if isinstance(source, ByteRange):
            return await files.range_of(source.path, source.start, source.end), None
        info = await files.call("info", source)
        data = await files.bytes_of(source)
    except FileNotFoundError:
        return None, None
    return data, info_version(info) or content_version(data)


async def _write_shard(files: FsspecFiles, shard: Shard, body: bytes) -> bool:
    """The shard's object holding ``body``, read back: False where it held it already. An object
    there is an interrupted run's (no zarr.json reads it: the caller made sure): replaced."""
    try:
        existing = await files.bytes_of(shard.path)
    except FileNotFoundError:
        existing = None
    if existing == body:
        return False
    files.before_write()
    await files.call("pipe_file", shard.path, body)
    if await files.bytes_of(shard.path) != body:
        raise ShardError(f"{shard.path.rsplit('/', 1)[-1]}: not what was written, read back")
    return True
