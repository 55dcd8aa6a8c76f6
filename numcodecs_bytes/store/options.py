"""How a store is reached: one frozen value, validated once, that both tools and the command line
take."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JOBS", "REQUEST_TIMEOUT", "StoreOptions"]

JOBS = 64
"""Requests in flight on an object store by default: enough to hide a round trip of tens of
milliseconds."""
REQUEST_TIMEOUT = 60.0
"""Seconds a request to an object store may take, its retries included, by default."""


@dataclass(frozen=True)
class StoreOptions:
    """How the store tools reach a store.

    Parameters
    ----------
    jobs : int
        Requests in flight at most on an object store (S3, Azure) or an
        fsspec file system with async support.
    storage_options : mapping, optional
        How to reach a URL's store, as zarr and xarray take them: on S3 and
        Azure s3fs's and adlfs's names mapped to obstore's configuration
        (`store.cloud_options`; an option with no mapping is refused), for
        any other URL passed to fsspec.
    request_timeout : float
        Seconds each request to an object store may take, retries
        included; a file whose request takes longer is reported.
    run_timeout : float, optional
        Seconds the whole run may take (no limit by default): past it, the run
        stops between two batches with `problems.RunTimeoutError`, and
        requests end by then.
    server_copy : bool
        On S3, shards whose inner chunks are 5 MiB or more are assembled by
        S3 itself from the chunk objects (multipart uploads of
        ``UploadPartCopy`` parts): those chunks' bytes do not pass through
        this machine. False packs every shard through it, for servers
        that refuse such copies (a refusal is also detected, and the run
        goes on without).

    Raises
    ------
    ValueError
        For ``jobs`` below 1, a time that is not above 0 or not finite.

    Examples
    --------
    >>> options = StoreOptions(jobs=8, run_timeout=3600)
    >>> options.jobs, options.request_timeout, options.run_timeout, options.server_copy
    (8, 60.0, 3600, True)
    >>> StoreOptions(request_timeout=0)
    Traceback (most recent call last):
    ...
    ValueError: request_timeout must be a number of seconds above 0, got 0
    """

    jobs: int = JOBS
    storage_options: Mapping[str, Any] | None = field(default=None, hash=False)
    request_timeout: float = REQUEST_TIMEOUT
    run_timeout: float | None = None
    server_copy: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be a whole number of 1 or more, got {self.jobs!r}")
        for name in ("request_timeout", "run_timeout"):
            seconds = getattr(self, name)
            if name == "run_timeout" and seconds is None:
                continue
            number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
            if not number or not seconds > 0 or not math.isfinite(seconds):
                raise ValueError(f"{name} must be a number of seconds above 0, got {seconds!r}")
        if not isinstance(self.server_copy, bool):
            raise TypeError(f"server_copy must be True or False, got {self.server_copy!r}")
        if self.storage_options is not None and not isinstance(self.storage_options, Mapping):
            raise TypeError(
                f"storage_options must be a mapping, got {type(self.storage_options).__name__}"
            )
