"""S3 as `Files`: the conditions that S3 holds on the server, and the whole store in one listing.

Every private s3fs call of the package is here. A new file is written only
where none exists (``If-None-Match: *``), and a file is replaced or removed
only while it is the version the walk listed or the run read (``If-Match`` on
its ETag), where the server honours these (AWS S3, MinIO, moto): of two runs
at once, each file is written by one. A write whose answer was lost (the
server acted, then the retry was refused) is read back before it is called a
conflict: a file that holds what was written was written. A server that
ignores ``If-Match`` on DeleteObject deletes unconditionally; the client
cannot tell.

The walk first lists the whole store, a thousand keys a request, as long as
that pays (each thousand keys name at least ``jobs`` nodes; else one folder at
a time, ``jobs`` at once, is quicker: arrays of many chunks), and
`listing.LISTING_LIMIT` keys bound it.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import hashlib
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, aclosing, suppress
from email.utils import parsedate_to_datetime
from typing import Any

from .chunks import ByteRange, Packed, Shard, ShardError, gone, shard_index, source_path
from .files import BACKUP_SUFFIX, Folder, Listed, breadth_first, changed
from .fsspec_files import FsspecFiles, child_path
from .lease import LeaseHold, LockHeld, LockLost, LockRead
from .listing import Listing, WholeStore, metadata_versions
from .options import StoreOptions
from .s3_parts import (
    MAX_PARTS,
    SMALLEST_PART,
    Part,
    Piece,
    is_md5,
    multipart_tag,
    shard_parts,
)
from .s3_timestamps import read_timestamps_fast

__all__ = [
    "LIST_PAGE",
    "UPLOADED_PARTS_AT_ONCE",
    "WHOLE_SHARD_BYTES",
    "S3Files",
]

LIST_PAGE = 1000
"""Keys S3 lists in one request at most: a folder's known names are cut into ranges of as many, each
range listed on its own and the ranges at once (a listing's pages, a request after another, took a
round trip each)."""


class S3Files(FsspecFiles):
    """S3 through s3fs: conditional writes and removals, the whole store listed at once where that
    pays."""

    def __init__(self, fs: Any, root: str, options: StoreOptions, deadline: float | None) -> None:
        super().__init__(fs, root, options, deadline)
        # The version (ETag) of each metadata file as the walk listed it, or as read where not
        # listed: what a replacement or removal holds on.
        self._versions: dict[str, str] = {}
        # the store's lock while a run holds it: every write checks it first
        self.hold = LeaseHold(lambda path: _LockObject(self, path))
        self.server_copy = options.server_copy
        self.in_parts = True  # large shards go up in parts (False: the server refused them)
        # each whole chunk object of the shards being packed: its ETag and size as listed (what the
        # copies hold on), or None where there is none
        self._listed_sources: dict[str, tuple[str, int] | Exception | None] = {}
        self._uploads_begun = 0  # multipart uploads asked for by the pack under way
        # s3fs makes its session on the first request: made now, to read timestamps fast
        if not isinstance(self.run({"": fs.set_session()})[""], Exception):
            read_timestamps_fast(fs, options.storage_options or {})

    # -- the walk ----------------------------------------------------------------------------------

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        whole, unreachable = self._whole_store()
        if whole is None:
            return super().walk(left_out)

        def listed(paths: list[str]) -> Listed:
            return Listed(self.found({path: whole.pop(path) for path in paths}), [])

        return breadth_first(self.root, listed, child_path, left_out, unreachable)

    def found(self, listings: dict[str, Listing]) -> list[Folder]:
        """The folders of one batch of the walk, by path; the versions of their metadata files
        kept."""
        self._versions.update(metadata_versions(listings))
        return super().found(listings)

    def _whole_store(self) -> tuple[dict[str, Listing] | None, list[tuple[str, str]]]:
        """Every folder of the store from one listing of all its keys (`listing.WholeStore`), and
        the paths no key reaches; None where that does not pay."""
        bucket, _, key = self.root.partition("/")
        prefix = f"{key}/" if key else ""
        whole = WholeStore(self.root, self.jobs)

        async def listing() -> dict[str, Listing] | None:
            async with aclosing(self.fs._iterdir(bucket, delimiter="", prefix=prefix)) as entries:
                while True:
                    try:
                        entry = await self.in_time(anext(entries))
                    except StopAsyncIteration:
                        return whole.folders
                    if not whole.add(entry["name"], entry.get("ETag")):
                        return None

        try:
            result: dict[str, Listing] | None = self._sync(self._loop, listing)
        # whatever stops the whole listing, listing folder by folder reports per folder
        except Exception:
            return None, []
        return result, whole.problems

    # -- reads -------------------------------------------------------------------------------------

    def ask_s3(self, method: str, **arguments: Any) -> Any:
        """One S3 API call (s3fs's own, with its retries) in its time: what it answered; what it
        raised, raised."""
        answer = self.run({"": self.fs._call_s3(method, **arguments)})[""]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def holds(self, path: str) -> bool:
        """Whether an object is at ``path``: one HEAD (`_head`)."""
        if not self.fs.split_path(path)[1]:  # a bucket's root: no key to ask about
            return bool(await self._call("exists", path))
        return await self._head(path) is not None

    async def read_metadata(self, path: str) -> bytes:
        """A metadata file's bytes, and its version where the walk did not list it: from one GET
        (the ETag its answer gives is that of the bytes it gives)."""
        data, tag = await self._get(path)
        self._versions.setdefault(path, tag)
        return data

    async def _version(self, path: str, expected: bytes | None) -> str:
        """The version of ``path`` that was read; for a file not read through this object, its
        version now, provided it holds ``expected`` (where given)."""
        version = self._versions.get(path)
        if version is None:
            head = await self._head(path)
            if head is None:
                raise FileNotFoundError(path)
            version = head[0]
            if expected is not None and await self.bytes_of(path) != expected:
                raise changed()
        return version

    # -- writes ------------------------------------------------------------------------------------

    async def replace_one(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        """One PUT that holds only while the object is the version read (no second read)."""
        self.before_write()
        condition = {"IfMatch": await self._version(path, expected)}
        if backup:
            await self.create_one(path + BACKUP_SUFFIX, expected)
        try:
            await self._call("pipe_file", path, data, **condition)
        except OSError as exc:
            if not refused_condition(exc):
                raise
            # a retry refused after the server acted: ours is there
            if await self.bytes_of(path) != data:
                raise changed() from None

    async def create_one(self, path: str, data: bytes) -> None:
        """One PUT that holds only where no object exists; one that holds ``data`` already is no
        failure."""
        self.before_write()
        try:
            await self._call("pipe_file", path, data, IfNoneMatch="*")
        except OSError as exc:
            if not (isinstance(exc, FileExistsError) or refused_condition(exc)):
                raise
            await self.same_or_exists(path, data)

    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """One DELETE that holds only while the object is the version read (s3fs's rm_file passes no
        condition)."""
        if read is None and version is None:
            await super().remove_one(path, read)
            return
        self.before_write()
        bucket, key, _ = self.fs.split_path(path)
        self.fs.invalidate_cache(path)
        try:
            version = version if version is not None else await self._version(path, None)
            await self.fs._call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
        except FileNotFoundError:
            pass  # gone already (or removed by a retry whose answer was lost)
        except OSError as exc:
            if refused_condition(exc):
                raise changed(": not removed") from None
            raise

    # -- shards ------------------------------------------------------------------------------------

    async def read_source(self, source: str | ByteRange) -> tuple[bytes | None, str | None]:
        """A chunk object's bytes and its ETag, from one GET (None, None where there is none), or a
        byte range of an object (``Range``; its version is the object's ETag, asked for apart:
        `version_of`)."""
        path = source_path(source)
        ranged = (
            {"Range": _range(source.start, source.end)} if isinstance(source, ByteRange) else {}
        )
        try:
            data, tag = await self._get(path, **ranged)
        except FileNotFoundError:
            return None, None
        if isinstance(source, ByteRange):
            if len(data) != source.end - source.start:
                raise OSError(f"{path}: {source.start + len(data):,} bytes, not {source.end:,}")
            return data, None
        return data, tag

    async def _get(self, path: str, **arguments: str) -> tuple[bytes, str]:
        """One GET of an object (``arguments``: a ``Range``, an ``IfMatch``): its bytes and ETag; a
        body cut short is asked for again, as s3fs's ``cat_file`` does (its retry loop)."""
        from s3fs.core import _error_wrapper

        bucket, key, _ = self.fs.split_path(path)

        async def get() -> tuple[bytes, str]:
            answer = await self.fs._call_s3("get_object", Bucket=bucket, Key=key, **arguments)
            try:
                return bytes(await answer["Body"].read()), str(answer["ETag"])
            finally:
                answer["Body"].close()

        found: tuple[bytes, str] = await _error_wrapper(get, retries=self.fs.retries)
        return found

    async def tail_of(self, path: str, size: int) -> tuple[int, bytes]:
        """An object's last ``size`` bytes and its size, from one GET of a suffix range
        (``Content-Range`` says the size)."""
        bucket, key, _ = self.fs.split_path(path)
        answer = await self.fs._call_s3(
            "get_object", Bucket=bucket, Key=key, Range=f"bytes=-{size}"
        )
        try:
            data = bytes(await answer["Body"].read())
        finally:
            answer["Body"].close()
        total = int(str(answer.get("ContentRange", f"/{len(data)}")).rpartition("/")[2])
        if len(data) != size:
            raise OSError(f"{path}: {total:,} bytes, fewer than {size:,}")
        return total, data

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        """Each object's ETag (see `stored`)."""
        return {
            path: found[0] if isinstance(found, tuple) else found
            for path, found in self.stored(paths).items()
        }

    def stored(self, paths: Iterable[str]) -> dict[str, tuple[str, int] | Exception | None]:
        """Each object's ETag and size (None: no such object), from listings of the key range each
        folder's paths span, a range of `LIST_PAGE` paths at a time and the ranges at once (an
        array's chunks in a few rounds of requests, not a HEAD each); the rest from HEADs, where a
        range holds many more keys than were asked for."""
        parts = _parts(_by_folder(paths))
        return _stored(parts, self.run(self._listings(parts)))

    def _listings(
        self, parts: Mapping[tuple[str, int], list[str]]
    ) -> dict[tuple[str, int], Coroutine[Any, Any, dict[str, tuple[str, int] | None]]]:
        return {key: self._listed(key[0], names) for key, names in parts.items()}

    async def _listed(self, folder: str, names: list[str]) -> dict[str, tuple[str, int] | None]:
        """`stored` of sorted ``names`` below ``folder``: their range listed, at most a page per
        100 names; the rest from HEADs."""
        found, complete = await self._keys_in(
            folder, _just_before(names[0]), names[-1], max(1, len(names) // 100)
        )
        listed: dict[str, tuple[str, int] | None] = {
            name: found.get(name) for name in names if name in found or complete
        }
        rest = [name for name in names if name not in listed]
        heads = await asyncio.gather(*(self._head(f"{folder}/{name}") for name in rest))
        return listed | dict(zip(rest, heads, strict=True))

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """One listing of each folder gives both: its keys, each with its ETag (the versions of
        paths below none of the folders from `versions`). A folder is listed in ranges of keys
        that ``paths`` below it bound, `LIST_PAGE` of them a range, the ranges at once: for an
        array of a million chunk objects, a thousand pages in a few rounds, where `files_below`
        then `versions` listed them twice, a page after another."""
        below: dict[str, list[str]] = {folder: [] for folder in folders}
        elsewhere = []
        for path in paths:
            folder = next((f for f in _folders_above(path) if f in below), None)
            if folder is None:
                elsewhere.append(path)
            else:
                below[folder].append(path[len(folder) + 1 :])
        ranges = {
            (folder, i): bounds
            for folder, names in below.items()
            for i, bounds in enumerate(_covering(sorted(names)))
        }
        listed = self.run(
            {key: self._keys_in(key[0], after, until) for key, (after, until) in ranges.items()}
        )
        keys: dict[str, dict[str, tuple[str, int]] | Exception] = {folder: {} for folder in below}
        for (folder, _), found in listed.items():
            held = keys[folder]
            if isinstance(found, Exception):
                keys[folder] = found
            elif not isinstance(held, Exception):
                held |= found[0]
        names: dict[str, list[str] | Exception] = {}
        versions: dict[str, str | Exception | None] = {}
        for folder, held in keys.items():
            # not the zero-byte keys ending in "/" some tools make as folders: no file
            names[folder] = (
                held
                if isinstance(held, Exception)
                else sorted(name for name in held if not name.endswith("/"))
            )
            for name in below[folder]:
                version = held if isinstance(held, Exception) else held.get(name)
                versions[f"{folder}/{name}"] = version[0] if isinstance(version, tuple) else version
        return names, versions | (self.versions(elsewhere) if elsewhere else {})

    async def _keys_in(
        self, folder: str, after: str | None, until: str | None, pages: int | None = None
    ) -> tuple[dict[str, tuple[str, int]], bool]:
        """The keys below ``folder`` after ``after`` (from the first where None) up to ``until``
        at least (to the last where None), by their names relative to it: ETag and size; at most
        ``pages`` pages (no limit where None), and whether they reached ``until`` (or the last
        key)."""
        bucket, prefix, _ = self.fs.split_path(folder)
        prefix = f"{prefix}/" if prefix else ""
        arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if after is not None:
            arguments["StartAfter"] = prefix + after
        found: dict[str, tuple[str, int]] = {}
        asked = 0
        while pages is None or asked < pages:
            answer = await self.fs._call_s3("list_objects_v2", **arguments)
            asked += 1
            page = {
                entry["Key"][len(prefix) :]: (str(entry["ETag"]), int(entry["Size"]))
                for entry in answer.get("Contents", [])
            }
            found |= page
            if (until is not None and page and max(page) >= until) or not answer.get("IsTruncated"):
                return found, True
            arguments["ContinuationToken"] = answer["NextContinuationToken"]
        return found, False

    async def _head(self, path: str) -> tuple[str, int] | None:
        """The ETag and size of the object at ``path``, None where there is none: one HEAD.

        (s3fs's ``info`` and ``exists`` list the key as a folder after a HEAD that finds nothing:
        a second round trip.)
        """
        bucket, key, _ = self.fs.split_path(path)
        try:
            answer = await self.fs._call_s3("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        return str(answer["ETag"]), int(answer["ContentLength"])

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """An ETag that is an MD5 (an object written in one request, without KMS) tells."""
        if is_md5(version):
            return version == f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
        return super().version_holds(version, data)

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        """As `FsspecFiles.pack`; where ``server_copy``, a shard with an inner chunk of 5 MiB or
        more is a multipart upload S3 assembles (`s3_parts`), and a shard of more than
        `WHOLE_SHARD_BYTES` otherwise a multipart upload of its chunks' bytes (the client holds
        `UPLOADED_PARTS_AT_ONCE` parts of it at a time): the chunk objects' ETags and sizes listed
        first (a request per thousand), each copy or read held on its source's ETag, an upload a
        killed run left on these shards' keys aborted before and after."""
        shards = list(shards)
        if not shards:
            return {}
        keys = {shard.path for shard in shards}
        parts = _parts(
            _by_folder(
                source for shard in shards for source in shard.sources if isinstance(source, str)
            )
        )
        # in one round of requests
        done = self.run({None: self._aborting(keys), **self._listings(parts)})
        self._listed_sources = _stored(
            parts, {key: listed for key, listed in done.items() if key is not None}
        )
        self._uploads_begun = 0
        try:
            return super().pack(shards, on_progress)
        finally:
            self._listed_sources = {}
            if self._uploads_begun:
                self._abort_uploads(keys)  # one whose answer was lost (a retry made another)

    def _abort_uploads(self, keys: set[str]) -> None:
        """`_aborting`, as a round of its own."""
        self.run({"": self._aborting(keys)})

    async def _aborting(self, keys: set[str]) -> None:
        """Every multipart upload not completed on one of these paths aborted, where the server
        lets this run list and abort them: a killed run's (no other run writes them: this run holds
        the store's lock). Best effort (its failure is for the caller to drop): a server without
        the listing, or a user not allowed to list or abort uploads (permissions of their own),
        still packs; S3's lifecycle rules can abort them."""
        if not keys:
            return
        bucket, _, _ = self.fs.split_path(next(iter(keys)))
        prefix = os.path.commonpath([self.fs.split_path(path)[1] for path in keys])
        arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            answer = await self.fs._call_s3("list_multipart_uploads", **arguments)
            await asyncio.gather(
                *(
                    self.fs._call_s3(
                        "abort_multipart_upload",
                        Bucket=bucket,
                        Key=upload["Key"],
                        UploadId=upload["UploadId"],
                    )
                    for upload in answer.get("Uploads", [])
                    if f"{bucket}/{upload['Key']}" in keys
                )
            )
            if not answer.get("IsTruncated"):
                return
            arguments["KeyMarker"] = answer["NextKeyMarker"]
            arguments["UploadIdMarker"] = answer["NextUploadIdMarker"]

    async def _pack_one(
        self,
        shard: Shard,
        requests: asyncio.Semaphore,
        versions: dict[str, asyncio.Task[str | None]],
    ) -> Packed:
        sizes = self._source_sizes(shard)
        parts = None if sizes is None else self._parts(sizes)
        refused = None
        while sizes is not None and parts is not None:
            try:
                packed = await self._assemble(shard, sizes, parts, requests, versions)
                return packed if refused is None else packed._replace(refused=refused)
            except OSError as exc:
                if getattr(exc, "errno", None) != errno.ENOSYS:
                    raise
                # a server that is not AWS S3: no copies from now on (their parts go up), or, where
                # none was asked, no multipart uploads (one request a shard, as before)
                if any(part.copied for part in parts):
                    self.server_copy = False
                    refused = f"the server refused to copy parts: {exc}"
                else:
                    self.in_parts = False
            parts = self._parts(sizes)
        packed = await super()._pack_one(shard, requests, versions)
        return packed if refused is None else packed._replace(refused=refused)

    def _parts(self, sizes: list[int | None]) -> list[Part] | None:
        """A shard's parts where it is a multipart upload (`s3_parts`): where S3 copies some of it,
        or where it is larger than the client should hold whole; None: one PUT."""
        parts = shard_parts(sizes) if self.server_copy else None
        total = sum(size or 0 for size in sizes)
        if parts is None and self.in_parts and total > WHOLE_SHARD_BYTES:
            # (parts of 5 MiB or more, as few as S3's limit on their number asks)
            smallest = max(SMALLEST_PART, -(-total // (MAX_PARTS - 1)))
            parts = shard_parts(sizes, smallest, copy=False)
        return parts

    def _source_sizes(self, shard: Shard) -> list[int | None] | None:
        """Each inner chunk's bytes as listed (None where there is none); None where some source
        was not listed (the client's packing says what)."""
        sizes: list[int | None] = []
        for source in shard.sources:
            if source is None:
                sizes.append(None)
            elif isinstance(source, ByteRange):
                sizes.append(source.end - source.start)
            elif isinstance(found := self._listed_sources.get(source), tuple):
                sizes.append(found[1])
            else:
                return None
        return sizes

    async def _assemble(
        self,
        shard: Shard,
        sizes: list[int | None],
        parts: list[Part],
        requests: asyncio.Semaphore,
        versions: dict[str, asyncio.Task[str | None]],
    ) -> Packed:
        """The shard as a multipart upload of ``parts``: S3 copies the copied ones from the chunk
        objects (each held on the ETag listed), the others go up with their MD5; completed where
        no object is (or replacing a killed run's, held on its ETag), the result's ETag compared
        with the one its parts make. Any failure aborts the upload: no shard appears."""
        sources: list[tuple[str, int, str] | None] = []  # (path, where its bytes start, ETag)
        for source in shard.sources:
            if source is None:
                sources.append(None)
            elif isinstance(source, ByteRange):
                tag = await self.version_task(versions, source.path)
                if tag is None:
                    raise gone(source.path.rsplit("/", 1)[-1])
                sources.append((source.path, source.start, tag))
            else:
                listed = self._listed_sources[source]
                assert isinstance(listed, tuple)
                sources.append((source, 0, listed[0]))
        index = shard_index(sizes)
        bucket, key, _ = self.fs.split_path(shard.path)
        self.before_write()
        self._uploads_begun += 1
        async with requests:
            created = await self.in_time(
                self.fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key)
            )
        upload = {"Bucket": bucket, "Key": key, "UploadId": created["UploadId"]}
        held = asyncio.Semaphore(UPLOADED_PARTS_AT_ONCE)

        async def put(number: int, part: Part) -> str:
            last = number == len(parts)
            if part.copied:
                return await self._part(upload, number, part, sources, requests, index, last)
            async with held:  # their bytes are in memory from their first read to their upload
                return await self._part(upload, number, part, sources, requests, index, last)

        try:
            tags = await asyncio.gather(
                *(put(number, part) for number, part in enumerate(parts, 1))
            )
            async with requests:
                written = await self.in_time(self._complete(shard, upload, list(tags)))
        except BaseException:
            with suppress(Exception):
                await self.fs._call_s3("abort_multipart_upload", **upload)
            raise
        copied = sum(part.size for part in parts if part.copied)
        versions_read = tuple(None if source is None else source[2] for source in sources)
        return Packed(tuple(sizes), versions_read, written, copied=copied)

    async def _part(
        self,
        upload: Mapping[str, str],
        number: int,
        part: Part,
        sources: Sequence[tuple[str, int, str] | None],
        requests: asyncio.Semaphore,
        index: bytes,
        last: bool,
    ) -> str:
        """One part put in place: copied by S3 from its chunk's object (refused where the object is
        no longer the version listed), or its pieces read (likewise held) and uploaded; its ETag."""
        if part.copied:
            (piece,) = part.pieces
            source = sources[piece.chunk]
            assert source is not None
            path, start, tag = source
            bucket, key, _ = self.fs.split_path(path)
            whole = start == 0 and piece.start == 0 and self._listed_sources.get(path) is not None
            ranged = (
                {} if whole else {"CopySourceRange": _range(start + piece.start, start + piece.end)}
            )
            async with requests:
                self.before_write()
                answer = await self._on_source(
                    path,
                    self.fs._call_s3(
                        "upload_part_copy",
                        PartNumber=number,
                        CopySource={"Bucket": bucket, "Key": key},
                        CopySourceIfMatch=tag,
                        **upload,
                        **ranged,
                    ),
                )
            copied = str(answer["CopyPartResult"]["ETag"])
            # a whole object's copy has its MD5: the check where a server ignores the condition
            if whole and is_md5(tag) and copied != tag:
                raise _changed_source(path)
            return copied
        pieces = await asyncio.gather(
            *(self._piece(piece, sources[piece.chunk], requests) for piece in part.pieces)
        )
        body = b"".join(pieces) + (index if last else b"")
        md5 = hashlib.md5(body, usedforsecurity=False)
        async with requests:
            self.before_write()
            answer = await self.in_time(
                self.fs._call_s3(
                    "upload_part",
                    PartNumber=number,
                    Body=body,
                    ContentMD5=base64.b64encode(md5.digest()).decode(),
                    **upload,
                )
            )
        return str(answer["ETag"])

    async def _piece(
        self, piece: Piece, source: tuple[str, int, str] | None, requests: asyncio.Semaphore
    ) -> bytes:
        """A piece of an inner chunk, from a GET of its range held on the ETag listed."""
        assert source is not None
        path, start, tag = source
        if piece.end == piece.start:
            return b""
        ranged = _range(start + piece.start, start + piece.end)
        async with requests:
            found: tuple[bytes, str] = await self._on_source(
                path, self._get(path, Range=ranged, IfMatch=tag)
            )
        data = found[0]
        if len(data) != piece.end - piece.start:
            raise OSError(f"{path}: {len(data):,} bytes of a range of {piece.end - piece.start:,}")
        return data

    async def _on_source(self, path: str, request: Awaitable[Any]) -> Any:
        """A request on a chunk object held on the ETag listed, in its time: an object gone is
        `chunks.gone`, one that is no longer that version changed (another writer)."""
        try:
            return await self.in_time(request)
        except FileNotFoundError:
            raise gone(path.rsplit("/", 1)[-1]) from None
        except OSError as exc:
            if refused_condition(exc):
                raise _changed_source(path) from None
            raise

    async def _complete(self, shard: Shard, upload: Mapping[str, str], tags: list[str]) -> bool:
        """The upload completed where no object is, or replacing an interrupted run's object (held
        on its ETag); False where that object is this shard already (its parts' ETag). The ETag S3
        answers is compared with the one the parts make, where each is an MD5."""
        name = shard.path.rsplit("/", 1)[-1]
        expected = multipart_tag(tags) if all(is_md5(tag) for tag in tags) else None
        parts = {"Parts": [{"PartNumber": n, "ETag": tag} for n, tag in enumerate(tags, 1)]}

        async def complete(condition: dict[str, str]) -> Any:
            try:
                return await self.fs._call_s3(
                    "complete_multipart_upload", MultipartUpload=parts, **upload, **condition
                )
            except FileNotFoundError:
                # no such upload: a retry whose first try completed it (its answer lost)
                existing = await self._head(shard.path)
                if existing is not None and expected is not None and existing[0] == expected:
                    return {"ETag": expected}
                raise ShardError(f"{name}: its upload is gone (aborted by someone else?)") from None

        async def holds_it(tag: str) -> bool:
            return tag == expected

        answer = await self._put_where_none(shard.path, complete, holds_it)
        if answer is None:
            await self.fs._call_s3("abort_multipart_upload", **upload)
            return False
        if expected is not None and answer.get("ETag") != expected:
            raise ShardError(f"{name}: S3 assembled other bytes than its parts say")
        return True

    async def write_shard(self, shard: Shard, body: bytes) -> bool:
        """One PUT where no object exists (a first run: no request before it); where one does (an
        interrupted run's: no zarr.json reads it, the caller made sure), kept if it holds the shard,
        else replaced only while it is the version found. The body's MD5 goes with it for S3 to
        check (``Content-MD5``), and the ETag S3 answers is compared with it (where S3 makes it
        another, as with KMS, the object is read back). False where the object held the shard
        already."""
        bucket, key, _ = self.fs.split_path(shard.path)
        name = key.rsplit("/", 1)[-1]
        if len(body) > _LARGEST_PUT:
            raise ShardError(
                f"{name}: {len(body):,} bytes, more than S3 takes in one PUT: "
                "a smaller shard_size makes smaller shards"
            )
        md5 = hashlib.md5(body, usedforsecurity=False)
        tag = f'"{md5.hexdigest()}"'
        checksum = base64.b64encode(md5.digest()).decode()

        async def put(condition: dict[str, str]) -> Any:
            return await self.fs._call_s3(
                "put_object", Bucket=bucket, Key=key, Body=body, ContentMD5=checksum, **condition
            )

        async def holds_it(existing: str) -> bool:
            # an interrupted run's object, or this PUT's retry found its first try's
            return existing == tag or await self.bytes_of(shard.path) == body

        answer = await self._put_where_none(shard.path, put, holds_it)
        if answer is None:
            return False
        if answer.get("ETag") != tag and await self.bytes_of(shard.path) != body:
            raise ShardError(f"{name}: S3 stored other bytes than were sent (read back)")
        return True

    async def _put_where_none(
        self,
        path: str,
        write: Callable[[dict[str, str]], Awaitable[Any]],
        holds_it: Callable[[str], Awaitable[bool]],
    ) -> Any:
        """``write(condition)`` where no object is at ``path`` (``If-None-Match``): its answer.
        Where one is, None if it holds what is written already (``holds_it`` of its ETag), else
        ``write`` again, replacing it only while it is that version (``If-Match``); refused again,
        it is someone else's (`ShardError`)."""
        condition = {"IfNoneMatch": "*"}
        while True:
            self.before_write()
            self.fs.invalidate_cache(path)
            try:
                return await write(condition)
            except OSError as exc:
                if not refused_condition(exc):
                    raise
                if "IfMatch" in condition:
                    raise ShardError(
                        f"{path.rsplit('/', 1)[-1]}: written by someone else meanwhile: left as it "
                        "is"
                    ) from None
            existing = await self._head(path)
            if existing is None:
                continue  # removed meanwhile: try again to create it
            if await holds_it(existing[0]):
                return None
            condition = {"IfMatch": existing[0]}

    # -- the lock ----------------------------------------------------------------------------------

    def lock(self, top: str) -> AbstractContextManager[None]:
        """One run at a time on the store whose topmost node is ``top``: a lock object there
        (`lease.LOCK_NAME`), held by a lease (`lease.LeaseHold`)."""
        return self.hold.during(top)

    def before_write(self) -> None:
        self.hold.check()


_LARGEST_PUT = 5 * 2**30
"""The most bytes S3 takes in one PUT."""

WHOLE_SHARD_BYTES = 64 * 2**20
"""A shard of more bytes than this, of which S3 copies nothing, goes up in parts: the client never
holds it whole (a shard of small chunks, or any with ``server_copy`` off)."""

UPLOADED_PARTS_AT_ONCE = 8
"""The parts of one shard that go up from the client at once (5 MiB and a chunk each at most, for
shards of S3's smallest parts): what it holds of a shard, not the shard."""


def refused_condition(exc: OSError) -> bool:
    """Whether S3 refused a conditional write or removal (412 Precondition Failed), from the error
    s3fs raises."""
    response = getattr(exc.__cause__, "response", None)
    return (
        isinstance(response, dict) and response.get("Error", {}).get("Code") == "PreconditionFailed"
    )


def _range(start: int, end: int) -> str:
    """A ``Range`` (and ``x-amz-copy-source-range``) of bytes ``start`` to ``end``, exclusive."""
    return f"bytes={start}-{end - 1}"


def _changed_source(path: str) -> ShardError:
    return ShardError(
        f"{path.rsplit('/', 1)[-1]}: changed after it was listed (another writer): no shard written"
    )


class _LockObject:
    """The lock object through S3's own conditional requests; its age by the server's clock (the
    ``Date`` of the answer that read it)."""

    def __init__(self, files: S3Files, path: str) -> None:
        self.files = files
        self.bucket, self.key, _ = files.fs.split_path(path)

    def _put(self, body: bytes, **condition: str) -> str:
        answer = self.files.ask_s3(
            "put_object", Bucket=self.bucket, Key=self.key, Body=body, **condition
        )
        return str(answer["ETag"])

    def create(self, body: bytes) -> str:
        try:
            return self._put(body, IfNoneMatch="*")
        except OSError as exc:
            if isinstance(exc, FileExistsError) or refused_condition(exc):
                raise LockHeld from None
            raise

    def replace(self, body: bytes, tag: str) -> str:
        try:
            return self._put(body, IfMatch=tag)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or refused_condition(exc):
                raise LockLost from None
            raise

    def read(self) -> LockRead:
        answer = self.files.ask_s3("get_object", Bucket=self.bucket, Key=self.key)
        try:
            body = self.files.run({"": answer["Body"].read()})[""]
        finally:
            answer["Body"].close()
        now = parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - answer["LastModified"]).total_seconds()
        return LockRead(body if isinstance(body, bytes) else b"", str(answer["ETag"]), age)

    def remove(self, tag: str) -> None:
        self.files.ask_s3("delete_object", Bucket=self.bucket, Key=self.key, IfMatch=tag)


def _folders_above(path: str) -> Iterator[str]:
    """The folders above an object's path, nearest first."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path


def _by_folder(paths: Iterable[str]) -> dict[str, list[str]]:
    """Object paths' names, by the folder above them."""
    names: dict[str, list[str]] = {}
    for path in paths:
        folder, name = path.rsplit("/", 1)
        names.setdefault(folder, []).append(name)
    return names


def _parts(names: Mapping[str, list[str]]) -> dict[tuple[str, int], list[str]]:
    """Each folder's names sorted, in parts of `LIST_PAGE` (by folder and the part's place): each
    part's key range is listed on its own."""
    parts = {}
    for folder, found in names.items():
        ordered = sorted(found)
        for start in range(0, len(ordered), LIST_PAGE):
            parts[folder, start // LIST_PAGE] = ordered[start : start + LIST_PAGE]
    return parts


def _covering(names: list[str]) -> list[tuple[str | None, str | None]]:
    """Ranges of keys (after, until) that together hold every key of a folder, bounded by its
    sorted ``names`` so that a range holds `LIST_PAGE` of them: a page each where they are all
    there (the bound, a range's last key, is the page's last)."""
    bounds = names[LIST_PAGE - 1 :: LIST_PAGE - 1]
    return list(zip([None, *map(_just_before, bounds)], [*bounds, None], strict=True))


def _just_before(name: str) -> str:
    """A key that sorts before ``name`` and after few others: where a listing that must hold
    ``name`` starts (a key listed too early is left out by its caller)."""
    return name[:-1] + (chr(ord(name[-1]) - 1) if name and name[-1] > "\0" else "")


def _stored(
    parts: Mapping[tuple[str, int], list[str]],
    listed: Mapping[tuple[str, int], dict[str, tuple[str, int] | None] | Exception],
) -> dict[str, tuple[str, int] | Exception | None]:
    """`S3Files.stored` by path, from each part's listing."""
    stored: dict[str, tuple[str, int] | Exception | None] = {}
    for (folder, place), result in listed.items():
        for name in parts[folder, place]:
            stored[f"{folder}/{name}"] = result if isinstance(result, Exception) else result[name]
    return stored
