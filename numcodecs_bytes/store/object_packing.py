"""Shards packed through an obstore client (`object_files`): each inner chunk read from its object,
the shard written, then read back and compared, in memory bounded by bytes.

A shard of up to `WHOLE_SHARD_BYTES` goes up in one PUT: its chunks are read
at once. A larger one goes up as a multipart upload while its chunks are read
in order: the client holds `READ_AHEAD_BYTES` of chunks being read and
`PARTS_AT_ONCE` parts of `PART_BYTES` going up, not the shard. obstore's
multipart upload completes on no condition, so it goes to a temporary object
beside the shard (`files.temporary_entry`), which the store then copies into
place only where no object is; a killed run's temporaries go at the next
pack of the same shards. Either way a shard is placed by one rule
(`_placed`): where no object is, or over an interrupted run's object while
it is the version found; it is read back as a stream and compared by its
SHA-256 where its ETag does not tell. A pack's shards at once are as many as
`MEMORY_BYTES` holds (`ShardMemory`: each shard reserves what it may hold,
estimated from the largest chunk read so far), whatever ``jobs`` and the
shard size.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from contextlib import asynccontextmanager, suppress

from . import object_listing, shards_held
from .files import made_for, temporary_entry
from .object_client import ObjectClient
from .per_path import Stat
from .shard_format import (
    ByteRange,
    Packed,
    Shard,
    ShardError,
    gone,
    shard_index,
    source_path,
)

__all__ = [
    "MEMORY_BYTES",
    "PARTS_AT_ONCE",
    "PART_BYTES",
    "READ_AHEAD_BYTES",
    "WHOLE_SHARD_BYTES",
    "ObjectPacking",
    "ShardMemory",
    "pack_one",
    "without_temporaries",
]

MEMORY_BYTES = 128 * 2**20
"""The bytes of chunks and shards one pack holds at once, all its shards together (about; a shard
whose chunks are larger than those read before it may hold more than its reservation)."""
WHOLE_SHARD_BYTES = 16 * 2**20
"""A shard of more bytes goes up in parts while its chunks are read; one of fewer in one PUT."""
PART_BYTES = 8 * 2**20
"""The bytes of each part of a shard that goes up in parts."""
PARTS_AT_ONCE = 4
"""The parts of one shard going up at once."""
READ_AHEAD_BYTES = 16 * 2**20
"""The bytes of chunks a shard that goes up in parts reads ahead of its upload (one chunk at least;
as many as fit, by the largest read so far)."""

Read = tuple[bytes | None, str | None]  # a source's bytes and version (None, None: no source)


class ShardMemory:
    """The bytes one pack's shards may hold at once: each shard reserves, before it reads, what it
    may hold (twice its chunks, by the largest read so far, up to what a shard going up in parts
    holds; that ceiling before any chunk is read), and waits while the rest is reserved."""

    def __init__(self, total: int) -> None:
        self.total, self.free, self.largest = total, total, 0
        self._changed = asyncio.Condition()

    def saw(self, size: int) -> None:
        """A chunk of ``size`` bytes read."""
        self.largest = max(self.largest, size)

    def estimate(self, sources: int) -> int:
        """What a shard of ``sources`` chunks may hold."""
        ceiling = max(2 * WHOLE_SHARD_BYTES, READ_AHEAD_BYTES + PARTS_AT_ONCE * PART_BYTES)
        ceiling += 2 * self.largest
        if self.largest:
            ceiling = min(ceiling, 2 * sources * self.largest)
        return min(self.total, ceiling)

    @asynccontextmanager
    async def reserved(self, sources: int) -> AsyncIterator[None]:
        """The block run with a shard's reservation held."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.free >= self.estimate(sources))
            taken = self.estimate(sources)
            self.free -= taken
        try:
            yield
        finally:
            async with self._changed:
                self.free += taken
                self._changed.notify_all()


class ObjectPacking(shards_held.NetworkPacking[ObjectClient]):
    """The packing of an obstore store's shards (`files.ShardPacking`): each shard's sources read
    (each chunk object with its ETag from the same GET, a byte range of an old shard held on that
    shard's ETag), the shard placed and checked (`pack_one`), as many shards at once as
    `MEMORY_BYTES` holds; what a shard holds, through the requests (`shards_held`)."""

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        files = self.files
        shards = list(shards)
        # best effort: no failure of the pack; its requests each in its time
        files.run({"": without_temporaries(files, shards)}, limit=False)
        memory = ShardMemory(MEMORY_BYTES)
        return files.pack_each(
            shards,
            lambda shard, requests, versions: pack_one(files, shard, requests, versions, memory),
            on_progress,
            shards_at_once=len(shards) or 1,
        )

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """One listing of each folder gives both (`object_listing.files_and_versions`), in the
        ranges `ObjectClient.key_ranges` gives."""
        return object_listing.files_and_versions(self.files, folders, paths)


async def pack_one(
    files: ObjectClient,
    shard: Shard,
    requests: asyncio.Semaphore,
    versions: dict[str, asyncio.Task[str | None]],
    memory: ShardMemory,
) -> Packed:
    """``shard`` made of its sources (each chunk object with its ETag from the same GET; a byte
    range of an old shard held on that shard's ETag, asked once per pack in ``versions``), at most
    the requests ``requests`` lets in flight, within its reservation of ``memory``."""
    source = _reader(files, requests, versions, memory)
    async with memory.reserved(len(shard.sources)):
        files.before_write()  # a run that lost its lock reads no more to write
        reads = _in_order(shard.sources, source, files.jobs)
        first: list[Read] = []
        held_bytes = 0
        try:
            async for found in reads:
                first.append(found)
                held_bytes += len(found[0] or b"")
                if held_bytes > WHOLE_SHARD_BYTES:
                    return await _in_parts(files, shard, first, reads)
        finally:
            await reads.aclose()
        sizes = tuple(None if data is None else len(data) for data, _ in first)
        versions_read = tuple(version for _, version in first)
        body = b"".join(data for data, _ in first if data is not None)
        first.clear()  # the chunks' bytes are the body's now
        async with requests:
            if not body:  # no chunk: no shard (an interrupted run's object there goes)
                await files.in_time(files.delete(shard.path))
                return Packed(sizes, versions_read, False)
            written = await files.in_time(_write_whole(files, shard, body + shard_index(sizes)))
        return Packed(sizes, versions_read, written)


def _reader(
    files: ObjectClient,
    requests: asyncio.Semaphore,
    versions: dict[str, asyncio.Task[str | None]],
    memory: ShardMemory,
) -> Callable[[str | ByteRange | None], Awaitable[Read]]:
    """How a pack reads one source: its bytes and its version (a chunk object's ETag from the
    GET that read it; an old shard's, asked once), each read's size told to ``memory``."""

    async def source(read: str | ByteRange | None) -> Read:
        if read is None:
            return None, None
        async with requests:
            try:
                if isinstance(read, str):
                    found = await files.in_time(files.get(read))
                    memory.saw(len(found[0]))
                    return found
                if read.path not in versions:
                    versions[read.path] = asyncio.ensure_future(
                        files.in_time(files.version_of(read.path))
                    )
                data = await files.in_time(files.range_of(*read))
                memory.saw(len(data))
            except FileNotFoundError:
                raise gone(_name(source_path(read))) from None
        version = await versions[read.path]
        if version is None:
            raise gone(_name(read.path))
        return data, version

    return source


async def _in_order(
    sources: Sequence[str | ByteRange | None],
    read: Callable[[str | ByteRange | None], Awaitable[Read]],
    most: int,
) -> AsyncGenerator[Read, None]:
    """Each source read, in order, up to `READ_AHEAD_BYTES` (by the largest read so far; one at
    first) and ``most`` reads ahead; those not taken cancelled where the caller stops."""
    pending: deque[asyncio.Task[Read]] = deque()
    started = largest = 0
    try:
        while started < len(sources) or pending:
            ahead = 1 if largest == 0 else max(1, min(most, READ_AHEAD_BYTES // largest))
            while started < len(sources) and len(pending) < ahead:
                pending.append(asyncio.ensure_future(read(sources[started])))
                started += 1
            found = await pending.popleft()
            largest = max(largest, len(found[0] or b""))
            yield found
    finally:
        for task in pending:
            task.cancel()


async def _in_parts(
    files: ObjectClient, shard: Shard, first: list[Read], rest: AsyncIterator[Read]
) -> Packed:
    """A shard larger than `WHOLE_SHARD_BYTES` written as a multipart upload to a temporary object
    while the rest of its sources are read, copied into place by the store (`_placed`), then read
    back as a stream and compared by SHA-256 and size."""
    sizes: list[int | None] = []
    versions: list[str | None] = []
    written = hashlib.sha256()
    total = 0

    def taken(found: Read) -> bytes | None:
        nonlocal total
        data, version = found
        sizes.append(None if data is None else len(data))
        versions.append(version)
        if data is not None:
            written.update(data)
            total += len(data)
        return data

    async def body() -> AsyncIterator[bytes]:
        # the lock checked before each piece: a run that lost it mid-upload (paused past its
        # lease) stops sending what it may not place
        nonlocal total
        for found in first:
            if (data := taken(found)) is not None:
                yield data
        first.clear()  # not held past their upload
        async for found in rest:
            files.before_write()
            if (data := taken(found)) is not None:
                yield data
        index = shard_index(sizes)
        written.update(index)
        total += len(index)
        yield index

    temporary = _temporary_beside(shard.path)
    try:
        await files.put_in_parts(temporary, body(), PART_BYTES, PARTS_AT_ONCE)
        expected = (total, written.digest())

        async def create() -> None:
            await files.in_time(files.copy(temporary, shard.path, overwrite=False))

        async def replace(found: Stat | None) -> None:
            # obstore's copy holds on no version: the object found is removed while it is that
            # version (held by the store where it can, else checked just before), then created
            if found is not None:
                await files.in_time(files.remove_one(shard.path, None, found.tag))
            await files.in_time(files.copy(temporary, shard.path, overwrite=found is None))

        placed = await _placed(files, shard.path, expected, create, replace)
    finally:
        # best effort, whatever stopped the upload: a temporary left goes at the next pack of the
        # shard (`without_temporaries`), and the upload's own failure is what the caller hears
        with suppress(Exception):
            await asyncio.shield(files.discard(temporary))
    if placed and await _read_back(files, shard.path, total) != expected:
        raise ShardError(f"{_name(shard.path)}: not what was written, read back")
    return Packed(tuple(sizes), tuple(versions), placed)


def _temporary_beside(path: str) -> str:
    """A new temporary object's path beside ``path`` (a random tag: this upload's alone)."""
    folder, name = path.rsplit("/", 1)
    return f"{folder}/{temporary_entry(name, os.urandom(6).hex())}"


async def without_temporaries(files: ObjectClient, shards: Sequence[Shard]) -> None:
    """The temporary objects killed runs left beside these shards (their uploads in parts, not
    placed) removed: only these shards' own, each folder listed once, ``jobs`` requests at once,
    each in its time."""
    names: dict[str, set[str]] = {}
    for shard in shards:
        folder, name = shard.path.rsplit("/", 1)
        names.setdefault(folder, set()).add(name)

    requests = asyncio.Semaphore(files.jobs)

    async def tidied(folder: str, here: set[str]) -> None:
        async with requests:
            listing = await files.in_time(files.listing_of(folder))
        for entry in listing["objects"]:
            name = entry["path"].rsplit("/", 1)[-1]
            if made_for(name) in here:
                async with requests:
                    await files.in_time(files.discard(f"{folder}/{name}"))

    await asyncio.gather(*(tidied(folder, here) for folder, here in names.items()))


async def _write_whole(files: ObjectClient, shard: Shard, body: bytes) -> bool:
    """The shard's object holding ``body``, put in one request (placed as `_placed` says); checked
    by the ETag where it is the MD5 of what the store got, else read back. False where it held it
    already."""
    expected = (len(body), hashlib.sha256(body).digest())
    versions: list[str] = []

    async def create() -> None:
        versions.append(await files.put(shard.path, body, "create"))

    async def replace(found: Stat | None) -> None:
        mode = "overwrite" if found is None else {"e_tag": found.tag}
        versions.append(await files.put(shard.path, body, mode))

    if not await _placed(files, shard.path, expected, create, replace):
        return False
    if files.version_holds(versions[-1], body):  # the store's MD5 of what it got: no read-back
        return True
    if await _read_back(files, shard.path, expected[0]) != expected:
        raise ShardError(f"{_name(shard.path)}: not what was written, read back")
    return True


async def _placed(
    files: ObjectClient,
    path: str,
    expected: tuple[int, bytes],
    create: Callable[[], Awaitable[None]],
    replace: Callable[[Stat | None], Awaitable[None]],
) -> bool:
    """A shard placed at ``path``: ``create()`` writes it where no object is (the store holds the
    condition). An object there is an interrupted run's (no zarr.json reads it: the caller made
    sure): left where it holds what is written already (``expected``: size and SHA-256; False),
    else ``replace(found)`` writes over it only while it is the version found (a run that lost its
    lock mid-request overwrites nothing made since; refused: someone else's, `ShardError`).
    ``replace(None)``: a create refused where there is no object, as over an interrupted upload's
    blocks (Azurite refuses a create there, and they stay for days): written over them, a window of
    one request."""
    from obstore.exceptions import AlreadyExistsError, PreconditionError

    try:
        await create()
    except (AlreadyExistsError, PreconditionError):
        pass
    else:
        return True
    found = await files.stat(path)
    if found is not None and found.size == expected[0]:
        if await _sha256_of(files, path) == expected[1]:
            return False
    try:
        await replace(found)
    except (AlreadyExistsError, PreconditionError, FileNotFoundError):
        someone_else = f"{_name(path)}: written by someone else meanwhile: left as it is"
        raise ShardError(someone_else) from None
    return True


async def _read_back(files: ObjectClient, path: str, size: int) -> tuple[int, bytes] | None:
    """The size and SHA-256 of the object at ``path``, read as a stream (None where there is none,
    or where its size is not ``size``: one HEAD, not its bytes)."""
    found = await files.stat(path)
    if found is None or found.size != size:
        return None
    return size, await _sha256_of(files, path)


async def _sha256_of(files: ObjectClient, path: str) -> bytes:
    """The SHA-256 of the object at ``path``, read as a stream."""
    digest = hashlib.sha256()
    async for piece in files.stream(path, PART_BYTES):
        digest.update(piece)
    return digest.digest()


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]
