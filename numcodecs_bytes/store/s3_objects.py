"""S3 through obstore (`object_files`), with what S3 adds: removals held on a version, reads of an
object's end in one request, ETags that are MD5s, and shards S3 assembles itself.

obstore makes every read, listing and write, with S3's own conditions on
the server (a new object only where none is; a metadata object replaced only
while it is the version listed or read). What obstore does not make goes
through botocore (`s3_api`): a removal held on the version listed or read
(``DeleteObject`` with ``If-Match``; a server that ignores it deletes
unconditionally, and the client cannot tell), and the shards whose inner
chunks S3 copies itself (`s3_copy`).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from ..problems import NotAStoreError
from .cloud_options import s3_location
from .files import Opened, changed, digest
from .lease import LockObject
from .object_client import tag
from .object_files import ObjectFiles, client_settings, made
from .object_lock import ObjectLock
from .options import StoreOptions
from .s3_api import ConditionRefused, S3Api
from .s3_copy import LIST_PAGE, S3Packing, bucket_key
from .s3_parts import is_md5

__all__ = ["S3Objects", "open_s3"]


def open_s3(url: str, options: StoreOptions, deadline: float | None) -> Opened:
    """The files at an S3 URL, its root (``bucket/path``), how to ask whether it is a store, and its
    packing (`s3_copy.S3Packing`).

    Raises `problems.NotAStoreError` where obstore is not installed, an option is not one S3 takes,
    or the bucket does not answer.
    """
    needs = f"{url}: S3 URLs need obstore and botocore: pip install 'numcodecs-bytes[cloud]'"
    if importlib.util.find_spec("botocore") is None:
        raise NotAStoreError(needs)
    try:
        from obstore.store import S3Store
    except ImportError:
        raise NotAStoreError(needs) from None
    location = made(url, lambda: s3_location(url, options))
    provider: dict[str, Any] = {}
    if (profile := location.profile) is not None:
        provider["credential_provider"] = made(url, lambda: _profile_credentials(profile))
    store = made(
        url,
        lambda: S3Store(
            location.bucket,
            # a copy where no object is: a multipart copy S3 completes with If-None-Match
            config={**location.config, "copy_if_not_exists": "multipart"},  # type: ignore[arg-type]
            **client_settings(options, location.client_options),
            **provider,
        ),
    )
    arguments = location.botocore
    if location.profile is not None:
        arguments["profile"] = location.profile
    api = S3Api(
        arguments,
        anonymous=bool(location.config.get("skip_signature")),
        jobs=options.jobs,
        timeout=options.request_timeout,
    )
    api.prepare()
    root = "/".join(filter(None, (location.bucket, location.path)))
    files = S3Objects(store, api, location.bucket, root, options, deadline)
    return Opened(files, root, files.probe(), S3Packing(files, api, options.server_copy))


def _profile_credentials(profile: str) -> Any:
    """obstore's credentials from a named AWS profile, read by boto3."""
    try:
        import boto3  # type: ignore[import-untyped]
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        raise ValueError(
            f"storage option profile ({profile}) needs boto3: pip install boto3"
        ) from None
    return Boto3CredentialProvider(boto3.Session(profile_name=profile))


class S3Objects(ObjectFiles):
    """An S3 bucket through obstore, and botocore for what obstore does not make."""

    def __init__(
        self,
        store: Any,
        api: S3Api,
        bucket: str,
        root: str,
        options: StoreOptions,
        deadline: float | None,
    ) -> None:
        self.api = api
        super().__init__(store, bucket, root, options, deadline)

    # -- reads -------------------------------------------------------------------------------------

    def tails(self, wanted: Mapping[str, int]) -> dict[str, tuple[int, bytes] | Exception]:
        """Each object's last bytes and its size, from one GET of a suffix range."""
        import obstore

        async def tail(path: str, size: int) -> tuple[int, bytes]:
            answer = await obstore.get_async(
                self.store, self.key(path), options={"range": {"suffix": size}}
            )
            data = bytes(await answer.bytes_async())
            total = int(answer.meta["size"])
            if len(data) != size:
                raise OSError(f"{path}: {total:,} bytes, fewer than {size:,}")
            return total, data

        return self.each_of(wanted.items(), lambda item: tail(*item), key=lambda item: item[0])

    def key_ranges(self, names: list[str]) -> list[tuple[str | None, str | None]]:
        """Ranges that hold `LIST_PAGE` of the sorted ``names`` each (a page each where
        they are all there; a range's last name is its bound), listed at once: an array of a
        million chunk objects in a few rounds of requests, not a thousand pages one after
        another."""
        bounds = names[LIST_PAGE - 1 :: LIST_PAGE - 1]
        return list(zip([None, *bounds], [*bounds, None], strict=True))

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """An ETag that is an MD5 (an object written in one request, without KMS) tells."""
        if is_md5(version):
            return version.strip('"') == hashlib.md5(data, usedforsecurity=False).hexdigest()
        return None

    # -- removals ----------------------------------------------------------------------------------

    async def remove_one(self, path: str, read: bytes | None, version: str | None = None) -> None:
        """One DELETE held on the version listed or read (``If-Match``); of an object not read
        through this object, on the version whose bytes are the ones read (``read``, a digest)."""
        if read is None and version is None:
            await self.delete(path)
            return
        if version is None:
            version = self._versions.get(path)
        if version is None:
            try:
                data, version = await self.get(path)
            except FileNotFoundError:
                return
            if read is not None and digest(data) != read:
                raise changed(": not removed")
        await self.delete_version(path, version)

    async def delete_version(self, path: str, version: str) -> None:
        """The object removed while it is ``version`` (gone already: no failure)."""
        self.before_write()
        try:
            await self.api.call("delete_object", IfMatch=version, **bucket_key(self, path))
        except FileNotFoundError:
            pass  # gone already (or removed by a retry whose answer was lost)
        except ConditionRefused:
            raise changed(": not removed") from None

    def lock_object(self, path: str) -> LockObject:
        return _S3Lock(self, path)


class _S3Lock(ObjectLock):
    """The lock object, removed only while it is the version this run wrote (``If-Match``)."""

    files: S3Objects

    def remove(self, version: str) -> None:
        async def remove() -> None:
            try:
                await self.files.api.call(
                    "delete_object", IfMatch=tag(version), **bucket_key(self.files, self.path)
                )
            except FileNotFoundError:
                pass  # gone already

        self.files.ask(remove())
