"""An object store's client through obstore (the Rust ``object_store`` client): its requests, one
path each, in the tools' time and words; what the listings and reads found of each metadata
object's version. The store's `Files` (`object_files`), its listings (`object_listing`), its lock
object (`object_lock`) and its packing (`object_packing`) are made of these.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from typing import Any, TypeVar

from .files import Folder
from .lease import LeaseHold, LockObject
from .listing import Listing, metadata_versions
from .options import StoreOptions
from .per_path import PerPath, Stat
from .requests import Requests, loop_thread

__all__ = ["ObjectClient", "first_line", "tag"]

_T = TypeVar("_T")


class ObjectClient(PerPath):
    """An obstore store's objects by ``container/key``: requests batched, ``jobs`` in flight, each
    write only while the run holds the store's lock."""

    def __init__(
        self, store: Any, container: str, root: str, options: StoreOptions, deadline: float | None
    ) -> None:
        super().__init__(options, deadline, loop_thread())
        self.store, self.container, self.root = store, container, root
        # the version (ETag) of each metadata object as the walk listed it, or as read where not
        # listed: what a replacement holds on
        self._versions: dict[str, str] = {}
        # the store's lock while a run holds it: every write checks it first
        self.hold = LeaseHold(self.lock_object)

    # -- requests ----------------------------------------------------------------------------------

    def key(self, path: str) -> str:
        """The object key of a path (``container/key``)."""
        return path[len(self.container) + 1 :]

    def run(
        self, work: Mapping[Any, Awaitable[_T]], limit: bool = True
    ) -> dict[Any, _T | Exception]:
        """As `Requests.run`, obstore's errors in one line each (what a report prints)."""
        return {
            path: _plain(result) if isinstance(result, Exception) else result
            for path, result in super().run(work, limit).items()
        }

    def ask(self, job: Awaitable[_T], plain: bool = True) -> _T:
        """One request in its time: what it returned; what it raised, raised (obstore's own error
        where not ``plain``, for the caller to tell its kind)."""
        answers = self.run({"": job}) if plain else Requests.run(self, {"": job})
        answer = answers[""]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def listing_of(self, folder: str) -> Any:
        """One folder's listing (its objects and the prefixes below it): one request."""
        import obstore

        return await obstore.list_with_delimiter_async(self.store, self.key(folder) or None)

    async def stat(self, path: str) -> Stat | None:
        """One HEAD."""
        import obstore

        try:
            head = await obstore.head_async(self.store, self.key(path))
        except FileNotFoundError:
            return None
        return Stat(int(head["size"]), tag(head["e_tag"]), head["last_modified"].timestamp())

    async def version_of(self, path: str) -> str | None:
        """An object's ETag (None where there is none): one HEAD."""
        found = await self.stat(path)
        return None if found is None else found.tag

    async def get(self, path: str) -> tuple[bytes, str]:
        """An object's bytes and ETag, from one GET."""
        import obstore

        answer = await obstore.get_async(self.store, self.key(path))
        return bytes(await answer.bytes_async()), tag(answer.meta["e_tag"])

    async def bytes_of(self, path: str) -> bytes:
        return (await self.get(path))[0]

    async def range_of(self, path: str, start: int, end: int) -> bytes:
        import obstore

        data = bytes(
            await obstore.get_range_async(self.store, self.key(path), start=start, end=end)
        )
        if len(data) != end - start:
            raise OSError(f"{path}: {start + len(data):,} bytes, not {end:,}")
        return data

    async def put(self, path: str, data: bytes, mode: Any, checked: bool = True) -> str:
        """``data`` put at ``path`` in ``mode`` (obstore's put modes); where ``checked``, only while
        this run holds the store's lock."""
        import obstore

        if checked:
            self.before_write()
        answer = await obstore.put_async(self.store, self.key(path), data, mode=mode)
        return tag(answer["e_tag"])

    async def put_in_parts(
        self, path: str, pieces: AsyncIterator[bytes], part_bytes: int, parts_at_once: int
    ) -> str:
        """``pieces`` put at ``path`` as one object, a multipart upload of parts of ``part_bytes``
        (``parts_at_once`` going up at once): whole or not at all, an object there replaced (its
        completion holds on no condition: for a temporary object of this run's own)."""
        import obstore

        self.before_write()
        answer = await obstore.put_async(
            self.store,
            self.key(path),
            pieces,
            mode="overwrite",
            chunk_size=part_bytes,
            max_concurrency=parts_at_once,
        )
        return tag(answer["e_tag"])

    async def stream(self, path: str, piece_bytes: int) -> AsyncIterator[bytes]:
        """An object's bytes, ``piece_bytes`` or so at a time."""
        import obstore

        answer = await obstore.get_async(self.store, self.key(path))
        async for piece in answer.stream(min_chunk_size=piece_bytes):
            yield bytes(piece)

    async def copy(self, source: str, path: str, overwrite: bool) -> None:
        """The object at ``source`` copied to ``path`` by the store; where not ``overwrite``, only
        where no object is (``AlreadyExistsError`` where one is)."""
        import obstore

        self.before_write()
        await obstore.copy_async(self.store, self.key(source), self.key(path), overwrite=overwrite)

    async def discard(self, path: str) -> None:
        """A temporary object of this run's own removed, whether or not the run holds the lock
        still (none other reads it)."""
        import obstore

        try:
            await obstore.delete_async(self.store, self.key(path))
        except FileNotFoundError:
            pass

    async def delete(self, path: str) -> None:
        """The object at ``path`` removed (none there: nothing to do), while the run holds the
        lock."""
        self.before_write()
        await self.discard(path)

    def found(self, listings: dict[str, Listing]) -> list[Folder]:
        """The folders of one batch of the walk; the versions of their metadata files kept (what
        their replacements hold on)."""
        self._versions.update(metadata_versions(listings))
        return [listing.folder(path) for path, listing in listings.items()]

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        return self.each_of(paths, self.version_of)

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """An Azure ETag is no digest of the bytes: it does not tell."""
        return None

    def key_ranges(self, names: list[str]) -> list[tuple[str | None, str | None]]:
        """The ranges of keys (from the first after ``after``, or the first, to ``until`` at
        least, or the last) that a folder is listed in, for its sorted ``names`` wanted: here the
        whole folder in one listing (a store that lists from an offset does better)."""
        return [(None, None)]

    def before_write(self) -> None:
        self.hold.check()

    @abstractmethod
    def lock_object(self, path: str) -> LockObject:
        """The lock object at ``path`` (`lease.LockObject`)."""


def tag(tag: str | None) -> str:
    """An ETag in quotes, as answers give it (Azure's listings leave the quotes out); an answer
    without one is an OSError (a version is what every condition holds on)."""
    if not tag:
        raise OSError("the store's answer gave no ETag")
    return '"' + tag.strip('"') + '"'


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _plain(exc: Exception) -> Exception:
    """obstore's error (several lines, a debug dump) as an OSError of its first line; others as
    they are."""
    if type(exc).__module__.startswith("obstore") and not isinstance(exc, FileNotFoundError):
        return OSError(first_line(exc))
    return exc
