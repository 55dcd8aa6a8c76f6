"""What an array's shards hold now, as resharding reads them: each shard's size and index.

The versions of the shards are read first, then their indexes: a shard
rewritten after its index was read has another version than the one the
packing checks against, and its array is not switched.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...problems import reason
from ...store import ByteRange, Store
from ...store.layout import ChunkKeys, Location
from ...store.shard_format import ShardError, parsed_index
from ..rules.plan import OldShard
from ..rules.sharding import ShardLayout

__all__ = ["ShardsNow", "read_shards"]

ShardsNow = tuple[dict[str, str | None], dict[str, OldShard | Exception]]
"""An array's shards now: each one's version by path, and what each holds, by key below the array's
folder."""


def read_shards(
    store: Store, arrays: Iterable[tuple[Location, tuple[int, ...], ShardLayout, list[str]]]
) -> dict[Location, ShardsNow]:
    """For each array (where it lies, its shape, its layout now, and the files below its folder),
    its shards now."""
    wanted = {
        at: {
            at.file(key): key
            for key in ChunkKeys(shape, layout.shape, layout.separator, "c").stored(names).values()
        }
        for at, shape, layout, names in arrays
    }
    layouts = {at: layout for at, _, layout, _ in arrays}
    paths = [path for shards in wanted.values() for path in shards]
    versions = store.files.versions(paths)
    at_end = {
        path: layouts[at].index_size
        for at, shards in wanted.items()
        for path in shards
        if layouts[at].index_at_end
    }
    at_start = [
        ByteRange(path, 0, layouts[at].index_size)
        for at, shards in wanted.items()
        for path in shards
        if not layouts[at].index_at_end
    ]
    tails = store.files.tails(at_end)
    heads = store.files.read_ranges(at_start)
    found: dict[Location, ShardsNow] = {}
    for at, shards in wanted.items():
        layout = layouts[at]
        read: dict[str, OldShard | Exception] = {}
        shard_versions: dict[str, str | None] = {}
        for path, key in shards.items():
            version = versions.get(path)
            if isinstance(version, Exception) or version is None:
                read[key] = (
                    version if isinstance(version, Exception) else FileNotFoundError(f"{key}: gone")
                )
                continue
            shard_versions[path] = version
            read[key] = _shard(
                layout,
                tails.get(path)
                if layout.index_at_end
                else heads.get(ByteRange(path, 0, layout.index_size)),
            )
        found[at] = (shard_versions, read)
    return found


def _shard(
    layout: ShardLayout, read: tuple[int, bytes] | bytes | Exception | None
) -> OldShard | Exception:
    """One shard from its index as read (with its size, where at its end)."""
    if read is None or isinstance(read, Exception):
        return read if isinstance(read, Exception) else OSError("not read")
    size, index = read if isinstance(read, tuple) else (0, read)
    try:
        entries = parsed_index(index, layout.per_shard, layout.checksum)
    except ShardError as exc:
        return ShardError(reason(exc))
    if not layout.index_at_end:  # no size was read: the bytes its index reaches
        size = max(
            [layout.index_size, *(offset + nbytes for offset, nbytes in filter(None, entries))]
        )
    return OldShard(size, index, entries)
