"""Store access for the store tools: local folders and fsspec URLs, one run at a time, atomic writes.

`open_store` checks a location and returns its `Files`; `store_lock` keeps a
second run off a local store. Every write is whole or absent at every moment:
a local file is written to a temporary file beside it, flushed, and renamed
over the target; an object store replaces an object in one PUT. Nothing here
prints or knows about codecs.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "NODE_FILES",
    "TEMP_SUFFIX",
    "Files",
    "NotAStoreError",
    "StoreBusyError",
    "open_store",
    "prune_array_folder",
    "relative_path",
    "store_lock",
]

NODE_FILES = ("zarr.json", ".zarray", ".zgroup", ".zmetadata")
"""Any of these makes a folder a Zarr node."""
TEMP_SUFFIX = ".numcodecs-bytes-tmp"
"""The suffix of temporary files: only a killed run leaves one behind."""
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


class Files(Protocol):
    """What the store tools need of a file system: a local folder or an fsspec one."""

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        """Top down: (folder, its subfolders, its files); removing subfolders prunes the walk.

        What cannot be visited (an unreadable folder, a link among the
        subfolders left after pruning) is added to ``failures``.
        """
        ...

    def read(self, path: str) -> bytes:
        """A metadata file (never through a symbolic link: it could not be replaced)."""
        ...

    def read_data(self, path: str) -> bytes | None:
        """A data file such as a chunk, links followed; None where there is none."""
        ...

    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None:
        """Replace ``path``, which must still hold ``expected``, by ``data`` (OSError if it cannot)."""
        ...

    def create(self, path: str, data: bytes) -> None:
        """Write a new file ``path`` (OSError if it exists: never overwritten)."""
        ...

    def remove(self, path: str) -> None: ...


class _LocalFiles:
    """A local folder. Files are replaced atomically (rename), keeping mode, owner and group."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        def unreadable(error: OSError) -> None:
            failures.append((str(error.filename), f"folder not read: {error.strerror or error}"))

        for folder, subfolders, files in os.walk(self.root, onerror=unreadable):
            subfolders.sort()
            yield folder, subfolders, sorted(files)
            # Only the folders the caller still wants: a linked chunk folder inside an array is no node.
            for name in [name for name in subfolders if os.path.islink(os.path.join(folder, name))]:
                subfolders.remove(name)  # never followed: it may lead out of the store, or in a loop
                failures.append((os.path.join(folder, name), "symbolic link to a folder: not followed"))

    def read(self, path: str) -> bytes:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise OSError(f"symbolic link (to {os.readlink(path)}): not replaced by a file; use its target")
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")  # a FIFO or a device would block or never end
        return Path(path).read_bytes()

    def read_data(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return None

    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None:
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

    def create(self, path: str, data: bytes) -> None:
        _write_then_rename(path, data, None)

    def remove(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)


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
    """Any fsspec file system. An object store replaces an object in one PUT: readers see old or new."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs, self.root = fs, root.rstrip("/")

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        for folder, subfolders, files in self.fs.walk(self.root, detail=False):
            subfolders.sort()
            yield folder, subfolders, sorted(files)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def read_data(self, path: str) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            return None

    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None:
        if backup:
            if self.fs.exists(path + _BACKUP_SUFFIX):
                raise OSError(f"{path.rsplit('/', 1)[-1]}{_BACKUP_SUFFIX} exists already: not overwritten")
            self.fs.pipe_file(path + _BACKUP_SUFFIX, expected)
        if bytes(self.fs.cat_file(path)) != expected:
            raise OSError("changed by someone else meanwhile: left as it is")
        self.fs.pipe_file(path, data)

    def create(self, path: str, data: bytes) -> None:
        if self.fs.exists(path):
            raise FileExistsError(f"{path.rsplit('/', 1)[-1]} exists already: not overwritten")
        self.fs.pipe_file(path, data)

    def remove(self, path: str) -> None:
        self.fs.rm_file(path)


def _local_path(text: str) -> str:
    """A local path, or a ``file:`` URL of this host (``file:///p``, ``file://localhost/p``) made a path."""
    if not text.startswith("file:"):
        return text
    url = urlsplit(text)
    if url.netloc not in ("", "localhost"):
        raise NotAStoreError(f"{text}: a file URL of another host ({url.netloc}) cannot be opened here")
    return url.path


def open_store(location: str | os.PathLike[str]) -> tuple[Files, str]:
    """The files of the store at ``location`` and its root, after checking it is a Zarr store.

    Raises
    ------
    NotAStoreError
        For an empty path, a missing folder, a file, a folder without Zarr
        metadata, or a URL that cannot be opened.
    """
    text = os.fspath(location)
    if not text.strip():
        raise NotAStoreError("the store path is empty")
    if "://" in text and not text.startswith("file:"):
        try:
            import fsspec

            fs, url_root = fsspec.core.url_to_fs(text)
        except ImportError as exc:
            raise NotAStoreError(f"{text}: this URL needs a package that is not installed ({exc})") from None
        except Exception as exc:  # each file system fails in its own words (a missing zip, a tar that is none)
            raise NotAStoreError(f"{text}: not a URL fsspec can open ({type(exc).__name__}: {exc})") from None
        root = url_root.rstrip("/")
        # fsspec shares one instance per URL in a process, with the folder listings it made: a store
        # changed since (by another writer, or by the caller) must be seen as it is now.
        fs.invalidate_cache(root)
        files: Files = _FsspecFiles(fs, root)
        is_dir, is_file, exists = fs.isdir, fs.isfile, fs.exists
    else:
        root = str(Path(_local_path(text)))
        files = _LocalFiles(Path(root))
        is_dir, is_file, exists = os.path.isdir, os.path.isfile, os.path.lexists
    try:
        problem = _not_a_store(root, is_dir, is_file, exists)
    except Exception as exc:  # OSError, or a file system's own error (a broken reference file system)
        raise NotAStoreError(f"{text}: cannot be reached ({type(exc).__name__}: {exc})") from None
    if problem is not None:
        raise NotAStoreError(f"{text}: {problem}")
    return files, root


def _not_a_store(
    root: str, is_dir: Callable[[str], bool], is_file: Callable[[str], bool], exists: Callable[[str], bool]
) -> str | None:
    """Why ``root`` is not a Zarr store, or None if it is one."""
    if not is_dir(root):
        return "not a folder" if exists(root) else "no such folder"
    if not any(is_file(f"{root}/{name}") for name in NODE_FILES):
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
