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
`LISTING_LIMIT` keys bound it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import aclosing
from typing import Any

from .chunks import KEPT_SHARD, Shard, ShardError
from .files import BACKUP_SUFFIX, BATCH, Folder, Listed, breadth_first, changed
from .fsspec_files import FsspecFiles, Listing, child_path
from .layout import METADATA_NAMES, NODE_FILES
from .options import StoreOptions

__all__ = ["LISTING_LIMIT", "S3Files"]

LISTING_LIMIT = 100 * BATCH
"""Keys a listing of a whole object store holds at most: what bounds the memory of that listing."""


class S3Files(FsspecFiles):
    """S3 through s3fs: conditional writes and removals, the whole store listed at once where that pays."""

    def __init__(self, fs: Any, root: str, options: StoreOptions, deadline: float | None) -> None:
        super().__init__(fs, root, options, deadline)
        # The version (ETag) of each metadata file as the walk listed it, or as read where not listed: what a
        # replacement or removal holds on.
        self._versions: dict[str, str] = {}

    # -- the walk ----------------------------------------------------------------------------------------------

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        whole, unreachable = self._whole_store()
        if whole is None:
            return super().walk(left_out)

        def listed(paths: list[str]) -> Listed:
            return Listed(self.found({path: whole.pop(path) for path in paths}), [])

        return breadth_first(self.root, listed, child_path, left_out, unreachable)

    def found(self, listings: dict[str, Listing]) -> list[Folder]:
        """The folders of one batch of the walk, by path; the versions of their metadata files kept."""
        for path, listing in listings.items():
            self._versions.update(
                (f"{path}/{name}", tag) for name, tag in listing.versions.items() if tag and name in METADATA_NAMES
            )
        return super().found(listings)

    def _whole_store(self) -> tuple[dict[str, Listing] | None, list[tuple[str, str]]]:
        """Every folder of the store from one listing of all its keys, a page after another, and the paths no key
        reaches. None where that does not pay, and the walk lists folder by folder: a thousand keys (a page) that
        name fewer nodes than ``jobs`` (one request each, at once), or more than `LISTING_LIMIT` keys."""
        bucket, _, key = self.root.partition("/")
        prefix = f"{key}/" if key else ""
        problems: list[tuple[str, str]] = []

        async def listing() -> dict[str, Listing] | None:
            folders = {self.root: Listing()}
            keys = nodes = 0
            async with aclosing(self.fs._iterdir(bucket, delimiter="", prefix=prefix)) as entries:
                while True:
                    try:
                        entry = await self.in_time(anext(entries))
                    except StopAsyncIteration:
                        return folders
                    keys += 1
                    nodes += _add_key(folders, self.root, entry, problems)
                    if keys % BATCH == 0:
                        if nodes < self.jobs or keys >= LISTING_LIMIT:
                            return None
                        nodes = 0

        try:
            result: dict[str, Listing] | None = self._sync(self._loop, listing)
        except Exception:  # whatever stops the whole listing, listing folder by folder reports per folder
            return None, []
        return result, problems

    # -- reads -------------------------------------------------------------------------------------------------

    async def read_metadata(self, path: str) -> bytes:
        """A metadata file's bytes; where the walk did not list its version, the version first."""
        if path not in self._versions:
            self._versions[path] = (await self._call("info", path))["ETag"]
        return await self.bytes_of(path)

    async def _version(self, path: str, expected: bytes | None) -> str:
        """The version of ``path`` that was read; for a file not read through this object, its version now,
        provided it holds ``expected`` (where given)."""
        version = self._versions.get(path)
        if version is None:
            version = (await self._call("info", path))["ETag"]
            if expected is not None and await self.bytes_of(path) != expected:
                raise changed()
        return version

    # -- writes ------------------------------------------------------------------------------------------------

    async def replace_one(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        """One PUT that holds only while the object is the version read (no second read)."""
        condition = {"IfMatch": await self._version(path, expected)}
        if backup:
            await self.create_one(path + BACKUP_SUFFIX, expected)
        try:
            await self._call("pipe_file", path, data, **condition)
        except OSError as exc:
            if not refused_condition(exc):
                raise
            if await self.bytes_of(path) != data:  # a retry refused after the server acted: ours is there
                raise changed() from None

    async def create_one(self, path: str, data: bytes) -> None:
        """One PUT that holds only where no object exists; one that holds ``data`` already is no failure."""
        try:
            await self._call("pipe_file", path, data, IfNoneMatch="*")
        except OSError as exc:
            if not (isinstance(exc, FileExistsError) or refused_condition(exc)):
                raise
            await self.same_or_exists(path, data)

    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """One DELETE that holds only while the object is the version read (s3fs's rm_file passes no condition)."""
        if read is None and version is None:
            await super().remove_one(path, read)
            return
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

    # -- shards ----------------------------------------------------------------------------------------------

    async def read_source(self, path: str) -> tuple[bytes | None, str | None]:
        """A chunk object's bytes and its ETag, from one GET (None, None where there is none); a body cut short
        is asked for again, as s3fs's ``cat_file`` does (its retry loop)."""
        from s3fs.core import _error_wrapper

        bucket, key, _ = self.fs.split_path(path)

        async def get() -> tuple[bytes, str]:
            answer = await self.fs._call_s3("get_object", Bucket=bucket, Key=key)
            try:
                return bytes(await answer["Body"].read()), str(answer["ETag"])
            finally:
                answer["Body"].close()

        try:
            data, tag = await _error_wrapper(get, retries=self.fs.retries)
        except FileNotFoundError:
            return None, None
        return data, tag

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        """Each object's ETag, from listings of the key range each folder's paths span (a thousand keys a
        request: an array's chunks in a few requests, not a HEAD each); the rest from HEADs, where the range
        holds many more keys than were asked for."""
        names: dict[str, list[str]] = {}
        for path in paths:
            folder, name = path.rsplit("/", 1)
            names.setdefault(folder, []).append(name)
        listed = self.run({folder: self._listed_versions(folder, sorted(found)) for folder, found in names.items()})
        versions: dict[str, str | Exception | None] = {}
        for folder, result in listed.items():
            for name in names[folder]:
                versions[f"{folder}/{name}"] = result if isinstance(result, Exception) else result[name]
        return versions

    async def _listed_versions(self, folder: str, names: list[str]) -> dict[str, str | None]:
        bucket, prefix, _ = self.fs.split_path(folder)
        prefix = f"{prefix}/" if prefix else ""
        first, last = names[0], names[-1]
        # just before the first name (a key listed too early is left out), and at most a page per 100 names
        start = prefix + first[:-1] + (chr(ord(first[-1]) - 1) if first and first[-1] > "\0" else "")
        arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "StartAfter": start}
        found: dict[str, str] = {}
        complete = False
        for _ in range(max(1, len(names) // 100)):
            answer = await self.fs._call_s3("list_objects_v2", **arguments)
            page = {entry["Key"][len(prefix) :]: str(entry["ETag"]) for entry in answer.get("Contents", [])}
            found |= page
            if (page and max(page) >= last) or not answer.get("IsTruncated"):
                complete = True
                break
            arguments["ContinuationToken"] = answer["NextContinuationToken"]
        versions: dict[str, str | None] = {name: found.get(name) for name in names if name in found or complete}
        rest = [name for name in names if name not in versions]
        heads = await asyncio.gather(*(self.version_of(f"{folder}/{name}") for name in rest))
        return versions | dict(zip(rest, heads, strict=True))

    async def write_shard(self, shard: Shard, body: bytes) -> bool:
        """One PUT where no object exists (a first run: no request before it); where one does, kept if it holds
        the shard, else replaced only while it is the version found, where it may be. The body's MD5 goes with
        it for S3 to check (``Content-MD5``), and the ETag S3 answers is compared with it (where S3 makes it
        another, as with KMS, the object is read back). False where the object held the shard already."""
        bucket, key, _ = self.fs.split_path(shard.path)
        name = key.rsplit("/", 1)[-1]
        if len(body) > _LARGEST_PUT:
            raise ShardError(f"{name}: {len(body):,} bytes, more than S3 takes in one PUT: "
                             "a smaller shard_size makes smaller shards")  # fmt: skip
        md5 = hashlib.md5(body, usedforsecurity=False)
        tag = f'"{md5.hexdigest()}"'
        looked = not shard.replace  # a shard that may not be replaced is looked at first
        while True:
            condition: dict[str, str] = {"IfNoneMatch": "*"}
            if looked:
                try:
                    existing = await self._call("info", shard.path)
                except FileNotFoundError:
                    existing = None
                if existing is not None:
                    if existing.get("ETag") == tag or await self.bytes_of(shard.path) == body:
                        return False  # an earlier run's, or a retry's whose answer was lost
                    if not shard.replace:
                        raise ShardError(KEPT_SHARD)
                    condition = {"IfMatch": existing["ETag"]}
            self.fs.invalidate_cache(shard.path)
            condition["ContentMD5"] = base64.b64encode(md5.digest()).decode()
            try:
                answer = await self.fs._call_s3("put_object", Bucket=bucket, Key=key, Body=body, **condition)
            except OSError as exc:
                if not refused_condition(exc):
                    raise
                if looked:
                    raise ShardError(f"{name}: written by someone else meanwhile: left as it is") from None
                looked = True  # an object is there: an interrupted run's, or this PUT's retry found its first try's
                continue
            if answer.get("ETag") != tag and await self.bytes_of(shard.path) != body:
                raise ShardError(f"{name}: S3 stored other bytes than were sent (read back)")
            return True


_LARGEST_PUT = 5 * 2**30
"""The most bytes S3 takes in one PUT."""


def refused_condition(exc: OSError) -> bool:
    """Whether S3 refused a conditional write or removal (412 Precondition Failed), from the error s3fs raises."""
    response = getattr(exc.__cause__, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "PreconditionFailed"


def _add_key(folders: dict[str, Listing], root: str, entry: Mapping[str, Any], problems: list[tuple[str, str]]) -> int:
    """One key of a whole-store listing added to ``folders`` (by path), its folders with it; 1 if it names a
    node's metadata file."""
    relative = entry["name"][len(root) + 1 :]
    *names, file = relative.split("/")
    if "" in names:  # "a//b": no path reaches it (the keys below one such folder come together: one line)
        where = f"{root}/{'/'.join(names[: names.index('') + 1])}"
        if not problems or problems[-1][0] != where:
            problems.append((where, "a folder with an empty name: not visited"))
        return 0
    path = root
    for name in names:
        folders[path].subfolders.add(name)
        path = f"{path}/{name}"
        folders.setdefault(path, Listing())
    if file:  # "a/b/" is a folder marker, not a file
        folders[path].versions[file] = entry.get("ETag")
    return int(file in NODE_FILES)
