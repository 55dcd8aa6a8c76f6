"""Opening a URL: S3's and Azure's through obstore (`s3_objects`, `object_files`), any other through
the file system fsspec gives for it, as `Files`."""

from __future__ import annotations

from urllib.parse import urlsplit

from ..problems import NotAStoreError
from .files import Opened, Probe
from .fsspec_files import FsspecFiles
from .options import StoreOptions

__all__ = ["AZURE_SCHEMES", "S3_SCHEMES", "open_remote"]

AZURE_SCHEMES = ("az", "abfs", "abfss", "azure")
"""The URLs of Azure Blob Storage, opened through obstore (adlfs's and obstore's spellings)."""
S3_SCHEMES = ("s3", "s3a")
"""The URLs of S3, opened through obstore (s3fs's spellings)."""


def open_remote(url: str, options: StoreOptions, deadline: float | None) -> Opened:
    """The files at ``url``, its root, how to ask whether it is a store (one request per
    question), and its packing.

    Raises `problems.NotAStoreError` where fsspec cannot open it (a package not installed, a URL it
    refuses).
    """
    if urlsplit(url).scheme in AZURE_SCHEMES:
        from .object_files import open_azure

        return open_azure(url, options, deadline)
    if urlsplit(url).scheme in S3_SCHEMES:
        from .s3_objects import open_s3

        return open_s3(url, options, deadline)
    fsspec_options = dict(options.storage_options or {})
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
    files = FsspecFiles(fs, root, options, deadline)
    probe = Probe(
        is_dir=lambda path: bool(files.ask("isdir", path)),
        any_exists=lambda paths: _any_exists(files, paths),
        names_in=lambda folder: {
            entry.rstrip("/").rsplit("/", 1)[-1] for entry in files.ask("ls", folder, detail=False)
        },
    )
    from .fsspec_packing import FsspecPacking

    return Opened(files, root, probe, FsspecPacking(files))


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
