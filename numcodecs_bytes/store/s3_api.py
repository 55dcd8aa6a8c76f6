"""S3's own requests that obstore does not make, through botocore: a copy of a byte range into a
part (``UploadPartCopy``), a removal held on a version (``DeleteObject`` with ``If-Match``), the
multipart uploads made part by part, listed and aborted.

botocore is imported, and its client made, on a thread while the run waits
for its first answers (`S3Api.prepare`), or else on the first such request;
each request runs on a thread of a pool of ``jobs`` (botocore's client is
thread-safe, and blocking).
Its errors are the store tools' own: a refused condition `ConditionRefused`,
a missing object or upload `FileNotFoundError`, a request the server does
not implement an `OSError` of ``errno.ENOSYS``, any other an `OSError` of
one line.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

__all__ = ["ConditionRefused", "S3Api"]


class ConditionRefused(OSError):
    """S3 refused a conditional request (412 Precondition Failed): the object is not the version
    named, or is there where none was to be."""


_MISSING = {"NoSuchKey", "NoSuchUpload", "NoSuchBucket", "404"}
_NOT_IMPLEMENTED = {"NotImplemented", "501"}


class S3Api:
    """botocore's S3 client for one store, made on first use: ``await api.call("method", ...)``."""

    def __init__(
        self, client_arguments: Mapping[str, Any], anonymous: bool, jobs: int, timeout: float
    ) -> None:
        self._arguments = dict(client_arguments)
        self._anonymous, self._jobs, self._timeout = anonymous, jobs, timeout
        self._client: Any = None
        self._made = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="s3-api")

    def prepare(self) -> None:
        """botocore imported and its client made on a thread of the pool, from now on: while the
        run waits for its first answers (every run makes a request of botocore: its lock's
        removal, at least)."""
        self._pool.submit(self._made_client)

    def _made_client(self) -> Any:
        with self._made:
            if self._client is None:
                import botocore.session
                from botocore import UNSIGNED
                from botocore.config import Config

                config = Config(
                    max_pool_connections=self._jobs,
                    connect_timeout=self._timeout,
                    read_timeout=self._timeout,
                    retries={"mode": "standard"},
                    signature_version=UNSIGNED if self._anonymous else None,
                )
                arguments = dict(self._arguments)
                session = botocore.session.Session(profile=arguments.pop("profile", None))
                self._client = session.create_client("s3", config=config, **arguments)
            return self._client

    async def call(self, method: str, **arguments: Any) -> Any:
        """One request (botocore's retries included): its answer, or the error it is."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, partial(self._call, method, arguments))

    def _call(self, method: str, arguments: dict[str, Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._made_client(), method)(**arguments)
        except ClientError as exc:
            raise _error(exc) from None
        except BotoCoreError as exc:
            raise OSError(str(exc)) from None


def _error(exc: Any) -> OSError:
    """A botocore `ClientError` as the store tools' error of its kind."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = f"{code or status}: {error.get('Message') or exc}"
    if code == "PreconditionFailed" or status == 412:
        return ConditionRefused(message)
    if code in _MISSING or status == 404:
        return FileNotFoundError(message)
    if code in _NOT_IMPLEMENTED or status == 501:
        return OSError(errno.ENOSYS, message)
    return OSError(message)
