"""Any fsspec file system as `Files`: requests batched, up to ``jobs`` in flight on an async one,
each in its time.

The walk lists the folders of one level together. An object store replaces
an object in one PUT: readers see the old or the new one. Here a file is
checked just before it is replaced or removed (a window of one request to a
second writer); on S3 (`s3`) the server holds the condition instead. No
request waits for ever: each has ``request_timeout`` seconds (retries
included), and a run as a whole ``run_timeout`` if set.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext, suppress
from datetime import datetime
from typing import Any, TypeVar

from .files import (
    BACKUP_SUFFIX,
    Folder,
    Listed,
    breadth_first,
    changed,
    digest,
)
from .listing import Listing, folders_listed
from .options import StoreOptions
from .per_path import PerPath, Stat, content_version, info_version

__all__ = ["FsspecFiles"]

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)
_I = TypeVar("_I")


class FsspecFiles(PerPath):
    """Any fsspec file system; an async one (s3fs, gcsfs, adlfs, http) with up to ``jobs`` requests
    in flight."""

    def __init__(self, fs: Any, root: str, options: StoreOptions, deadline: float | None) -> None:
        import fsspec.asyn

        loop = fs.loop if fs.async_impl else fsspec.asyn.get_loop()
        super().__init__(options, deadline, loop, fsspec.asyn.sync)
        self.fs, self.root = fs, root.rstrip("/")
        # s3fs 2026.9 (not 2024.6) asks an object's size, one more request, before reading it whole
        # (to read a large one in parts) unless told to read it in one.
        reader = getattr(fs, "_cat_file" if fs.async_impl else "cat_file")
        self._whole_read = (
            {"max_concurrency": 1}
            if "max_concurrency" in inspect.signature(reader).parameters
            else {}
        )

    # -- requests ----------------------------------------------------------------------------------

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The file system's ``method``: awaited where it is async, called where not (one at a
        time)."""
        if self.fs.async_impl:
            return await getattr(self.fs, f"_{method}")(*args, **kwargs)
        return getattr(self.fs, method)(*args, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """The file system's ``method`` as a request not made yet, for `run` to make with
        others."""
        return self._call(method, *args, **kwargs)

    async def holds(self, path: str) -> bool:
        """Whether there is something at ``path`` (fsspec's ``exists``: a file or a folder)."""
        return bool(await self._call("exists", path))

    def ask(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One request (the file system's ``method``) in its time: what it returned; what it raised,
        raised."""
        answer = self.run({"": self._call(method, *args, **kwargs)})[""]
        if isinstance(answer, Exception):
            raise answer
        return answer

    # -- the walk ----------------------------------------------------------------------------------

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        return breadth_first(self.root, self._listed_batch, child_path, left_out)

    def found(self, listings: dict[str, Listing]) -> list[Folder]:
        """The folders of one batch of the walk, by path."""
        return [listing.folder(path) for path, listing in listings.items()]

    def _listed_batch(self, paths: list[str]) -> Listed:
        """The folders at ``paths``, listed together (see `found`)."""

        def listing(path: str, entries: Any) -> Listing:
            folder = Listing()
            for entry in entries:
                if entry["name"].rstrip("/") == path:  # some file systems list a folder in itself
                    continue
                name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                if entry["type"] == "directory":
                    folder.subfolders.add(name)
                else:
                    folder.versions[name] = entry.get("ETag")
            return folder

        answers = self.run({path: self._call("ls", path, detail=True) for path in paths})
        found, unvisited = folders_listed(answers, listing)
        return Listed(self.found(found), unvisited)

    # -- reads -------------------------------------------------------------------------------------

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        return self.each_of(paths, self.bytes_of)

    async def bytes_of(self, path: str) -> bytes:
        return bytes(await self._call("cat_file", path, **self._whole_read))

    def before_write(self) -> None:
        """Called before each request that writes or removes a file: nothing here (on S3, the run's
        lease on the store checked)."""

    async def replace_one(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        """Checked just before: replaced only if it holds what was read (a window of one
        request)."""
        self.before_write()
        if await self.bytes_of(path) != expected:
            raise changed()
        if backup:
            await self.create_one(path + BACKUP_SUFFIX, expected)
        await self._call("pipe_file", path, data)

    async def create_one(self, path: str, data: bytes) -> None:
        """Written where none exists (checked just before); one that holds ``data`` already is no
        failure."""
        self.before_write()
        if await self._call("exists", path):
            await self.same_or_exists(path, data)
            return
        try:
            await self._call("pipe_file", path, data)
        except FileExistsError:
            await self.same_or_exists(path, data)

    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """Checked just before (a window of one request): removed only if it holds what was read (or
        is the version read)."""
        self.before_write()
        if version is not None and await self.version_of(path) not in (version, None):
            raise changed(": not removed")
        if read is not None:
            try:
                unchanged = digest(await self.bytes_of(path)) == read
            except FileNotFoundError:
                return
            if not unchanged:
                raise changed(": not removed")
        try:
            await self._call("rm_file", path)
        except FileNotFoundError:
            pass

    # -- shards ------------------------------------------------------------------------------------

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        return self.each_of(paths, self.version_of)

    async def version_of(self, path: str) -> str | None:
        """A file's version: its ETag where the file system keeps one, else the digest of its bytes
        (a time written may be too coarse to tell two writes apart, and some file systems keep
        none)."""
        try:
            info = await self._call("info", path)
            return info_version(info) or content_version(await self.bytes_of(path))
        except FileNotFoundError:
            return None

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """Where the version is the digest of the file's bytes (its file system keeps no ETag),
        whether ``data`` has it; an ETag does not tell here (`s3` knows S3's)."""
        return version == content_version(data) if version.startswith("sha256:") else None

    async def range_of(self, path: str, start: int, end: int) -> bytes:
        data = bytes(await self._call("cat_file", path, start=start, end=end))
        if len(data) != end - start:
            raise OSError(f"{path}: {start + len(data):,} bytes, not {end:,}")
        return data

    async def stat(self, path: str) -> Stat | None:
        try:
            info = await self._call("info", path)
        except FileNotFoundError:
            return None
        return Stat(int(info["size"]), info_version(info), _written(info))

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        async def below(folder: str) -> list[str]:
            found = await self._call("find", folder)
            return [path[len(folder) + 1 :] for path in found if path.startswith(f"{folder}/")]

        return self.each_of(folders, below)

    def lock(self, top: str) -> AbstractContextManager[None]:
        """No lock on an object store: its writes are conditional instead (on S3), or checked just
        before."""
        return nullcontext()


def _written(info: Mapping[str, Any]) -> float | None:
    """When a file was last written, from what ``info`` says of it (seconds since the epoch); None
    where it does not say."""
    for key in ("LastModified", "mtime", "last_modified", "created"):  # S3, local and others, ...
        when = info.get(key)
        if isinstance(when, datetime):
            return when.timestamp()
        if isinstance(when, int | float) and not isinstance(when, bool):
            return float(when)
        if isinstance(when, str):
            with suppress(ValueError):
                return datetime.fromisoformat(when).timestamp()
    return None


def child_path(folder: Folder, name: str) -> str:
    """The path of a subfolder of ``folder`` on an object store."""
    return f"{folder.path}/{name}"
