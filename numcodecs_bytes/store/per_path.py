"""The batch methods of `Files` that a network backend makes of a request or a few per path:
each backend (`fsspec_files`, `object_files`) gives the one-path coroutines, this class the
batches, `BATCH` paths at a time, ``jobs`` requests in flight (`requests.Requests`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .files import Removal, Replacement, digest, failures
from .requests import Requests
from .shard_format import ByteRange

__all__ = ["PerPath", "Stat", "content_version", "info_version"]


class Stat(NamedTuple):
    """What a file's metadata says of it: its size, its ETag (None where its file system keeps
    none), when it was last written (None where unknown)."""

    size: int
    tag: str | None
    written: float | None


def content_version(data: bytes) -> str:
    """The version of a file whose file system keeps no ETag: the digest of its bytes."""
    return "sha256:" + digest(data).hex()


def info_version(info: Mapping[str, Any]) -> str | None:
    """A file's version as its ``info`` tells it (an ETag), None where it tells none."""
    tag = info.get("ETag")
    return str(tag) if tag else None


class PerPath(Requests, ABC):
    """`Files`' reads, writes, removals and `held` of a network backend, from its one-path
    coroutines: `bytes_of`, `range_of`, `stat`, `replace_one`, `create_one`, `remove_one` (and
    `tails` and `modified` from `stat`)."""

    @abstractmethod
    async def bytes_of(self, path: str) -> bytes:
        """A file's bytes (FileNotFoundError where there is none)."""

    @abstractmethod
    async def range_of(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of a file; an OSError where it holds fewer."""

    @abstractmethod
    async def stat(self, path: str) -> Stat | None:
        """What a file's metadata says of it; None where there is no such file."""

    @abstractmethod
    async def replace_one(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        """A `Replacement`."""

    @abstractmethod
    async def create_one(self, path: str, data: bytes) -> None:
        """A new file (see `Files.create`)."""

    @abstractmethod
    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """A `Removal`."""

    def tails(self, wanted: Mapping[str, int]) -> dict[str, tuple[int, bytes] | Exception]:
        """Each file's last bytes and its size: its size first (`stat`), then a range (a store that
        reads a suffix in one request does better)."""

        async def tail(path: str, size: int) -> tuple[int, bytes]:
            found = await self.stat(path)
            if found is None:
                raise FileNotFoundError(path)
            if found.size < size:
                raise OSError(f"{path}: {found.size:,} bytes, fewer than {size:,}")
            return found.size, await self.range_of(path, found.size - size, found.size)

        return self.each_of(wanted.items(), lambda item: tail(*item), key=lambda item: item[0])

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        """When each file was last written (`stat`)."""

        async def modified(path: str) -> float:
            found = await self.stat(path)
            if found is None:
                raise FileNotFoundError(path)
            if found.written is None:
                raise OSError("its store keeps no time it was written")
            return found.written

        return self.each_of(paths, modified)

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        async def read(path: str) -> bytes | None:
            try:
                return await self.bytes_of(path)
            except FileNotFoundError:
                return None

        return self.each_of(paths, read)

    def read_ranges(self, ranges: Iterable[ByteRange]) -> dict[ByteRange, bytes | Exception]:
        return self.each_of(ranges, lambda wanted: self.range_of(*wanted))

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        return failures(
            self.each_of(replacements, lambda r: self.replace_one(*r), key=lambda r: r.path)
        )

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        return failures(
            self.each_of(
                files.items(), lambda item: self.create_one(*item), key=lambda item: item[0]
            )
        )

    async def same_or_exists(self, path: str, data: bytes) -> None:
        """A file found where ``data`` was to be created: no failure where it holds ``data`` (an
        earlier run's, or a retry after the server acted); else FileExistsError."""
        try:
            same = await self.bytes_of(path) == data
        except OSError:
            same = False
        if not same:
            raise FileExistsError(
                f"{path.rsplit('/', 1)[-1]} exists already: not overwritten"
            ) from None

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        return failures(self.each_of(removals, lambda r: self.remove_one(*r), key=lambda r: r.path))
