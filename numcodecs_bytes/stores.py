"""Store access for the store tools: local folders and fsspec URLs, batched, concurrent, atomic writes.

The tools say which files to read and write, a batch at a time; this module
does it. `open_store` checks a location and returns its `Files`, and
`walk_store` is the walk both tools make over it. On an fsspec file system
with async support (s3fs, gcsfs, adlfs, http) each batch runs with up to
``jobs`` requests in flight, and the walk lists the folders of one level
together; on S3 it first lists the whole store instead, a thousand keys a
request, as long as that pays (each thousand keys name at least ``jobs``
nodes; else one folder at a time, ``jobs`` at once, is quicker: arrays of
many chunks), and `LISTING_LIMIT` keys bound it. A local folder is worked one
file after another (a disk answers in microseconds: threads would not pay).

What holds:

- Every write is whole or absent at every moment. A local file is written to
  a temporary file beside it and renamed (or linked, to create) into place;
  a batch's temporary files reach the disk together before the renames, and
  the renames together after (one ``syncfs`` each on Linux; one ``fsync`` per
  file and per folder elsewhere). An object store replaces an object in one PUT.
- Nothing is replaced or removed that changed since it was read. Locally a
  file is compared with what was read just before its rename, and a file to
  remove is first renamed aside, compared, and put back if it changed. On S3
  a replace or removal holds only while the object is the version the walk
  listed (``If-Match``), and a new file is written only where none exists
  (``If-None-Match``), where the server honours these (AWS S3, MinIO, moto);
  on other file systems the file is checked just before (a window of one
  request to a second writer).
- A write whose answer was lost (the server acted, then the retry was
  refused) is read back before it is called a conflict: a file that holds
  what was written was written.
- No request waits for ever: each has ``request_timeout`` seconds (retries
  included), and a run as a whole ``run_timeout`` if set. A metadata file that
  is not a regular file (a FIFO, a device) is refused, never read.

`store_lock` keeps a second run off a local store. Nothing here prints or
knows about codecs.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import inspect
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import aclosing, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar
from urllib.parse import urlsplit

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BATCH",
    "JOBS",
    "LISTING_LIMIT",
    "NODE_FILES",
    "REQUEST_TIMEOUT",
    "TEMP_SUFFIX",
    "Files",
    "Folder",
    "Listed",
    "NotAStoreError",
    "Problem",
    "Removal",
    "Replacement",
    "RunTimeoutError",
    "StoreBatch",
    "StoreBusyError",
    "chunk_folders",
    "digest",
    "nested_layout",
    "open_store",
    "prune_array_folder",
    "reason",
    "relative_path",
    "store_lock",
    "walk_store",
]

NODE_FILES = ("zarr.json", ".zarray", ".zgroup", ".zmetadata")
"""Any of these makes a folder a Zarr node."""
METADATA_NAMES = (*NODE_FILES, ".zattrs")
"""The metadata files of a node: the files the tools read, replace or remove (never a chunk)."""
TEMP_SUFFIX = ".numcodecs-bytes-tmp"
"""The suffix of temporary files: only a killed run leaves one behind."""
JOBS = 64
"""Requests in flight on an object store by default: enough to hide a round trip of tens of milliseconds."""
BATCH = 1000
"""Folders listed, or files read or written, per batch: what bounds the memory a run needs."""
LISTING_LIMIT = 100 * BATCH
"""Keys a listing of a whole object store holds at most: what bounds the memory of that listing."""
REQUEST_TIMEOUT = 60.0
"""Seconds a request to an object store may take, its retries included, by default."""
BACKUP_SUFFIX = ".bak"
_DIGITS = re.compile(r"[0-9]+")
_DOTTED_DIGITS = re.compile(r"[0-9]+(\.[0-9]+)+")


def digest(data: bytes) -> bytes:
    """What a removal compares a file with: the SHA-256 of the bytes read."""
    return hashlib.sha256(data).digest()


def chunk_folders(subfolders: list[str], files: list[str], rank: int, separator: str | None) -> list[str]:
    """The subfolders of a Zarr v2 array folder that hold its chunks: the walk never enters them.

    Chunks lie in folders only with two axes or more and the separator ``/``
    (chunk keys ``0/0``), named by digits. ``separator`` is the
    ``dimension_separator`` of the ``.zarray``, None where it says none: then
    the layout is the one the store shows (zarr before 2.8 wrote ``0/0``
    under such metadata, with NestedDirectoryStore). Any other folder may hold
    a node zarr 2 opens by its path: the walk enters it.
    """
    if rank < 2 or separator == "." or (separator is None and nested_layout(subfolders, files, rank) is False):
        return []
    return [name for name in subfolders if _DIGITS.fullmatch(name)]


def prune_array_folder(folder: Folder, zarray: Any) -> None:
    """Keep in a walk only the subfolders of a Zarr v2 array (``zarray``: its parsed ``.zarray``) that may hold
    nodes: its `chunk_folders` are left out (digit folders, where the metadata does not say)."""
    shape = zarray.get("shape") if isinstance(zarray, dict) else None
    rank = len(shape) if isinstance(shape, list) else 2
    separator = zarray.get("dimension_separator") if isinstance(zarray, dict) else None
    try:
        chunks = set(chunk_folders(folder.subfolders, folder.files, rank, separator))
    except ValueError:  # both layouts: the tool reports the array; no digit folder holds a node it reads
        chunks = {name for name in folder.subfolders if _DIGITS.fullmatch(name)}
    folder.subfolders[:] = [name for name in folder.subfolders if name not in chunks]


def nested_layout(subfolders: list[str], files: list[str], rank: int) -> bool | None:
    """Whether an array folder holds nested chunks (``0/0``): True, False, or None where it holds no chunks.

    Raises ValueError where it holds both layouts (``0.0`` files and digit folders).
    """
    if rank < 2:
        return False
    nested = any(_DIGITS.fullmatch(name) for name in subfolders)
    flat = any(_DOTTED_DIGITS.fullmatch(name) for name in files)
    if nested and flat:
        raise ValueError("its folder holds chunks in both layouts ('0.0' files and '0/0' folders)")
    return True if nested else False if flat else None


class NotAStoreError(ValueError):
    """The location is not a Zarr store, does not exist, or cannot be reached (a usage error)."""


class StoreBusyError(RuntimeError):
    """Another run of the store tools holds the store's lock."""


class RunTimeoutError(TimeoutError):
    """The run's time limit passed: it stopped between two batches (a rerun finishes it)."""


@dataclass
class Folder:
    """One folder found by a walk: its path and the names in it."""

    path: str
    subfolders: list[str]  # sorted names; remove those the walk must not enter
    files: list[str]  # sorted names


class Listed(NamedTuple):
    """One batch of a walk: the folders listed, and the paths that could not be visited, with the reason."""

    folders: list[Folder]
    unvisited: list[tuple[str, str]]


class Replacement(NamedTuple):
    """A file to replace by ``data``, only if it still holds ``expected`` (what was read)."""

    path: str
    data: bytes
    expected: bytes
    backup: bool = False  # keep ``expected`` beside it as ``<name>.bak`` (an existing one only if it holds that)


class Removal(NamedTuple):
    """A file to remove, only if it still holds what was read (its `digest`); None: whatever it holds."""

    path: str
    read: bytes | None


class Files(Protocol):
    """What the store tools need of a file system, a batch at a time: a local folder or an fsspec one.

    Each batch method takes many paths and returns, per path, the result or the
    exception that path met (reads), or only the paths that failed (writes): one
    file's problem never stops the others.
    """

    deadline: float | None  # time.monotonic() at which the run stops; None: no limit
    concurrency: int  # requests in flight at most: how many data files a caller may ask for in one batch

    def walk(self) -> Iterator[Listed]:
        """Breadth first, a batch of folders at a time; before taking the next batch, prune each folder's
        ``subfolders`` to those the walk must enter."""
        ...

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        """Metadata files (never through a symbolic link: it could not be replaced); a missing one is a
        FileNotFoundError. Replacements and removals are conditional on what these reads saw."""
        ...

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        """Data files such as chunks, links followed; None where there is none."""
        ...

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        """When each file was last written, in seconds since the epoch as its file system keeps them (an OSError
        where it keeps none)."""
        ...

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        """Replace each file that still holds what was read; the failures (OSError where it cannot)."""
        ...

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        """Write new files; the failures (an existing file is never overwritten: one that holds the same
        bytes is no failure)."""
        ...

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        """Remove files that still hold what was read (a missing one is no failure); the failures."""
        ...


_T = TypeVar("_T")


def _breadth_first(
    root: str,
    listed: Callable[[list[str]], Listed],
    entered: Callable[[Folder, str], str | tuple[str, str]],
    unvisited: list[tuple[str, str]] | None = None,
) -> Iterator[Listed]:
    """The walk of both file systems: the folders of one level ``listed`` a batch at a time; once the caller
    has pruned a batch, the subfolders it kept are ``entered``: a path, or (path, reason) where not followed
    (reported with the next batch). ``unvisited``: paths known before the walk not to be reachable."""
    level, refused = [root], list(unvisited or ())
    while level:
        below: list[str] = []
        for start in range(0, len(level), BATCH):
            batch = listed(level[start : start + BATCH])
            yield Listed(batch.folders, refused + batch.unvisited)
            refused = []
            for folder in batch.folders:
                for name in folder.subfolders:
                    path = entered(folder, name)
                    (below if isinstance(path, str) else refused).append(path)  # type: ignore[arg-type]
        level = below
    if refused:
        yield Listed([], refused)


def _joined(folder: Folder, name: str) -> str:
    return f"{folder.path}/{name}"


def _each(work: Mapping[str, Callable[[], _T]]) -> dict[str, _T | Exception]:
    """Each path's work in turn; what each returned, or the OSError it raised."""
    results: dict[str, _T | Exception] = {}
    for path, job in work.items():
        try:
            results[path] = job()
        except OSError as exc:
            results[path] = exc
    return results


def _failures(results: Mapping[str, object]) -> dict[str, Exception]:
    """The paths whose work failed, with the exception."""
    return {path: result for path, result in results.items() if isinstance(result, Exception)}


def _changed(what: str = "") -> OSError:
    return OSError(f"changed by someone else since it was read{what}: left as it is")


class _LocalFiles:
    """A local folder. Files are replaced atomically (rename), keeping mode, owner and group."""

    deadline: float | None = None
    concurrency = 1  # one file after another: a disk answers in microseconds

    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self) -> Iterator[Listed]:
        def listed(paths: list[str]) -> Listed:
            unvisited: list[tuple[str, str]] = []
            folders = [folder for path in paths if (folder := _listed(path, unvisited))]
            return Listed(folders, unvisited)

        def entered(folder: Folder, name: str) -> str | tuple[str, str]:
            path = os.path.join(folder.path, name)
            if os.path.islink(path):  # never followed: it may lead out of the store, or in a loop
                return path, "symbolic link to a folder: not followed"
            return path

        return _breadth_first(str(self.root), listed, entered)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        return _each({path: partial(_read_regular_file, path) for path in paths})

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        def read(path: str) -> bytes | None:
            try:
                info = os.stat(path)  # links followed: chunk folders may be deduplicated by links
            except FileNotFoundError:
                return None
            if not stat.S_ISREG(info.st_mode):
                raise OSError("not a regular file: not read")  # a FIFO or a device would block or never end
            return Path(path).read_bytes()

        return _each({path: partial(read, path) for path in paths})

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        return _each({path: partial(lambda path: os.stat(path, follow_symlinks=False).st_mtime_ns / 1e9, path)
                      for path in paths})  # fmt: skip

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        replacements = list(replacements)
        staged = self._staged(
            {r.path: r.data for r in replacements}, {r.path: r.expected for r in replacements if r.backup}
        )
        return self._placed(staged, {r.path: partial(self._replace, r, staged[r.path]) for r in replacements})

    def _replace(self, replacement: Replacement, temporaries: Any) -> None:
        path, _, expected, backup = replacement
        temporary, backup_temporary = temporaries
        folder, name = os.path.split(path)
        info = os.stat(path)
        if info.st_nlink > 1:
            # A rename would give this name a new file and leave the other names with the old one.
            raise OSError(
                f"hard link ({info.st_nlink} names for one file): not replaced, which would split the link; "
                "make the names separate copies, then run again"
            )
        if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
            raise OSError(f"not writable: {path}")
        for staged_file in (temporary, backup_temporary):
            if staged_file is not None:
                os.chmod(staged_file, stat.S_IMODE(info.st_mode))
                _keep_owner(staged_file, info)
        if backup:
            _link_or_same(backup_temporary, path + BACKUP_SUFFIX, expected, f"{name}{BACKUP_SUFFIX} exists already")
        if Path(path).read_bytes() != expected:
            raise _changed()
        os.replace(temporary, path)

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        for folder in {os.path.dirname(path) for path in files}:  # a node whose folder holds nothing yet
            with suppress(OSError):  # where it cannot be made, staging the file there says why, per file
                os.makedirs(folder, exist_ok=True)
        staged = self._staged(dict(files), {})
        create = {path: partial(self._create, path, staged[path], data) for path, data in files.items()}
        return self._placed(staged, create)

    def _create(self, path: str, temporaries: Any, data: bytes) -> None:
        temporary, _ = temporaries
        os.chmod(temporary, 0o666 & ~_umask())
        _link_or_same(temporary, path, data, f"{os.path.basename(path)} exists already")

    def _staged(self, files: dict[str, bytes], backups: dict[str, bytes]) -> dict[str, Any]:
        """Each file's data, and the bytes of its backup where ``backups`` has them (by the file's path), in
        temporary files beside it, written but not yet in place; per path (temporary, backup's temporary or
        None) or the OSError met."""

        def stage(path: str, data: bytes) -> tuple[str, str | None]:
            temporary = _temporary(path, data)
            try:
                return temporary, _temporary(path + BACKUP_SUFFIX, backups[path]) if path in backups else None
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise

        staged: dict[str, Any] = _each({path: partial(stage, path, data) for path, data in files.items()})
        _durable(_temporaries(staged), self.root)
        return staged

    def _placed(self, staged: dict[str, Any], place: Mapping[str, Callable[[], None]]) -> dict[str, Exception]:
        """Each staged file put in place (``place``), its leftover temporary files removed, the renames made
        durable; the failures."""
        failures = _failures(staged)
        try:
            failures |= _failures(_each({path: job for path, job in place.items() if path not in failures}))
        finally:
            for temporary in _temporaries(staged):  # those renamed into place are gone already
                Path(temporary).unlink(missing_ok=True)
        placed = {os.path.dirname(path) for path in place if path not in failures}
        _durable(sorted(placed), self.root)
        return failures

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        return _failures(_each({removal.path: partial(self._remove, removal) for removal in removals}))

    def _remove(self, removal: Removal) -> None:
        path, read = removal
        if read is None:
            Path(path).unlink(missing_ok=True)
            return
        folder, name = os.path.split(path)
        aside = os.path.join(folder, f".{name}.{os.urandom(6).hex()}{TEMP_SUFFIX}")
        try:
            os.rename(path, aside)  # from here, a writer of ``path`` makes a new file, which stays
        except FileNotFoundError:
            return
        unchanged = False
        try:
            unchanged = digest(_read_regular_file(aside)) == read
        finally:  # what is not removed goes back, also where reading it failed or was interrupted
            if not unchanged:
                with suppress(FileExistsError):  # unless a writer has made a new one meanwhile: theirs is newer
                    os.link(aside, path)
            os.unlink(aside)
        if not unchanged:
            raise _changed(": not removed")


def _temporaries(staged: Mapping[str, Any]) -> list[str]:
    """The temporary files of a batch `_LocalFiles._staged` wrote (its failures aside)."""
    return [temporary for pair in staged.values() if isinstance(pair, tuple) for temporary in pair if temporary]


def _read_regular_file(path: str) -> bytes:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(f"symbolic link (to {os.readlink(path)}): not replaced by a file; use its target")
    if not stat.S_ISREG(info.st_mode):
        raise OSError("not a regular file")  # a FIFO or a device would block or never end
    return Path(path).read_bytes()


def _listed(path: str, unvisited: list[tuple[str, str]]) -> Folder | None:
    """A local folder's subfolders (links to folders among them, as ``os.walk`` lists them) and files."""
    try:
        with os.scandir(path) as entries:
            subfolders: list[str] = []
            files: list[str] = []
            for entry in entries:
                try:
                    is_folder = entry.is_dir()
                except OSError:
                    is_folder = False
                (subfolders if is_folder else files).append(entry.name)
    except OSError as error:
        unvisited.append((path, f"folder not read: {error.strerror or error}"))
        return None
    return Folder(path, sorted(subfolders), sorted(files))


def _temporary(target: str, data: bytes) -> str:
    """A temporary file beside ``target`` holding ``data`` (not yet durable: see `_durable`)."""
    folder, name = os.path.split(target)
    descriptor, temporary = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return temporary


def _link_or_same(temporary: str, target: str, data: bytes, exists: str) -> None:
    """``temporary`` linked into place as ``target``, which must not exist: an existing one is no failure
    where it holds ``data`` already (an earlier run's, or another writer's same bytes)."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        try:
            same = _read_regular_file(target) == data
        except OSError:
            same = False
        if not same:
            raise FileExistsError(f"{exists}: not overwritten") from None


def _syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs``: every file of one file system on disk in one call; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    return function


_SYNCFS = _syncfs()


def _durable(paths: list[str], root: Path) -> None:
    """Files written, or folders whose names changed, on disk: one ``syncfs`` of the store's file system on
    Linux (where a folder of many small files would take a ``fsync`` each), else a ``fsync`` per path."""
    if not paths:
        return
    if _SYNCFS is not None:
        descriptor = os.open(root, os.O_RDONLY)
        try:
            if _SYNCFS(descriptor) == 0:
                return
        finally:
            os.close(descriptor)
    for path in paths:
        descriptor = os.open(path or ".", os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _keep_owner(path: str, like: os.stat_result) -> None:
    if not hasattr(os, "chown"):
        return
    info = os.stat(path)
    if (info.st_uid, info.st_gid) == (like.st_uid, like.st_gid):
        return
    try:
        os.chown(path, like.st_uid, like.st_gid)
    except PermissionError:
        raise OSError(
            f"its owner (uid {like.st_uid}, gid {like.st_gid}) could not be kept: only that user or root "
            "can replace it without taking it over; run as that user or as root"
        ) from None


def _umask() -> int:
    """The process's umask, read without setting it (``os.umask`` would change it for every thread meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022  # where the system does not say: the usual default


class _FsspecFiles:
    """Any fsspec file system; an async one (s3fs) with up to ``jobs`` requests in flight.

    An object store replaces an object in one PUT: readers see the old or the
    new one. On S3, writes and removals are conditional (``If-None-Match: *``
    to create, ``If-Match`` on the version read to replace or remove); on
    other file systems the file is checked just before.
    """

    def __init__(self, fs: Any, root: str, jobs: int, request_timeout: float, deadline: float | None) -> None:
        import fsspec.asyn

        self.fs, self.root, self.jobs, self.concurrency = fs, root.rstrip("/"), jobs, jobs
        self.request_timeout, self.deadline = request_timeout, deadline
        self._loop = fs.loop if fs.async_impl else fsspec.asyn.get_loop()
        self._sync = fsspec.asyn.sync
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self._conditional = "s3" in protocols  # s3fs passes If-None-Match and If-Match on
        # The version (ETag) of each metadata file as the walk listed it, or as read where not listed: what a
        # replacement or removal holds on.
        self._versions: dict[str, str] = {}
        # s3fs 2026.9 (not 2024.6) asks an object's size, one more request, before reading it whole (to read a
        # large one in parts) unless told to read it in one.
        reader = getattr(fs, "_cat_file" if fs.async_impl else "cat_file")
        self._whole_read = {"max_concurrency": 1} if "max_concurrency" in inspect.signature(reader).parameters else {}

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The file system's ``method``: awaited where it is async, called where not (one at a time)."""
        if self.fs.async_impl:
            return await getattr(self.fs, f"_{method}")(*args, **kwargs)
        return getattr(self.fs, method)(*args, **kwargs)

    def _timeout(self) -> float:
        """The seconds the next request may take: its own limit, or what is left of the run's."""
        if self.deadline is None:
            return self.request_timeout
        return max(0.0, min(self.request_timeout, self.deadline - time.monotonic()))

    async def _in_time(self, job: Awaitable[_T]) -> _T:
        timeout = self._timeout()
        try:
            return await asyncio.wait_for(job, timeout)
        except TimeoutError:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise TimeoutError("no answer before the run's time limit (--run-timeout)") from None
            raise TimeoutError(f"no answer within {timeout:g} s (--request-timeout)") from None

    def ask(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One request (the file system's ``method``) in its time: what it returned; what it raised, raised."""
        answer = self._run({"": self._call(method, *args, **kwargs)})[""]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _run(self, work: Mapping[str, Awaitable[_T]]) -> dict[str, _T | Exception]:
        """Each path's work (a coroutine not started yet), at most ``jobs`` at a time, each in its time, on
        fsspec's event loop; what each returned or raised."""

        async def run_all() -> dict[str, _T | Exception]:
            limit = asyncio.Semaphore(self.jobs)

            async def one(path: str, job: Awaitable[_T]) -> tuple[str, _T | Exception]:
                async with limit:
                    try:
                        return path, await self._in_time(job)
                    except Exception as exc:  # each file system fails in its own words: reported per path
                        return path, exc

            return dict(await asyncio.gather(*(one(path, job) for path, job in work.items())))

        result: dict[str, _T | Exception] = self._sync(self._loop, run_all)
        return result

    def walk(self) -> Iterator[Listed]:
        whole, unreachable = self._whole_store() if self._conditional else (None, [])
        if whole is None:
            return _breadth_first(self.root, self._listed_batch, _joined)

        def listed(paths: list[str]) -> Listed:
            return Listed(self._batch({path: whole.pop(path) for path in paths}), [])

        return _breadth_first(self.root, listed, _joined, unreachable)

    def _batch(self, listings: dict[str, _Listing]) -> list[Folder]:
        """The folders of one batch of the walk, by path; the ETags of their metadata files kept."""
        for path, listing in listings.items():
            self._versions.update(
                (f"{path}/{name}", tag) for name, tag in listing.etags.items() if tag and name in METADATA_NAMES
            )
        return [listing.folder(path) for path, listing in listings.items()]

    def _whole_store(self) -> tuple[dict[str, _Listing] | None, list[tuple[str, str]]]:
        """Every folder of an S3 store from one listing of all its keys, a page after another, and the paths no
        key reaches. None where that does not pay, and the walk lists folder by folder: a thousand keys (a page)
        that name fewer nodes than ``jobs`` (one request each, at once), or more than `LISTING_LIMIT` keys."""
        bucket, _, key = self.root.partition("/")
        prefix = f"{key}/" if key else ""
        problems: list[tuple[str, str]] = []

        async def listing() -> dict[str, _Listing] | None:
            folders = {self.root: _Listing()}
            keys = nodes = 0
            async with aclosing(self.fs._iterdir(bucket, delimiter="", prefix=prefix)) as entries:
                while True:
                    try:
                        entry = await self._in_time(anext(entries))
                    except StopAsyncIteration:
                        return folders
                    keys += 1
                    nodes += _add_key(folders, self.root, entry, problems)
                    if keys % BATCH == 0:
                        if nodes < self.jobs or keys >= LISTING_LIMIT:
                            return None
                        nodes = 0

        try:
            result: dict[str, _Listing] | None = self._sync(self._loop, listing)
        except Exception:  # whatever stops the whole listing, listing folder by folder reports per folder
            return None, []
        return result, problems

    def _listed_batch(self, paths: list[str]) -> Listed:
        """The folders at ``paths``, listed together (see `_batch`)."""
        listings = self._run({path: self._call("ls", path, detail=True) for path in paths})
        found: dict[str, _Listing] = {}
        unvisited: list[tuple[str, str]] = []
        for path in paths:
            listing = listings[path]
            if isinstance(listing, Exception):
                unvisited.append((path, f"folder not read: {listing}"))
                continue
            found[path] = folder = _Listing()
            for entry in listing:
                if entry["name"].rstrip("/") == path:  # some file systems list a folder in itself
                    continue
                name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                if entry["type"] == "directory":
                    folder.subfolders.add(name)
                else:
                    folder.etags[name] = entry.get("ETag") if self._conditional else None
        return Listed(self._batch(found), unvisited)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        return self._run({path: self._versioned_bytes(path) for path in paths})

    async def _versioned_bytes(self, path: str) -> bytes:
        """A metadata file's bytes; where the walk did not list its version, the version first (S3)."""
        if self._conditional and path not in self._versions:
            self._versions[path] = (await self._call("info", path))["ETag"]
        return await self._bytes(path)

    async def _version(self, path: str, expected: bytes | None) -> str:
        """The version of ``path`` that was read; for a file not read through this object, its version now,
        provided it holds ``expected`` (where given)."""
        version = self._versions.get(path)
        if version is None:
            version = (await self._call("info", path))["ETag"]
            if expected is not None and await self._bytes(path) != expected:
                raise _changed()
        return version

    async def _bytes(self, path: str) -> bytes:
        return bytes(await self._call("cat_file", path, **self._whole_read))

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        async def read(path: str) -> bytes | None:
            try:
                return await self._bytes(path)
            except FileNotFoundError:
                return None

        return self._run({path: read(path) for path in paths})

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        async def modified(path: str) -> float:
            info = await self._call("info", path)
            for key in ("LastModified", "mtime", "last_modified", "created"):  # S3, local and others, ...
                when = info.get(key)
                if isinstance(when, datetime):
                    return when.timestamp()
                if isinstance(when, int | float) and not isinstance(when, bool):
                    return float(when)
                if isinstance(when, str):
                    with suppress(ValueError):
                        return datetime.fromisoformat(when).timestamp()
            raise OSError("its file system keeps no time it was written")

        return self._run({path: modified(path) for path in paths})

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        return _failures(self._run({r.path: self._replace(*r) for r in replacements}))

    async def _replace(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        condition: dict[str, str] = {}
        if self._conditional:
            # The version read: the PUT holds only if the object is that version still (no second read).
            condition = {"IfMatch": await self._version(path, expected)}
        elif await self._bytes(path) != expected:
            raise _changed()
        if backup:
            await self._create(path + BACKUP_SUFFIX, expected)
        try:
            await self._call("pipe_file", path, data, **condition)
        except OSError as exc:
            if not (condition and _refused_condition(exc)):
                raise
            if await self._bytes(path) != data:  # a retry refused after the server acted: ours is there
                raise _changed() from None

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        return _failures(self._run({path: self._create(path, data) for path, data in files.items()}))

    async def _create(self, path: str, data: bytes) -> None:
        exists = FileExistsError(f"{path.rsplit('/', 1)[-1]} exists already: not overwritten")
        try:
            if not self._conditional:
                if await self._call("exists", path):
                    raise exists
                await self._call("pipe_file", path, data)
                return
            await self._call("pipe_file", path, data, IfNoneMatch="*")
        except OSError as exc:
            refused = exc is exists or isinstance(exc, FileExistsError) or _refused_condition(exc)
            if not refused:
                raise
            try:
                same = await self._bytes(path) == data  # an earlier run's, or a retry after the server acted
            except OSError:
                same = False
            if not same:
                raise exists from None

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        return _failures(self._run({removal.path: self._remove(*removal) for removal in removals}))

    async def _remove(self, path: str, read: bytes | None) -> None:
        if read is not None and self._conditional:
            await self._delete_if_unchanged(path)
            return
        if read is not None:
            try:
                unchanged = digest(await self._bytes(path)) == read
            except FileNotFoundError:
                return
            if not unchanged:
                raise _changed(": not removed")
        try:
            await self._call("rm_file", path)
        except FileNotFoundError:
            pass

    async def _delete_if_unchanged(self, path: str) -> None:
        """One DELETE that holds only while the object is the version read (s3fs's rm_file passes no condition)."""
        bucket, key, _ = self.fs.split_path(path)
        self.fs.invalidate_cache(path)
        try:
            version = await self._version(path, None)
            await self.fs._call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
        except FileNotFoundError:
            pass  # gone already (or removed by a retry whose answer was lost)
        except OSError as exc:
            if _refused_condition(exc):
                raise _changed(": not removed") from None
            raise


@dataclass
class _Listing:
    """One folder as a listing finds it: its subfolders, and its files with their ETags (None where not kept)."""

    subfolders: set[str] = field(default_factory=set)
    etags: dict[str, str | None] = field(default_factory=dict)

    def folder(self, path: str) -> Folder:
        return Folder(path, sorted(self.subfolders), sorted(self.etags))


def _add_key(folders: dict[str, _Listing], root: str, entry: Mapping[str, Any], problems: list[tuple[str, str]]) -> int:
    """One key of a whole-store listing added to ``folders`` (by path), its folders with it; 1 if it names a
    node's metadata file."""
    relative = entry["name"][len(root) + 1 :]
    *names, file = relative.split("/")
    if "" in names:  # "a//b": no path reaches it (the keys below one such folder come together: one line)
        where = f"{root}/{'/'.join(names[: names.index('') + 1])}"
        if not problems or problems[-1][0] != where:
            problems.append((where, "a folder with an empty name: not visited"))
        return 0
    path = root
    for name in names:
        folders[path].subfolders.add(name)
        path = f"{path}/{name}"
        folders.setdefault(path, _Listing())
    if file:  # "a/b/" is a folder marker, not a file
        folders[path].etags[file] = entry.get("ETag")
    return int(file in NODE_FILES)


def _refused_condition(exc: OSError) -> bool:
    """Whether S3 refused a conditional write or removal (412 Precondition Failed), from the error s3fs raises."""
    response = getattr(exc.__cause__, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "PreconditionFailed"


def _local_path(text: str) -> str:
    """A local path, or a ``file:`` URL of this host (``file:///p``, ``file://localhost/p``) made a path."""
    if not text.startswith("file:"):
        return text
    url = urlsplit(text)
    if url.netloc not in ("", "localhost"):
        raise NotAStoreError(f"{text}: a file URL of another host ({url.netloc}) cannot be opened here")
    return url.path


def open_store(
    location: str | os.PathLike[str],
    *,
    jobs: int = JOBS,
    storage_options: Mapping[str, Any] | None = None,
    request_timeout: float = REQUEST_TIMEOUT,
    run_timeout: float | None = None,
) -> tuple[Files, str]:
    """The files of the store at ``location`` and its root, after checking it is a Zarr store.

    Parameters
    ----------
    location : str or path
        A local folder, a ``file:`` URL of this host, or an fsspec URL.
    jobs : int
        Requests in flight at most on an fsspec file system with async support
        (on S3, also the size of the connection pool unless ``storage_options``
        sets ``config_kwargs``).
    storage_options : mapping, optional
        Passed to fsspec with the URL (``endpoint_url``, ``profile``, ``anon``, ...).
    request_timeout : float
        Seconds each request to an fsspec file system may take, retries included.
    run_timeout : float, optional
        Seconds the whole run may take: `walk_store` raises `RunTimeoutError`
        between two batches once they have passed, and requests end by then.

    Raises
    ------
    NotAStoreError
        For an empty path, a missing folder, a file, a folder without Zarr
        metadata, or a URL that cannot be opened.
    """
    text = os.fspath(location)
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    for name, seconds in (("request_timeout", request_timeout), ("run_timeout", run_timeout)):
        if seconds is not None and not seconds > 0:
            raise ValueError(f"{name} must be more than 0 seconds, got {seconds}")
    if not text.strip():
        raise NotAStoreError("the store path is empty")
    deadline = None if run_timeout is None else time.monotonic() + run_timeout
    if "://" in text and not text.startswith("file:"):
        options = dict(storage_options or {})
        if urlsplit(text).scheme in ("s3", "s3a") and "config_kwargs" not in options:
            options["config_kwargs"] = {"max_pool_connections": jobs}  # botocore's default pool holds 10
        try:
            import fsspec

            fs, url_root = fsspec.core.url_to_fs(text, **options)
        except ImportError as exc:
            raise NotAStoreError(f"{text}: this URL needs a package that is not installed ({exc})") from None
        except Exception as exc:  # each file system fails in its own words (a missing zip, a tar that is none)
            raise NotAStoreError(f"{text}: not a URL fsspec can open ({type(exc).__name__}: {exc})") from None
        root = url_root.rstrip("/")
        # fsspec shares one instance per URL in a process, with the folder listings it made: a store
        # changed since (by another writer, or by the caller) must be seen as it is now. A path's
        # invalidation keeps the listings below it: all go.
        fs.invalidate_cache()
        remote = _FsspecFiles(fs, root, jobs, request_timeout, deadline)
        files: Files = remote

        def names_in(folder: str) -> set[str]:
            return {entry.rstrip("/").rsplit("/", 1)[-1] for entry in remote.ask("ls", folder, detail=False)}

        def is_dir(path: str) -> bool:
            return bool(remote.ask("isdir", path))

        def exists(path: str) -> bool:
            return bool(remote.ask("exists", path))

    else:
        root = str(Path(_local_path(text)))
        local = _LocalFiles(Path(root))
        local.deadline = deadline
        files = local

        def is_dir(path: str) -> bool:
            return os.path.isdir(path)

        def exists(path: str) -> bool:
            return os.path.lexists(path)

        def names_in(folder: str) -> set[str]:
            return {name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name))}

    try:
        problem = _not_a_store(root, is_dir, names_in, exists)
    except Exception as exc:  # OSError, or a file system's own error (a broken reference file system)
        raise NotAStoreError(f"{text}: cannot be reached ({type(exc).__name__}: {exc})") from None
    if problem is not None:
        raise NotAStoreError(f"{text}: {problem}")
    return files, root


def _not_a_store(
    root: str, is_dir: Callable[[str], bool], names_in: Callable[[str], set[str]], exists: Callable[[str], bool]
) -> str | None:
    """Why ``root`` is not a Zarr store, or None if it is one (one listing of the root, where it is a folder)."""
    if not is_dir(root):
        return "not a folder" if exists(root) else "no such folder"
    if not names_in(root) & set(NODE_FILES):
        return "not a Zarr store (no zarr.json, .zgroup, .zarray or .zmetadata)"
    return None


@contextmanager
def store_lock(files: Files, root: str) -> Iterator[None]:
    """One run of the store tools at a time per local store; no lock elsewhere.

    An advisory lock (``flock``) on the store's folder itself: no file is added,
    and the system releases it when the process ends, however it ends.
    """
    if not isinstance(files, _LocalFiles) or fcntl is None:
        yield
        return
    descriptor = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StoreBusyError(f"{root}: another numcodecs-bytes run is working on this store") from None
        yield
    finally:
        os.close(descriptor)


def relative_path(path: str, root: str) -> str:
    """``path`` relative to the store's root (walks yield paths below it)."""
    return path[len(root) :].lstrip("/\\").replace(os.sep, "/")


# -- the walk both tools make ---------------------------------------------------------------------------------


class StoreBatch(NamedTuple):
    """One batch of `walk_store`: its folders (prune each one's ``subfolders`` before the next batch), the
    paths it could not work (relative to the store, with the reason), and the temporary files of killed runs
    it removed (relative)."""

    folders: list[Folder]
    problems: list[tuple[str, str]]
    leftovers_removed: list[str]


def walk_store(
    files: Files, root: str, *, dry_run: bool, on_progress: Callable[[int, int], None] | None = None
) -> Iterator[StoreBatch]:
    """The walk over a store that both tools make, a batch at a time.

    Removes the temporary files that killed runs left (only with the store's
    lock held, or on an object store: no live run is writing them; not in a dry
    run), reports progress after each batch as (folders walked, folders found so
    far), and stops with `RunTimeoutError` between two batches once the run's
    time limit has passed.
    """
    done, found = 0, 1  # the root
    for listed in files.walk():
        leftovers = [f"{f.path}/{name}" for f in listed.folders for name in f.files if name.endswith(TEMP_SUFFIX)]
        failed = {} if dry_run else files.remove(Removal(path, None) for path in leftovers)
        problems = [(relative_path(path, root) or ".", why) for path, why in listed.unvisited]
        problems += [(relative_path(path, root), reason(exc)) for path, exc in failed.items()]
        yield StoreBatch(listed.folders, problems, [relative_path(p, root) for p in leftovers if p not in failed])
        done += len(listed.folders)
        found += sum(len(folder.subfolders) for folder in listed.folders)
        if on_progress is not None:
            on_progress(done, found)
        if files.deadline is not None and time.monotonic() >= files.deadline:
            raise RunTimeoutError(f"the run's time limit passed: {done:,} of {found:,} folders done")


class Problem(ValueError):
    """An error whose message is the whole reason, as the tools report it (e.g. a node that cannot be converted)."""


def reason(exc: BaseException) -> str:
    """A file's or a node's problem in one line of words, whatever raised it: what both tools report."""
    if isinstance(exc, Problem):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "nested too deeply to parse"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
