"""An object store through obstore (the Rust ``object_store`` client; Azure Blob Storage here) as
`Files`.

Paths are ``container/key``. A new object is written only where none exists
(``If-None-Match: *``), and a metadata object is replaced only while it is the
version the walk listed or the run read (``If-Match`` on its ETag): the
server holds both conditions. A write whose answer was lost (the server
acted, then obstore's retry was refused) is read back before it is called a
conflict. obstore has no conditional delete: an object is checked just
before it is removed (a window of one request to a second writer), and a
shard is read back after it is written. The walk lists one folder a request,
the folders of a level at once.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..problems import NotAStoreError
from .chunks import (
    Packed,
    Shard,
)
from .cloud_options import azure_location
from .files import (
    BACKUP_SUFFIX,
    BATCH,
    Folder,
    Listed,
    Probe,
    breadth_first,
    changed,
    digest,
)
from .fsspec_files import child_path
from .lease import LeaseHold, LockHeld, LockLost, LockObject, LockRead
from .listing import Listing, WholeStore, metadata_versions
from .options import StoreOptions
from .per_path import PerPath, Stat
from .requests import Requests, loop_thread

__all__ = [
    "ListedObject",
    "ObjectFiles",
    "ObjectLock",
    "client_settings",
    "first_line",
    "keys_in",
    "made",
    "open_azure",
    "tag",
]

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
            listing = await self._listing(path)
            return bool(listing["objects"] or listing["common_prefixes"]) or path == self.container

        async def names_in(folder: str) -> set[str]:
            listing = await self._listing(folder)
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

    async def _listing(self, folder: str) -> Any:
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
        else one folder a request, the folders of a level at once."""
        whole = self._whole_store()
        if whole is None:
            return breadth_first(self.root, self._listed_batch, child_path, left_out)

        def listed(paths: list[str]) -> Listed:
            return Listed(self._found({path: whole.folders.pop(path) for path in paths}), [])

        return breadth_first(self.root, listed, child_path, left_out, whole.problems)

    def _whole_store(self) -> WholeStore | None:
        import obstore

        whole = WholeStore(self.root, self.jobs)
        prefix = self.key(self.root)

        async def listing() -> bool:
            pages = obstore.list(self.store, f"{prefix}/" if prefix else None, chunk_size=BATCH)
            while True:
                try:
                    page = await self.in_time(anext(pages))
                except StopAsyncIteration:
                    return True
                for entry in page:
                    if not whole.add(_listed_path(self.container, entry), _listed(entry)):
                        return False

        # each page in its time, not the whole listing; whatever stops it, listing folder by
        # folder reports per folder
        pays = self.run({"": listing()}, limit=False)[""]
        return whole if pays is True else None

    def _listed_batch(self, paths: list[str]) -> Listed:
        listings = self.run({path: self._listing(path) for path in paths})
        found: dict[str, Listing] = {}
        unvisited: list[tuple[str, str]] = []
        for path in paths:
            answer = listings[path]
            if isinstance(answer, Exception):
                unvisited.append((path, f"folder not read: {answer}"))
                continue
            found[path] = listing = Listing()
            for entry in answer["objects"]:
                if entry["path"] == self.key(path):
                    continue  # the folder's own marker ("folder/", as consoles make one)
                name = entry["path"].rsplit("/", 1)[-1]
                listing.versions[name] = _listed(entry)
            listing.subfolders.update(
                prefix.rstrip("/").rsplit("/", 1)[-1] for prefix in answer["common_prefixes"]
            )
        return Listed(self._found(found), unvisited)

    def _found(self, listings: dict[str, Listing]) -> list[Folder]:
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
        """One listing of each folder gives both: its keys, each with its ETag (the versions of
        paths below none of the folders from HEADs). A folder is listed in the ranges of keys
        `key_ranges` gives for the names of ``paths`` below it, the ranges at once."""
        below: dict[str, list[str]] = {folder: [] for folder in folders}
        elsewhere = []
        for path in paths:
            folder = next((f for f in _folders_above(path) if f in below), None)
            if folder is None:
                elsewhere.append(path)
            else:
                below[folder].append(path[len(folder) + 1 :])
        ranges = {
            (folder, place): bounds
            for folder, names in below.items()
            for place, bounds in enumerate(self.key_ranges(sorted(names)))
        }
        listed = self.run(
            {key: keys_in(self, key[0], after, until) for key, (after, until) in ranges.items()}
        )
        keys: dict[str, dict[str, ListedObject] | Exception] = {folder: {} for folder in below}
        for (folder, _), found in listed.items():
            held = keys[folder]
            if isinstance(found, Exception):
                keys[folder] = found
            elif not isinstance(held, Exception):
                held |= found[0]
        names: dict[str, list[str] | Exception] = {}
        versions: dict[str, str | Exception | None] = {}
        for folder, held in keys.items():
            names[folder] = held if isinstance(held, Exception) else sorted(held)
            for name in below[folder]:
                found_here = held if isinstance(held, Exception) else held.get(name)
                versions[f"{folder}/{name}"] = (
                    found_here[0] if isinstance(found_here, tuple) else found_here
                )
        return names, versions | (self.versions(elsewhere) if elsewhere else {})

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


class ObjectLock:
    """The lock object through obstore: its age from the time the server says it was written, by
    this machine's clock (obstore does not give the server's own)."""

    def __init__(self, files: ObjectFiles, path: str) -> None:
        self.files, self.path = files, path

    def create(self, body: bytes) -> str:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            return self.files.ask(
                self.files.put(self.path, body, "create", checked=False), plain=False
            )
        except (AlreadyExistsError, PreconditionError):
            raise LockHeld from None

    def replace(self, body: bytes, tag: str) -> str:
        from obstore.exceptions import PreconditionError

        try:
            return self.files.ask(
                self.files.put(self.path, body, {"e_tag": tag}, checked=False), plain=False
            )
        except (PreconditionError, FileNotFoundError):
            raise LockLost from None

    def read(self) -> LockRead:
        import obstore

        async def get() -> LockRead:
            answer = await obstore.get_async(self.files.store, self.files.key(self.path))
            body = bytes(await answer.bytes_async())
            now = datetime.datetime.now(datetime.UTC)
            age = (now - answer.meta["last_modified"]).total_seconds()
            return LockRead(body, tag(answer.meta["e_tag"]), age)

        return self.files.ask(get())

    def remove(self, tag: str) -> None:
        async def remove() -> None:
            if await self.files.version_of(self.path) == tag:
                await self.files.delete(self.path)

        self.files.ask(remove())


def tag(tag: str | None) -> str:
    """An ETag in quotes, as answers give it (Azure's listings leave the quotes out); an answer
    without one is an OSError (a version is what every condition holds on)."""
    if not tag:
        raise OSError("the store's answer gave no ETag")
    return '"' + tag.strip('"') + '"'


ListedObject = tuple[str, int]  # an object's ETag and size, as listed


async def keys_in(
    files: ObjectFiles,
    folder: str,
    after: str | None,
    until: str | None,
    pages: int | None = None,
) -> tuple[dict[str, ListedObject], bool]:
    """The keys below ``folder`` from ``after`` (the first where None; a few before it may come
    too) up to ``until`` at least (to the last where None), by their names relative to it: ETag
    and size; at most ``pages`` pages of a thousand (no limit where None), and whether they
    reached ``until`` (or the last key)."""
    import obstore

    prefix = files.key(folder)
    prefix = f"{prefix}/" if prefix else ""
    # where the listing starts: before ``after`` (obstore takes no key with an empty part)
    offset = None if after is None else (prefix + after[:-1]).rstrip("/") or None
    found: dict[str, ListedObject] = {}
    asked = 0
    async for page in obstore.list(files.store, prefix or None, offset=offset, chunk_size=1000):
        asked += 1
        batch = {
            entry["path"][len(prefix) :]: (tag(entry["e_tag"]), int(entry["size"]))
            for entry in page
        }
        found |= batch
        if until is not None and batch and max(batch) >= until:
            return found, True
        if pages is not None and asked >= pages:
            return found, False
    return found, True


def _folders_above(path: str) -> Iterator[str]:
    """The folders above an object's path, nearest first."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path


def _listed_path(container: str, entry: Mapping[str, Any]) -> str:
    """A listed object's path; an empty one's as a folder (``a/b/``): obstore lists the marker
    ``a/b/`` that consoles make for a folder as ``a/b``, and no Zarr file is empty."""
    path = f"{container}/{entry['path']}"
    return f"{path}/" if entry["size"] == 0 else path


def _listed(entry: Mapping[str, Any]) -> str | None:
    """The ETag of a listing's entry (None where it gives none)."""
    return tag(entry["e_tag"]) if entry.get("e_tag") else None


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _plain(exc: Exception) -> Exception:
    """obstore's error (several lines, a debug dump) as an OSError of its first line; others as
    they are."""
    if type(exc).__module__.startswith("obstore") and not isinstance(exc, FileNotFoundError):
        return OSError(first_line(exc))
    return exc
