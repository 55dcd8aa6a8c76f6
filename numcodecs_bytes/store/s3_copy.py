"""Shards on S3 made as multipart uploads that S3 completes only where no object is (or replacing
an interrupted run's, held on its ETag): those whose inner chunks of 5 MiB or more S3 copies
itself (``UploadPartCopy``), and those too large for one PUT (`s3_parts`), their small chunks'
bytes going up from the client, a few parts at a time.

A pack lists the chunk objects' ETags and sizes first (a request per thousand
keys, the ranges at once), and aborts an upload a killed run left on its
shards' keys. Each copy and each read of a chunk is held on the ETag listed:
a chunk written after the listing makes its shard fail (no shard appears:
the upload is aborted). The ETag S3 answers is compared with the one its
parts make (each part's MD5 goes with it). A run paused past its lease while
an upload goes up overwrites nothing made since: its completion is refused.
A shard of up to `object_packing.WHOLE_SHARD_BYTES` with nothing to copy goes
up in one PUT (`object_packing`). Once the server refused a copy, no shard
is copied (said once); a server that refuses multipart uploads fails a
shard too large for one PUT, with one line.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from . import object_packing
from .object_client import tag
from .object_listing import ListedObject, keys_in
from .object_packing import (
    MEMORY_BYTES,
    ObjectPacking,
    ShardMemory,
    pack_one,
    without_temporaries,
)
from .s3_api import ConditionRefused, S3Api
from .s3_parts import (
    MAX_PARTS,
    SMALLEST_PART,
    Part,
    Piece,
    is_md5,
    multipart_tag,
    shard_parts,
)
from .shard_format import ByteRange, Packed, Shard, ShardError, gone, shard_index

if TYPE_CHECKING:
    from .object_client import ObjectClient

__all__ = ["LIST_PAGE", "UPLOADED_PARTS_AT_ONCE", "S3Packing", "bucket_key", "pack_copying"]

LIST_PAGE = 1000
"""Keys S3 lists in one request at most: a folder's names are cut into ranges of as many, each range
listed on its own and the ranges at once (a listing's pages, a request after another, took a round
trip each)."""

UPLOADED_PARTS_AT_ONCE = 4
"""The parts of one shard that go up from the client at once (5 MiB and a chunk each at most): what
it holds of a shard, not the shard (within what `object_packing.ShardMemory` reserves for one)."""

Source = tuple[str, int, str]  # a source's object, where its bytes start in it, its ETag


@dataclass
class _Pack:
    """One pack's state, passed to each shard: the listed chunk objects, whether S3 still copies,
    why it stopped, the uploads begun."""

    api: S3Api
    listed: dict[str, ListedObject | Exception | None]
    copying: bool = True
    refused: str | None = None
    uploads_begun: int = 0


class S3Packing(ObjectPacking):
    """The packing of an S3 bucket's shards (`files.ShardPacking`): as `ObjectPacking`, but a shard
    with an inner chunk of 5 MiB or more (where ``server_copy``) or too large for one PUT is a
    multipart upload S3 completes only where no object is, or replacing the one found
    (`pack_copying`)."""

    def __init__(self, files: ObjectClient, api: S3Api, server_copy: bool) -> None:
        super().__init__(files)
        self.api, self.server_copy = api, server_copy

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        return pack_copying(self.files, self.api, list(shards), on_progress, self.server_copy)


def pack_copying(
    files: ObjectClient,
    api: S3Api,
    shards: list[Shard],
    on_progress: Callable[[int, int], None] | None,
    copying: bool,
) -> dict[str, Packed | Exception]:
    """Each shard packed: assembled by S3 where some inner chunk is 5 MiB or more, else through the
    client; as many at once as `object_packing.MEMORY_BYTES` holds."""
    if not shards:
        return {}
    keys = {shard.path for shard in shards}
    ranges = _ranges(_by_folder(s for shard in shards for s in shard.sources if isinstance(s, str)))
    listings = {key: _listed(files, key[0], names) for key, names in ranges.items()}
    # one round of requests: the listings, and what killed runs left (uploads, temporaries) gone
    leftovers = {None: _aborting(files, api, keys), "": without_temporaries(files, shards)}
    done: dict[Any, Any] = files.run({**leftovers, **listings}, limit=False)
    for key in leftovers:
        del done[key]  # best effort: a failure there is no failure of the pack
    pack = _Pack(api, _by_path(ranges, done), copying)
    memory = ShardMemory(MEMORY_BYTES)

    async def one(
        shard: Shard, requests: asyncio.Semaphore, versions: dict[str, asyncio.Task[str | None]]
    ) -> Packed:
        try:
            return await packed(shard, requests, versions)
        except Exception:
            files.before_write()  # a run that lost its lock meanwhile stops: this failure is that
            raise

    async def packed(
        shard: Shard, requests: asyncio.Semaphore, versions: dict[str, asyncio.Task[str | None]]
    ) -> Packed:
        sizes = _source_sizes(shard, pack.listed)
        while sizes is not None and (parts := _parts(sizes, pack.copying)) is not None:
            try:
                async with memory.reserved(len(shard.sources)):
                    packed = await _assemble(files, pack, shard, sizes, parts, requests, versions)
                return packed if pack.refused is None else packed._replace(refused=pack.refused)
            except OSError as exc:
                if exc.errno != errno.ENOSYS or not any(part.copied for part in parts):
                    raise
                # a server that is not AWS S3: no copies from now on, their parts go up
                pack.copying = False
                pack.refused = f"the server refused to copy parts: {exc}"
        packed = await pack_one(files, shard, requests, versions, memory)
        return packed if pack.refused is None else packed._replace(refused=pack.refused)

    try:
        return files.pack_each(shards, one, on_progress, shards_at_once=len(shards))
    finally:
        if pack.uploads_begun:  # one whose answer was lost (a retry made another)
            files.run({"": _aborting(files, api, keys)})


async def _aborting(files: ObjectClient, api: S3Api, keys: set[str]) -> None:
    """Every multipart upload not completed on one of these paths aborted, where the server lets
    this run list and abort them: a killed run's (no other run writes them: this run holds the
    store's lock). Best effort (its failure is for the caller to drop): a server without the
    listing, or a user not allowed to list or abort uploads, still packs; S3's lifecycle rules can
    abort them."""
    prefix = os.path.commonpath([files.key(path) for path in keys])
    arguments: dict[str, Any] = {"Bucket": files.container, "Prefix": prefix}
    while True:
        answer = await api.call("list_multipart_uploads", **arguments)
        await asyncio.gather(
            *(
                api.call(
                    "abort_multipart_upload",
                    Bucket=files.container,
                    Key=upload["Key"],
                    UploadId=upload["UploadId"],
                )
                for upload in answer.get("Uploads", [])
                if f"{files.container}/{upload['Key']}" in keys
            )
        )
        if not answer.get("IsTruncated"):
            return
        arguments["KeyMarker"] = answer["NextKeyMarker"]
        arguments["UploadIdMarker"] = answer["NextUploadIdMarker"]


def _parts(sizes: list[int | None], copying: bool) -> list[Part] | None:
    """A shard's parts where it is a multipart upload (`s3_parts`): where S3 copies some of it, or
    where it is larger than one PUT of `object_packing.WHOLE_SHARD_BYTES`, in parts of 5 MiB or
    more (as few as S3's limit on their number asks); None: one PUT."""
    parts = shard_parts(sizes) if copying else None
    total = sum(size or 0 for size in sizes)
    if parts is None and total > object_packing.WHOLE_SHARD_BYTES:
        smallest = max(SMALLEST_PART, -(-total // (MAX_PARTS - 1)))
        parts = shard_parts(sizes, smallest, copy=False)
    return parts


def _source_sizes(
    shard: Shard, listed: Mapping[str, ListedObject | Exception | None]
) -> list[int | None] | None:
    """Each inner chunk's bytes as listed (None where there is none); None where some source was not
    listed (packing through the client says what)."""
    sizes: list[int | None] = []
    for source in shard.sources:
        if source is None:
            sizes.append(None)
        elif isinstance(source, ByteRange):
            sizes.append(source.end - source.start)
        elif isinstance(found := listed.get(source), tuple):
            sizes.append(found[1])
        else:
            return None
    return sizes


async def _assemble(
    files: ObjectClient,
    pack: _Pack,
    shard: Shard,
    sizes: list[int | None],
    parts: list[Part],
    requests: asyncio.Semaphore,
    versions: dict[str, asyncio.Task[str | None]],
) -> Packed:
    """The shard as a multipart upload of ``parts``: S3 copies the copied ones from the chunk
    objects (each held on the ETag listed), the others go up with their MD5; completed where no
    object is (or replacing a killed run's, held on its ETag). Any failure aborts the upload: no
    shard appears."""
    sources: list[Source | None] = []
    for source in shard.sources:
        if source is None:
            sources.append(None)
        elif isinstance(source, ByteRange):
            if source.path not in versions:
                versions[source.path] = asyncio.ensure_future(
                    files.in_time(files.version_of(source.path))
                )
            version = await versions[source.path]
            if version is None:
                raise gone(source.path.rsplit("/", 1)[-1])
            sources.append((source.path, source.start, version))
        else:
            listed = pack.listed[source]
            assert isinstance(listed, tuple)
            sources.append((source, 0, listed[0]))
    index = shard_index(sizes)
    files.before_write()
    pack.uploads_begun += 1
    async with requests:
        created = await files.in_time(
            pack.api.call("create_multipart_upload", **bucket_key(files, shard.path))
        )
    upload = {**bucket_key(files, shard.path), "UploadId": created["UploadId"]}
    held = asyncio.Semaphore(UPLOADED_PARTS_AT_ONCE)
    part = _Parts(files, pack, _Upload(upload, sources, index, len(parts)), requests)

    async def put(number: int, one: Part) -> str:
        if one.copied:
            return await part.copied(number, one)
        async with held:  # their bytes are in memory from their first read to their upload
            return await part.uploaded(number, one)

    try:
        tags = await asyncio.gather(*(put(number, one) for number, one in enumerate(parts, 1)))
        async with requests:
            written = await files.in_time(_complete(files, pack.api, shard, upload, list(tags)))
    except BaseException:
        with suppress(Exception):
            await pack.api.call("abort_multipart_upload", **upload)
        raise
    copied = sum(one.size for one in parts if one.copied)
    versions_read = tuple(None if source is None else source[2] for source in sources)
    return Packed(tuple(sizes), versions_read, written, copied=copied)


class _Upload(NamedTuple):
    """One shard's multipart upload: its botocore ``Bucket``, ``Key`` and ``UploadId``; each inner
    chunk's source (its object, where its bytes start in it, its ETag); the shard's index, which
    goes with the last of its ``parts``."""

    ids: Mapping[str, str]
    sources: Sequence[Source | None]
    shard_index: bytes
    parts: int


class _Parts:
    """The parts of one upload, each put in place: copied by S3 or uploaded."""

    def __init__(
        self, files: ObjectClient, pack: _Pack, upload: _Upload, requests: asyncio.Semaphore
    ) -> None:
        self.files, self.pack, self.requests = files, pack, requests
        self.upload, self.sources = upload.ids, upload.sources
        self.index, self.count = upload.shard_index, upload.parts

    async def copied(self, number: int, part: Part) -> str:
        """A part copied by S3 from its chunk's object (refused where the object is no longer the
        version listed): its ETag."""
        files = self.files
        (piece,) = part.pieces
        source = self.sources[piece.chunk]
        assert source is not None
        path, start, version = source
        whole = start == 0 and piece.start == 0 and isinstance(self.pack.listed.get(path), tuple)
        ranged = (
            {} if whole else {"CopySourceRange": _range(start + piece.start, start + piece.end)}
        )
        async with self.requests:
            files.before_write()
            answer = await _on_source(
                files,
                path,
                self.pack.api.call(
                    "upload_part_copy",
                    PartNumber=number,
                    CopySource={"Bucket": files.container, "Key": files.key(path)},
                    CopySourceIfMatch=version,
                    **self.upload,
                    **ranged,
                ),
            )
        made = str(answer["CopyPartResult"]["ETag"])
        # a whole object's copy has its MD5: the check where a server ignores the condition
        if whole and is_md5(version) and tag(made) != tag(version):
            raise _changed_source(path)
        return made

    async def uploaded(self, number: int, part: Part) -> str:
        """A part of pieces read (each held on its object's ETag) and uploaded with its MD5 (the
        last with the shard's index): its ETag."""
        files = self.files
        pieces = await asyncio.gather(*(self._piece(piece) for piece in part.pieces))
        body = b"".join(pieces) + (self.index if number == self.count else b"")
        md5 = hashlib.md5(body, usedforsecurity=False)
        async with self.requests:
            files.before_write()
            answer = await files.in_time(
                self.pack.api.call(
                    "upload_part",
                    PartNumber=number,
                    Body=body,
                    ContentMD5=base64.b64encode(md5.digest()).decode(),
                    **self.upload,
                )
            )
        return str(answer["ETag"])

    async def _piece(self, piece: Piece) -> bytes:
        """A piece of an inner chunk, from a GET of its range held on the ETag listed."""
        import obstore

        source = self.sources[piece.chunk]
        assert source is not None
        path, start, version = source
        if piece.end == piece.start:
            return b""

        async def get() -> bytes:
            answer = await obstore.get_async(
                self.files.store,
                self.files.key(path),
                options={
                    "range": (start + piece.start, start + piece.end),
                    "if_match": version,
                },
            )
            return bytes(await answer.bytes_async())

        async with self.requests:
            data: bytes = await _on_source(self.files, path, get())
        if len(data) != piece.end - piece.start:
            raise OSError(f"{path}: {len(data):,} bytes of a range of {piece.end - piece.start:,}")
        return data


async def _on_source(files: ObjectClient, path: str, request: Awaitable[Any]) -> Any:
    """A request on a chunk object held on the ETag listed, in its time: an object gone is
    `chunks.gone`, one that is no longer that version changed (another writer)."""
    from obstore.exceptions import PreconditionError

    try:
        return await files.in_time(request)
    except FileNotFoundError:
        raise gone(path.rsplit("/", 1)[-1]) from None
    except (ConditionRefused, PreconditionError):
        raise _changed_source(path) from None


async def _complete(
    files: ObjectClient, api: S3Api, shard: Shard, upload: Mapping[str, str], tags: list[str]
) -> bool:
    """The upload completed where no object is, or replacing an interrupted run's object (held on
    its ETag); False where that object is this shard already (its parts' ETag). The ETag S3
    answers is compared with the one the parts make, where each is an MD5."""
    name = shard.path.rsplit("/", 1)[-1]
    expected = multipart_tag(tags) if all(is_md5(t) for t in tags) else None
    parts = {"Parts": [{"PartNumber": n, "ETag": t} for n, t in enumerate(tags, 1)]}

    async def complete(condition: dict[str, str]) -> Any:
        try:
            return await api.call(
                "complete_multipart_upload", MultipartUpload=parts, **upload, **condition
            )
        except FileNotFoundError:
            # no such upload: a retry whose first try completed it (its answer lost)
            existing = await files.version_of(shard.path)
            if existing is not None and expected is not None and existing == tag(expected):
                return {"ETag": expected}
            raise ShardError(f"{name}: its upload is gone (aborted by someone else?)") from None

    answer = await _where_none(files, shard.path, complete, lambda found: found == expected)
    if answer is None:
        with suppress(FileNotFoundError):  # aborted already (by a run that took the lock over)
            await api.call("abort_multipart_upload", **upload)
        return False
    if expected is not None and tag(answer.get("ETag")) != tag(expected):
        raise ShardError(f"{name}: S3 assembled other bytes than its parts say")
    return True


async def _where_none(
    files: ObjectClient,
    path: str,
    write: Callable[[dict[str, str]], Awaitable[Any]],
    holds_it: Callable[[str], bool],
) -> Any:
    """``write(condition)`` where no object is at ``path`` (``If-None-Match``): its answer. Where
    one is, None if it holds what is written already (``holds_it`` of its ETag), else ``write``
    again, replacing it only while it is that version (``If-Match``); refused again, it is someone
    else's (`ShardError`)."""
    condition = {"IfNoneMatch": "*"}
    while True:
        files.before_write()
        try:
            return await write(condition)
        except ConditionRefused:
            if "IfMatch" in condition:
                raise ShardError(
                    f"{path.rsplit('/', 1)[-1]}: written by someone else meanwhile: left as it is"
                ) from None
        existing = await files.version_of(path)
        if existing is None:
            continue  # removed meanwhile: try again to create it
        if holds_it(existing):
            return None
        condition = {"IfMatch": existing}


def bucket_key(files: ObjectClient, path: str) -> dict[str, str]:
    """botocore's ``Bucket`` and ``Key`` of a path."""
    return {"Bucket": files.container, "Key": files.key(path)}


def _range(start: int, end: int) -> str:
    """A ``x-amz-copy-source-range`` of bytes ``start`` to ``end``, exclusive."""
    return f"bytes={start}-{end - 1}"


def _changed_source(path: str) -> ShardError:
    return ShardError(
        f"{path.rsplit('/', 1)[-1]}: changed after it was listed (another writer): no shard written"
    )


# -- the chunk objects listed ----------------------------------------------------------------------


def _by_folder(paths: Iterable[str]) -> dict[str, list[str]]:
    """Object paths' names, by the folder above them."""
    names: dict[str, list[str]] = {}
    for path in paths:
        folder, name = path.rsplit("/", 1)
        names.setdefault(folder, []).append(name)
    return names


def _ranges(names: Mapping[str, list[str]]) -> dict[tuple[str, int], list[str]]:
    """Each folder's names sorted, in ranges of `LIST_PAGE` (by folder and the range's place): each
    range of keys is listed on its own."""
    ranges = {}
    for folder, found in names.items():
        ordered = sorted(found)
        for start in range(0, len(ordered), LIST_PAGE):
            ranges[folder, start // LIST_PAGE] = ordered[start : start + LIST_PAGE]
    return ranges


async def _listed(
    files: ObjectClient, folder: str, names: list[str]
) -> dict[str, ListedObject | None]:
    """The ETag and size of each of sorted ``names`` below ``folder`` (None: no such object): their
    range listed, at most a page per 100 names; the rest from HEADs."""
    found, complete = await keys_in(
        files, folder, names[0], names[-1], pages=max(1, len(names) // 100)
    )
    listed: dict[str, ListedObject | None] = {
        name: found.get(name) for name in names if name in found or complete
    }
    rest = [name for name in names if name not in listed]
    stats = await asyncio.gather(*(files.stat(f"{folder}/{name}") for name in rest))
    heads = [None if stat is None else (stat.tag or "", stat.size) for stat in stats]
    return listed | dict(zip(rest, heads, strict=True))


def _by_path(
    ranges: Mapping[tuple[str, int], list[str]],
    listed: Mapping[Any, dict[str, ListedObject | None] | Exception],
) -> dict[str, ListedObject | Exception | None]:
    """Each chunk object's listing by path, from each range's."""
    found: dict[str, ListedObject | Exception | None] = {}
    for (folder, place), result in listed.items():
        for name in ranges[folder, place]:
            found[f"{folder}/{name}"] = result if isinstance(result, Exception) else result[name]
    return found
