"""An object store through obstore (the Rust ``object_store`` client; Azure Blob Storage as it is,
S3 with what `s3_objects` adds) as `Files`.

Paths are ``container/key``. A new object is written only where none exists
(``If-None-Match: *``), and a metadata object is replaced only while it is the
version the walk listed or the run read (``If-Match`` on its ETag): the
server holds both conditions. A write whose answer was lost (the server
acted, then obstore's retry was refused) is read back before it is called a
conflict. obstore has no conditional delete: an object is checked just
before it is removed (a window of one request to a second writer), and a
shard is read back after it is written. The listings, the walk among them,
are `object_listing`'s; the lock object `object_lock`'s.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..problems import NotAStoreError
from .chunks import Packed, Shard
from .cloud_options import azure_location
from .files import BACKUP_SUFFIX, Folder, Listed, Probe, changed, digest
from .lease import LeaseHold, LockObject
from .listing import Listing, metadata_versions
from .object_listing import files_and_versions, tag, walk
from .object_lock import ObjectLock
from .options import StoreOptions
from .per_path import PerPath, Stat
from .requests import Requests, loop_thread

__all__ = ["ObjectFiles", "client_settings", "first_line", "made", "open_azure"]

_T = TypeVar("_T")


def open_azure(
    url: str, options: StoreOptions, deadline: float | None
) -> tuple[ObjectFiles, str, Probe]:
    """The files at an Azure URL, its root (``container/path``), and how to ask whether it is a
    store.

    Raises `problems.NotAStoreError` where obstore is not installed or an option is not one Azure
    takes.
    """
    try:
        from obstore.store import AzureStore
    except ImportError:
        raise NotAStoreError(
            f"{url}: Azure URLs need obstore: pip install 'numcodecs-bytes[cloud]'"
        ) from None
    location = made(url, lambda: azure_location(url, options))
    store = made(
        url,
        lambda: AzureStore(
            location.container,
            config=location.config,  # type: ignore[arg-type]
            **client_settings(options, location.client_options),
        ),
    )
    root = "/".join(filter(None, (location.container, location.path)))
    files = ObjectFiles(store, location.container, root, options, deadline)
    return files, root, files.probe()


def made(url: str, make: Callable[[], _T]) -> _T:
    """What ``make`` makes of a URL's location or store; what it refuses (a ValueError of ours,
    obstore's error for a configuration it cannot use) a `problems.NotAStoreError` of one line."""
    try:
        return make()
    except ValueError as exc:
        raise NotAStoreError(str(exc)) from None
    except Exception as exc:
        raise NotAStoreError(f"{url}: {first_line(exc)}") from None


def client_settings(options: StoreOptions, client_options: Mapping[str, Any]) -> dict[str, Any]:
    """obstore's client options and retries for a store opened with ``options``: its own limits a
    second past ``request_timeout``, so that the tools' own (`Requests.in_time`) decide, and say so
    in their words."""
    seconds = options.request_timeout + 1
    return {
        "client_options": {"timeout": f"{seconds}s", **client_options},
        "retry_config": {"max_retries": 10, "retry_timeout": datetime.timedelta(seconds=seconds)},
    }


class ObjectFiles(PerPath):
    """An obstore store (its container's objects by ``container/key``): requests batched, ``jobs``
    in flight."""

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

    def probe(self) -> Probe:
        """What opening a store asks: a folder is a key prefix some object has."""

        async def is_dir(path: str) -> bool:
            listing = await self.listing_of(path)
            return bool(listing["objects"] or listing["common_prefixes"]) or path == self.container

        async def names_in(folder: str) -> set[str]:
            listing = await self.listing_of(folder)
            return {entry["path"].rsplit("/", 1)[-1] for entry in listing["objects"]}

        def any_exists(paths: list[str]) -> bool:
            found = self.run({path: self.stat(path) for path in paths})
            if any(isinstance(answer, Stat) for answer in found.values()):
                return True
            for answer in found.values():
                if isinstance(answer, Exception):
                    raise answer
            return False

        return Probe(
            is_dir=lambda path: self.ask(is_dir(path)),
            any_exists=any_exists,
            names_in=lambda folder: self.ask(names_in(folder)),
        )

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
        (``parts_at_once`` going up at once): whole or not at all (an object there replaced)."""
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

    async def delete(self, path: str) -> None:
        import obstore

        self.before_write()
        try:
            await obstore.delete_async(self.store, self.key(path))
        except FileNotFoundError:
            pass

    # -- the walk ----------------------------------------------------------------------------------

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        """The whole store from one listing of all its keys where that pays (`listing.WholeStore`),
        else one folder a request, the folders of a level at once (`object_listing`)."""
        return walk(self, left_out)

    def found(self, listings: dict[str, Listing]) -> list[Folder]:
        """The folders of one batch of the walk; the versions of their metadata files kept (what
        their replacements hold on)."""
        self._versions.update(metadata_versions(listings))
        return [listing.folder(path) for path, listing in listings.items()]

    # -- reads -------------------------------------------------------------------------------------

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        async def read(path: str) -> bytes:
            data, tag = await self.get(path)
            self._versions.setdefault(path, tag)
            return data

        return self.each_of(paths, read)

    def tails(self, wanted: Mapping[str, int]) -> dict[str, tuple[int, bytes] | Exception]:
        async def tail(path: str, size: int) -> tuple[int, bytes]:
            # Azure takes no suffix range: the size first
            found = await self.stat(path)
            if found is None:
                raise FileNotFoundError(path)
            total = found.size
            if total < size:
                raise OSError(f"{path}: {total:,} bytes, fewer than {size:,}")
            return total, await self.range_of(path, total - size, total)

        return self.each_of(wanted.items(), lambda item: tail(*item), key=lambda item: item[0])

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        async def modified(path: str) -> float:
            found = await self.stat(path)
            if found is None:
                raise FileNotFoundError(path)
            if found.written is None:
                raise OSError("its store keeps no time it was written")
            return found.written

        return self.each_of(paths, modified)

    # -- writes ------------------------------------------------------------------------------------

    async def replace_one(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        """One PUT that holds only while the object is the version read."""
        from obstore.exceptions import PreconditionError

        version = self._versions.get(path)
        if version is None:  # not read through this object: its version now, if it holds that
            data_now, version = await self.get(path)
            if data_now != expected:
                raise changed()
        if backup:
            await self.create_one(path + BACKUP_SUFFIX, expected)
        try:
            self._versions[path] = await self.put(path, data, {"e_tag": version})
        except (PreconditionError, FileNotFoundError):
            # a retry refused after the server acted: ours is there
            if await self.bytes_or_none(path) != data:
                raise changed() from None

    async def create_one(self, path: str, data: bytes) -> None:
        """One PUT that holds only where no object exists; one that holds ``data`` already is no
        failure."""
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            await self.put(path, data, "create")
        except (AlreadyExistsError, PreconditionError):
            await self.same_or_exists(path, data)

    async def bytes_or_none(self, path: str) -> bytes | None:
        try:
            return await self.bytes_of(path)
        except FileNotFoundError:
            return None

    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """Checked just before (obstore has no conditional delete: a window of one request):
        removed only while it is the version read, or holds what was read."""
        if version is not None:
            now_version = await self.version_of(path)
            if now_version is None:
                return
            if now_version != version:
                raise changed(": not removed")
        if read is not None:
            now = await self.bytes_or_none(path)
            if now is None:
                return
            if digest(now) != read:
                raise changed(": not removed")
        await self.delete(path)

    # -- shards ------------------------------------------------------------------------------------

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        return self.each_of(paths, self.version_of)

    ETAGS_ARE_MD5 = False
    """Whether the store's ETag of an object written in one request is the MD5 of its bytes (and of
    a multipart upload, made of its parts' MD5s)."""

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """An Azure ETag is no digest of the bytes: it does not tell."""
        return None

    def parts_hold(self, version: str, part_md5s: list[str] | None) -> bool:
        """Whether a multipart upload's ETag says its parts were the bytes of these MD5s (hex);
        False where it does not tell (the object is then read back)."""
        return False

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        """Each shard's sources read (each chunk object with its ETag from the same GET, a byte
        range of an old shard held on that shard's ETag), the shard written and read back
        (`object_packing`): as many shards at once as `object_packing.MEMORY_BYTES` holds."""
        from .object_packing import MEMORY_BYTES, ShardMemory, pack_one

        shards = list(shards)
        memory = ShardMemory(MEMORY_BYTES)
        return self.pack_each(
            shards,
            lambda shard, requests, versions: pack_one(self, shard, requests, versions, memory),
            on_progress,
            shards_at_once=len(shards) or 1,
        )

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        return self.files_and_versions(folders, ())[0]

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """One listing of each folder gives both (`object_listing.files_and_versions`), in the
        ranges `key_ranges` gives."""
        return files_and_versions(self, folders, paths)

    def key_ranges(self, names: list[str]) -> list[tuple[str | None, str | None]]:
        """The ranges of keys (from the first after ``after``, or the first, to ``until`` at
        least, or the last) that a folder is listed in, for its sorted ``names`` wanted: here the
        whole folder in one listing (a store that lists from an offset does better)."""
        return [(None, None)]

    def tidy(self, folders: Iterable[str]) -> dict[str, Exception]:
        """Nothing: an object is written whole in one request (no temporary), and there are no
        folders."""
        return {}

    # -- the lock ----------------------------------------------------------------------------------

    def lock(self, top: str) -> AbstractContextManager[None]:
        """One run at a time on the store whose topmost node is ``top``: a lock object there
        (`lease.LOCK_NAME`), held by a lease (`lease.LeaseHold`)."""
        return self.hold.during(top)

    def before_write(self) -> None:
        self.hold.check()

    def lock_object(self, path: str) -> LockObject:
        """The lock object at ``path``."""
        return ObjectLock(self, path)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _plain(exc: Exception) -> Exception:
    """obstore's error (several lines, a debug dump) as an OSError of its first line; others as
    they are."""
    if type(exc).__module__.startswith("obstore") and not isinstance(exc, FileNotFoundError):
        return OSError(first_line(exc))
    return exc
