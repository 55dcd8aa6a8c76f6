"""Opening a URL: Azure's through obstore (`object_files`), any other through the file system fsspec
gives for it, as `Files` (S3's own where it is S3)."""

from __future__ import annotations

from urllib.parse import urlsplit

from ..problems import NotAStoreError
from .files import Files, Probe
from .fsspec_files import FsspecFiles
from .options import StoreOptions
from .s3 import S3Files

__all__ = ["AZURE_SCHEMES", "open_remote"]

AZURE_SCHEMES = ("az", "abfs", "abfss", "azure")
"""The URLs of Azure Blob Storage, opened through obstore (adlfs's and obstore's spellings)."""


def open_remote(
    url: str, options: StoreOptions, deadline: float | None
) -> tuple[Files, str, Probe]:
    """The files at ``url``, its root, and how to ask whether it is a store (one request per
    question).

    Raises `problems.NotAStoreError` where fsspec cannot open it (a package not installed, a URL it
    refuses).
    """
    if urlsplit(url).scheme in AZURE_SCHEMES:
        from .object_files import open_azure

        return open_azure(url, options, deadline)
    fsspec_options = dict(options.storage_options or {})
    if urlsplit(url).scheme in ("s3", "s3a") and "config_kwargs" not in fsspec_options:
        # botocore's default pool holds 10
        fsspec_options["config_kwargs"] = {"max_pool_connections": options.jobs}
    try:
        import fsspec

        fs, url_root = fsspec.core.url_to_fs(url, **fsspec_options)
    except ImportError as exc:
        raise NotAStoreError(
            f"{url}: this URL needs a package that is not installed ({exc})"
        ) from None
    # each file system fails in its own words (a missing zip, a tar that is none)
    except Exception as exc:
        raise NotAStoreError(
            f"{url}: not a URL fsspec can open ({type(exc).__name__}: {exc})"
        ) from None
    root = url_root.rstrip("/")
    # fsspec shares one instance per URL in a process, with the folder listings it made: a store
    # changed since (by another writer, or by the caller) must be seen as it is now. A path's
    # invalidation keeps the listings below it: all go.
    fs.invalidate_cache()
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    # s3fs passes If-None-Match and If-Match on
    kind = S3Files if "s3" in protocols else FsspecFiles
    files = kind(fs, root, options, deadline)
    probe = Probe(
        is_dir=lambda path: bool(files.ask("isdir", path)),
        any_exists=lambda paths: _any_exists(files, paths),
        names_in=lambda folder: {
            entry.rstrip("/").rsplit("/", 1)[-1] for entry in files.ask("ls", folder, detail=False)
        },
    )
    return files, root, probe


def _any_exists(files: FsspecFiles, paths: list[str]) -> bool:
    """Whether any of ``paths`` exists, their requests made at once; where none is known to, the
    first request's failure raised."""
    found = files.run({path: files.holds(path) for path in paths})
    if any(answer is True for answer in found.values()):
        return True
    for answer in found.values():
        if isinstance(answer, Exception):
            raise answer
    return False
