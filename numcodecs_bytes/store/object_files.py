"""An object store through obstore (the Rust ``object_store`` client; Azure Blob Storage as it is,
S3 with what `s3_objects` adds) as `Files`.

Paths are ``container/key``. A new object is written only where none exists
(``If-None-Match: *``), and a metadata object is replaced only while it is the
version the walk listed or the run read (``If-Match`` on its ETag): the
server holds both conditions. A write whose answer was lost (the server
acted, then obstore's retry was refused) is read back before it is called a
conflict. obstore has no conditional delete: an object is checked just
before it is removed (a window of one request to a second writer), and a
shard is read back after it is written. The requests are `object_client`'s,
the listings (the walk among them) `object_listing`'s, the lock object
`object_lock`'s.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..problems import NotAStoreError
from .cloud_options import azure_location
from .files import BACKUP_SUFFIX, Listed, Opened, Probe, changed, digest
from .lease import LockObject
from .object_client import ObjectClient, first_line
from .object_listing import files_and_versions, walk
from .object_lock import ObjectLock
from .options import StoreOptions
from .per_path import Stat

__all__ = ["ObjectFiles", "client_settings", "made", "open_azure"]

_T = TypeVar("_T")


def open_azure(url: str, options: StoreOptions, deadline: float | None) -> Opened:
    """The files at an Azure URL, its root (``container/path``), how to ask whether it is a store,
    and its packing (`object_packing.ObjectPacking`).

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
    from .object_packing import ObjectPacking

    return Opened(files, root, files.probe(), ObjectPacking(files))


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


class ObjectFiles(ObjectClient):
    """An obstore store as `Files` (its container's objects by ``container/key``): requests
    batched, ``jobs`` in flight."""

    def probe(self) -> Probe:
        """What opening a store asks: a folder is a key prefix some object has. A folder is listed
        once for both questions (whether it is one, and the names in it: a round trip each)."""
        listed: dict[str, Any] = {}

        async def listing(folder: str) -> Any:
            if folder not in listed:
                listed[folder] = await self.listing_of(folder)
            return listed[folder]

        async def is_dir(path: str) -> bool:
            found = await listing(path)
            return bool(found["objects"] or found["common_prefixes"]) or path == self.container

        async def names_in(folder: str) -> set[str]:
            return {
                entry["path"].rsplit("/", 1)[-1] for entry in (await listing(folder))["objects"]
            }

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

    # -- the walk ----------------------------------------------------------------------------------

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        """The whole store from one listing of all its keys where that pays (`listing.WholeStore`),
        else one folder a request, the folders of a level at once (`object_listing`)."""
        return walk(self, left_out)

    # -- reads -------------------------------------------------------------------------------------

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        async def read(path: str) -> bytes:
            data, tag = await self.get(path)
            self._versions.setdefault(path, tag)
            return data

        return self.each_of(paths, read)

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

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        return files_and_versions(self, folders, ())[0]

    # -- the lock ----------------------------------------------------------------------------------

    def lock(self, top: str) -> AbstractContextManager[None]:
        """One run at a time on the store whose topmost node is ``top``: a lock object there
        (`lease.LOCK_NAME`), held by a lease (`lease.LeaseHold`)."""
        return self.hold.during(top)

    def lock_object(self, path: str) -> LockObject:
        """The lock object at ``path``."""
        return ObjectLock(self, path)
