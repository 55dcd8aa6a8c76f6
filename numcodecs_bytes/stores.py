"""Store access for the store tools: local folders and fsspec URLs, batched, concurrent, atomic writes.

The tools say which files to read and write, a batch at a time; this module does
it. `open_store` checks a location and returns its `Files`: on an fsspec file
system with async support (s3fs, gcsfs, adlfs, http) each batch runs with up to
``jobs`` requests in flight, and the walk lists the folders of one level
together. On S3 the walk first lists the whole store instead, a thousand keys a
request, as long as that pays: each thousand keys name at least ``jobs`` nodes
(else one folder at a time, ``jobs`` at once, is quicker: arrays of many
chunks), and `LISTING_LIMIT` keys bound it. A local folder is worked one file
after another (a disk answers in microseconds: threads would not pay).
`store_lock` keeps a second run off a local store. Every write is whole or
absent at every moment: a local file is written to a temporary file beside it,
flushed, and renamed over the target; an object store replaces an object in one
PUT. On S3 a new file is written only if none exists (``If-None-Match``) and a
replaced one only if it is still the version that was listed (``If-Match``),
where the server honours them (AWS S3, MinIO, moto); elsewhere the file is
checked just before the write. A metadata file the listing shows to hold
``{}`` (its ETag, the MD5 of those bytes) is not read again. Nothing here
prints or knows about codecs.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import re
import stat
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
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
    "TEMP_SUFFIX",
    "Files",
    "Folder",
    "NotAStoreError",
    "Replacement",
    "StoreBusyError",
    "Walked",
    "open_store",
    "prune_array_folder",
    "relative_path",
    "remove_leftovers",
    "store_lock",
]

NODE_FILES = ("zarr.json", ".zarray", ".zgroup", ".zmetadata")
"""Any of these makes a folder a Zarr node."""
TEMP_SUFFIX = ".numcodecs-bytes-tmp"
"""The suffix of temporary files: only a killed run leaves one behind."""
JOBS = 64
"""Requests in flight on an object store by default: enough to hide a round trip of tens of milliseconds."""
BATCH = 1000
"""Folders listed, or files read or written, per batch: what bounds the memory a run needs."""
LISTING_LIMIT = 100 * BATCH
"""Keys a listing of a whole object store holds at most: what bounds the memory of that listing."""
_EMPTY_OBJECT = b"{}"
_EMPTY_OBJECT_ETAG = f'"{hashlib.md5(_EMPTY_OBJECT, usedforsecurity=False).hexdigest()}"'
"""S3's ETag of an object uploaded whole is the MD5 of its bytes: a listed ``{}`` (zarr's .zattrs without
attributes) needs no read. Any other ETag (encrypted or multipart uploads) is read as usual."""
_BACKUP_SUFFIX = ".bak"
_CHUNK_FOLDER = re.compile(r"[0-9]+")


def prune_array_folder(subfolders: list[str], zarr_format: int) -> None:
    """Keep in a walk only the subfolders of an array that may hold nodes: chunk folders never do.

    A Zarr v2 array's chunk folders are named by digits (``/``-separated chunk
    keys); another folder may hold an array zarr 2 opens by its path. A Zarr v3
    array holds chunks only (under ``c/`` by default).
    """
    subfolders[:] = [name for name in subfolders if zarr_format == 2 and not _CHUNK_FOLDER.fullmatch(name)]


class NotAStoreError(ValueError):
    """The location is not a Zarr store, does not exist, or cannot be reached (a usage error)."""


class StoreBusyError(RuntimeError):
    """Another run of the store tools holds the store's lock."""


@dataclass
class Folder:
    """One folder found by a walk: its path and the names in it."""

    path: str
    subfolders: list[str]  # sorted names; remove those the walk must not enter
    files: list[str]  # sorted names


@dataclass
class Walked:
    """How far a walk has come, for progress: folders listed, and folders known (listed or still to list)."""

    done: int = 0
    found: int = 1  # the root

    def add(self, batch: list[Folder]) -> None:
        """Count a batch whose subfolders are pruned to those the walk enters."""
        self.done += len(batch)
        self.found += sum(len(folder.subfolders) for folder in batch)


class Replacement(NamedTuple):
    """A file to replace by ``data``, only if it still holds ``expected`` (what was read)."""

    path: str
    data: bytes
    expected: bytes
    backup: bool = False  # keep ``expected`` beside it as ``<name>.bak`` (never over an existing one)


class Files(Protocol):
    """What the store tools need of a file system, a batch at a time: a local folder or an fsspec one.

    Each batch method takes many paths and returns, per path, the result or the
    exception that path met (reads), or only the paths that failed (writes): one
    file's problem never stops the others.
    """

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[list[Folder]]:
        """Breadth first, a batch of folders at a time; before taking the next batch, prune each folder's
        ``subfolders`` to those the walk must enter.

        What cannot be visited (an unreadable folder, a link among the
        subfolders left after pruning) is added to ``failures``.
        """
        ...

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        """Metadata files (never through a symbolic link: it could not be replaced)."""
        ...

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        """Data files such as chunks, links followed; None where there is none."""
        ...

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        """Replace each file that still holds what was read; the failures (OSError where it cannot)."""
        ...

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        """Write new files; the failures (an existing file is never overwritten)."""
        ...

    def remove(self, paths: Iterable[str]) -> dict[str, Exception]:
        """Remove files (a missing one is no failure); the failures."""
        ...


_T = TypeVar("_T")


def _breadth_first(
    root: str, listed: Callable[[list[str]], list[Folder]], entered: Callable[[Folder, str], str | None]
) -> Iterator[list[Folder]]:
    """The walk of both file systems: the folders of one level ``listed`` a batch at a time; once the caller
    has pruned a batch, the subfolders it kept are ``entered`` (a path, or None where not followed)."""
    level = [root]
    while level:
        below: list[str] = []
        for start in range(0, len(level), BATCH):
            folders = listed(level[start : start + BATCH])
            yield folders
            below += [path for folder in folders for name in folder.subfolders if (path := entered(folder, name))]
        level = below


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


class _LocalFiles:
    """A local folder. Files are replaced atomically (rename), keeping mode, owner and group."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[list[Folder]]:
        def listed(paths: list[str]) -> list[Folder]:
            return [folder for path in paths if (folder := _listed(path, failures))]

        def entered(folder: Folder, name: str) -> str | None:
            path = os.path.join(folder.path, name)
            if os.path.islink(path):  # never followed: it may lead out of the store, or in a loop
                failures.append((path, "symbolic link to a folder: not followed"))
                return None
            return path

        return _breadth_first(str(self.root), listed, entered)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        return _each({path: partial(self._read, path) for path in paths})

    def _read(self, path: str) -> bytes:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise OSError(f"symbolic link (to {os.readlink(path)}): not replaced by a file; use its target")
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")  # a FIFO or a device would block or never end
        return Path(path).read_bytes()

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        def read(path: str) -> bytes | None:
            try:
                return Path(path).read_bytes()
            except FileNotFoundError:
                return None

        return _each({path: partial(read, path) for path in paths})

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        return _failures(_each({r.path: partial(self._replace, *r) for r in replacements}))

    def _replace(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
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
        if backup:
            if os.path.lexists(path + _BACKUP_SUFFIX):
                raise OSError(f"{name}{_BACKUP_SUFFIX} exists already: not overwritten")
            _write_then_rename(path + _BACKUP_SUFFIX, expected, info)
        _write_then_rename(path, data, info, expected)

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        return _failures(_each({path: partial(self._create, path, data) for path, data in files.items()}))

    def _create(self, path: str, data: bytes) -> None:
        _write_then_rename(path, data, None)

    def remove(self, paths: Iterable[str]) -> dict[str, Exception]:
        return _failures(_each({path: partial(self._remove, path) for path in paths}))

    def _remove(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)


def _listed(path: str, failures: list[tuple[str, str]]) -> Folder | None:
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
        failures.append((path, f"folder not read: {error.strerror or error}"))
        return None
    return Folder(path, sorted(subfolders), sorted(files))


def _write_then_rename(target: str, data: bytes, like: os.stat_result | None, expected: bytes | None = None) -> None:
    """Write ``target`` whole or not at all: a temporary file beside it, flushed, then renamed into place.

    ``like``: the file replaced, whose mode, owner and group the new one keeps;
    None to create ``target``, which must not exist (a hard link, not a rename,
    puts it in place: it fails rather than overwrite).
    """
    folder, name = os.path.split(target)
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if like is None:
            os.chmod(temporary, 0o666 & ~_umask())
            os.link(temporary, target)  # FileExistsError if it exists
            os.unlink(temporary)
        else:
            os.chmod(temporary, stat.S_IMODE(like.st_mode))
            _keep_owner(temporary, like)
            _check_unchanged(target, expected)
            os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(folder or ".", os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself reaches the disk
    finally:
        os.close(directory)


def _check_unchanged(path: str, expected: bytes | None) -> None:
    """Just before a replace: the file still holds what was read (a concurrent writer's change is kept)."""
    if expected is not None and Path(path).read_bytes() != expected:
        raise OSError("changed by someone else meanwhile: left as it is")


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
    new one. On S3, writes are conditional (``If-None-Match: *`` to create,
    ``If-Match`` on the version listed to replace); on other file systems the
    file is checked just before it is written.
    """

    def __init__(self, fs: Any, root: str, jobs: int) -> None:
        import fsspec.asyn

        self.fs, self.root, self.jobs = fs, root.rstrip("/"), jobs
        self._loop = fs.loop if fs.async_impl else fsspec.asyn.get_loop()
        self._sync = fsspec.asyn.sync
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self._conditional = "s3" in protocols  # s3fs passes If-None-Match and If-Match on to the PUT
        self._listed: dict[str, str] = {}  # the ETags the walk listed in its last batch, by path
        # s3fs 2026.9 (not 2024.6) asks an object's size, one more request, before reading it whole (to read a
        # large one in parts) unless told to read it in one.
        reader = getattr(fs, "_cat_file" if fs.async_impl else "cat_file")
        self._whole_read = {"max_concurrency": 1} if "max_concurrency" in inspect.signature(reader).parameters else {}

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The file system's ``method``: awaited where it is async, called where not (one at a time)."""
        if self.fs.async_impl:
            return await getattr(self.fs, f"_{method}")(*args, **kwargs)
        return getattr(self.fs, method)(*args, **kwargs)

    def _run(self, work: Mapping[str, Awaitable[_T]]) -> dict[str, _T | Exception]:
        """Each path's work (a coroutine not started yet), at most ``jobs`` at a time, on fsspec's event loop;
        what each returned or raised."""

        async def run_all() -> dict[str, _T | Exception]:
            limit = asyncio.Semaphore(self.jobs)

            async def one(path: str, job: Awaitable[_T]) -> tuple[str, _T | Exception]:
                async with limit:
                    try:
                        return path, await job
                    except Exception as exc:  # each file system fails in its own words: reported per path
                        return path, exc

            return dict(await asyncio.gather(*(one(path, job) for path, job in work.items())))

        result: dict[str, _T | Exception] = self._sync(self._loop, run_all)
        return result

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[list[Folder]]:
        whole = self._whole_store(failures) if self._conditional else None
        if whole is None:
            return _breadth_first(self.root, lambda paths: self._listed_batch(paths, failures), _joined)

        return _breadth_first(self.root, lambda paths: self._batch({path: whole.pop(path) for path in paths}), _joined)

    def _batch(self, listings: dict[str, _Listing]) -> list[Folder]:
        """The folders of one batch of the walk, by path; the ETags of their files kept for `replace`."""
        self._listed = {
            f"{path}/{name}": tag for path, listing in listings.items() for name, tag in listing.etags.items() if tag
        }
        return [listing.folder(path) for path, listing in listings.items()]

    def _whole_store(self, failures: list[tuple[str, str]]) -> dict[str, _Listing] | None:
        """Every folder of an S3 store from one listing of all its keys, a page after another. None where that
        does not pay, and the walk lists folder by folder: a thousand keys (a page) that name fewer nodes than
        ``jobs`` (one request each, at once), or more than `LISTING_LIMIT` keys."""
        bucket, _, key = self.root.partition("/")
        prefix = f"{key}/" if key else ""

        async def listing() -> dict[str, _Listing] | None:
            folders = {self.root: _Listing()}
            keys = nodes = 0
            async with aclosing(self.fs._iterdir(bucket, delimiter="", prefix=prefix)) as entries:
                async for entry in entries:
                    keys += 1
                    nodes += _add_key(folders, self.root, entry, failures)
                    if keys % BATCH == 0:
                        if nodes < self.jobs or keys >= LISTING_LIMIT:
                            return None
                        nodes = 0
            return folders

        try:
            result: dict[str, _Listing] | None = self._sync(self._loop, listing)
        except Exception:  # whatever stops the whole listing, listing folder by folder reports per folder
            return None
        return result

    def _listed_batch(self, paths: list[str], failures: list[tuple[str, str]]) -> list[Folder]:
        """The folders at ``paths``, listed together (see `_batch`)."""
        listings = self._run({path: self._call("ls", path, detail=True) for path in paths})
        found: dict[str, _Listing] = {}
        for path in paths:
            listing = listings[path]
            if isinstance(listing, Exception):
                failures.append((path, f"folder not read: {listing}"))
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
        return self._batch(found)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        paths = list(paths)
        empty = {path: _EMPTY_OBJECT for path in paths if self._listed.get(path) == _EMPTY_OBJECT_ETAG}
        return {**self._run({path: self._bytes(path) for path in paths if path not in empty}), **empty}

    async def _bytes(self, path: str) -> bytes:
        return bytes(await self._call("cat_file", path, **self._whole_read))

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        async def read(path: str) -> bytes | None:
            try:
                return await self._bytes(path)
            except FileNotFoundError:
                return None

        return self._run({path: read(path) for path in paths})

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        return _failures(self._run({r.path: self._replace(*r) for r in replacements}))

    async def _replace(self, path: str, data: bytes, expected: bytes, backup: bool) -> None:
        condition: dict[str, str] = {}
        listed = self._listed.get(path)
        if listed is not None:
            # The version listed before the caller read it: the PUT holds only if the object is that version
            # still, so what was read is what is replaced (no second read needed).
            condition = {"IfMatch": listed}
        else:
            if self._conditional:  # the version now, then its bytes: the PUT holds only if it is still there
                condition = {"IfMatch": (await self._call("info", path))["ETag"]}
            if await self._bytes(path) != expected:
                raise OSError("changed by someone else meanwhile: left as it is")
        if backup:
            await self._create(path + _BACKUP_SUFFIX, expected)
        try:
            await self._call("pipe_file", path, data, **condition)
        except OSError as exc:
            if condition and _refused_condition(exc):
                raise OSError("changed by someone else meanwhile: left as it is") from None
            raise

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        return _failures(self._run({path: self._create(path, data) for path, data in files.items()}))

    async def _create(self, path: str, data: bytes) -> None:
        exists = FileExistsError(f"{path.rsplit('/', 1)[-1]} exists already: not overwritten")
        if not self._conditional:
            if await self._call("exists", path):
                raise exists
            await self._call("pipe_file", path, data)
            return
        try:
            await self._call("pipe_file", path, data, IfNoneMatch="*")
        except OSError as exc:
            if isinstance(exc, FileExistsError) or _refused_condition(exc):
                raise exists from None
            raise

    def remove(self, paths: Iterable[str]) -> dict[str, Exception]:
        async def remove(path: str) -> None:
            try:
                await self._call("rm_file", path)
            except FileNotFoundError:
                pass

        return _failures(self._run({path: remove(path) for path in paths}))


@dataclass
class _Listing:
    """One folder as a listing finds it: its subfolders, and its files with their ETags (None where not kept)."""

    subfolders: set[str] = field(default_factory=set)
    etags: dict[str, str | None] = field(default_factory=dict)

    def folder(self, path: str) -> Folder:
        return Folder(path, sorted(self.subfolders), sorted(self.etags))


def _add_key(folders: dict[str, _Listing], root: str, entry: Mapping[str, Any], failures: list[tuple[str, str]]) -> int:
    """One key of a whole-store listing added to ``folders`` (by path), its folders with it; 1 if it names a
    node's metadata file."""
    relative = entry["name"][len(root) + 1 :]
    *names, file = relative.split("/")
    if "" in names:  # "a//b": no path reaches it (the keys below one such folder come together: one line)
        where = f"{root}/{'/'.join(names[: names.index('') + 1])}"
        if not failures or failures[-1][0] != where:
            failures.append((where, "a folder with an empty name: not visited"))
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
    """Whether S3 refused a conditional write (412 Precondition Failed), from the error s3fs raises."""
    response = getattr(exc.__cause__, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "PreconditionFailed"


def remove_leftovers(files: Files, batch: list[Folder], dry_run: bool) -> tuple[list[str], dict[str, Exception]]:
    """The temporary files killed runs left in ``batch``, removed (not in a dry run): those found and the
    removals that failed. Only with the store's lock held: no live run is writing them."""
    leftovers = [f"{folder.path}/{name}" for folder in batch for name in folder.files if name.endswith(TEMP_SUFFIX)]
    return leftovers, {} if dry_run else files.remove(leftovers)


def _local_path(text: str) -> str:
    """A local path, or a ``file:`` URL of this host (``file:///p``, ``file://localhost/p``) made a path."""
    if not text.startswith("file:"):
        return text
    url = urlsplit(text)
    if url.netloc not in ("", "localhost"):
        raise NotAStoreError(f"{text}: a file URL of another host ({url.netloc}) cannot be opened here")
    return url.path


def open_store(
    location: str | os.PathLike[str], *, jobs: int = JOBS, storage_options: Mapping[str, Any] | None = None
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

    Raises
    ------
    NotAStoreError
        For an empty path, a missing folder, a file, a folder without Zarr
        metadata, or a URL that cannot be opened.
    """
    text = os.fspath(location)
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, got {jobs}")
    if not text.strip():
        raise NotAStoreError("the store path is empty")
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
        files: Files = _FsspecFiles(fs, root, jobs)

        def names_in(folder: str) -> set[str]:
            return {entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(folder, detail=False)}

        is_dir, exists = fs.isdir, fs.exists
    else:
        root = str(Path(_local_path(text)))
        files = _LocalFiles(Path(root))
        is_dir, exists = os.path.isdir, os.path.lexists

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
