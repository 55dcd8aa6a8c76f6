"""What a shard on a network store holds of its sources (`held`), through its files' requests: its
index read by range, then each source compared with its range of the shard. The check the tools
make before removing chunk files an earlier run sharded (`to_v3.removal.chunk_files`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Generic, TypeVar

from .per_path import PerPath, content_version
from .shard_format import ByteRange, Held, Shard, ShardError, index_size, parsed_index, source_path

__all__ = ["NetworkPacking", "held"]

_F = TypeVar("_F", bound=PerPath)


class NetworkPacking(Generic[_F]):
    """What the packing strategies of network stores share: their files' requests, what a shard
    holds, through them (`held`), and no folders to tidy."""

    def __init__(self, files: _F) -> None:
        self.files = files

    def held(self, shards: Iterable[Shard]) -> dict[str, Held | Exception]:
        return held(self.files, shards)

    def tidy(self, folders: Iterable[str]) -> dict[str, Exception]:
        """Nothing: a network store has no folders, and its packs remove their own temporaries."""
        return {}


def held(files: PerPath, shards: Iterable[Shard]) -> dict[str, Held | Exception]:
    """What each shard holds of its sources: its index read by range, then each source and its
    range of the shard (``jobs`` requests in flight; a chunk's bytes of each side in memory per
    request); a FileNotFoundError where the shard is missing."""
    return files.run({shard.path: _held(files, shard) for shard in shards}, limit=False)


async def _held(files: PerPath, shard: Shard) -> Held:
    found = await files.in_time(files.stat(shard.path))
    if found is None:
        raise FileNotFoundError(shard.path)
    count = len(shard.sources)
    footer = index_size(count)
    if found.size < footer:
        raise ShardError(f"shard of {found.size} bytes is shorter than its index ({footer} bytes)")
    entries = parsed_index(
        await files.in_time(files.range_of(shard.path, found.size - footer, found.size)), count
    )

    async def compared(
        held: str | ByteRange | None, entry: tuple[int, int] | None
    ) -> tuple[bool | None, str | None, float | None]:
        if held is None:
            return None, None, None
        path = source_path(held)
        source = await files.in_time(files.stat(path))
        if source is None:
            return None, None, None
        if entry is None or entry[1] != source.size:
            version = source.tag or content_version(await files.in_time(files.bytes_of(path)))
            return False, version, source.written
        data = await files.in_time(files.bytes_of(path))
        inner = await files.in_time(files.range_of(shard.path, entry[0], entry[0] + entry[1]))
        return data == inner, source.tag or content_version(data), source.written

    each = await asyncio.gather(
        *(compared(held, entry) for held, entry in zip(shard.sources, entries, strict=True))
    )
    return Held(
        tuple(e[0] for e in each),
        tuple(e[1] for e in each),
        tuple(e[2] for e in each),
        found.written,
    )
