"""The lock object of a store reached through obstore: the four requests a lease makes of it
(`lease.LockObject`)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from .lease import LockHeld, LockLost, LockRead
from .object_client import tag

if TYPE_CHECKING:
    from .object_client import ObjectClient

__all__ = ["ObjectLock"]


class ObjectLock:
    """The lock object through obstore: its age from the time the server says it was written, by
    this machine's clock (obstore does not give the server's own). Removed where it is the version
    written, checked just before (obstore has no conditional delete; S3's own: `s3_objects`)."""

    def __init__(self, files: ObjectClient, path: str) -> None:
        self.files, self.path = files, path

    def create(self, body: bytes) -> str:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            return self.files.ask(
                self.files.put(self.path, body, "create", checked=False), plain=False
            )
        except (AlreadyExistsError, PreconditionError):
            raise LockHeld from None

    def replace(self, body: bytes, version: str) -> str:
        from obstore.exceptions import PreconditionError

        try:
            return self.files.ask(
                self.files.put(self.path, body, {"e_tag": version}, checked=False), plain=False
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

    def remove(self, version: str) -> None:
        async def remove() -> None:
            if await self.files.version_of(self.path) == version:
                await self.files.delete(self.path)

        self.files.ask(remove())
