"""A local folder as `Files`: atomic writes (a temporary file beside the target, then a rename or a
link), a batch's files made durable together (one ``syncfs`` on Linux), the store's lock
(``flock``).

A local folder is worked one file after another: a disk answers in
microseconds, where threads would not pay. Nothing is replaced or removed that
changed since it was read: a file is compared with what was read just before
its rename, and a file to remove is first renamed aside, compared, and put
back if it changed. A metadata file is never read through a symbolic link (it
could not be replaced), and one that is not a regular file (a FIFO, a
device) is refused, never read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from ..problems import StoreBusyError
from . import local_shards, local_writes
from .disk import raise_unless_missing, read_regular_file
from .files import (
    ByteRange,
    Folder,
    Listed,
    Probe,
    Removal,
    Replacement,
    breadth_first,
    each,
    failures,
)

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = ["LocalFiles", "probe_local"]


class LocalFiles:
    """A local folder. Files are replaced atomically (rename), keeping mode, owner and group."""

    deadline: float | None = None
    concurrency = 1  # one file after another: a disk answers in microseconds

    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        def listed(paths: list[str]) -> Listed:
            unvisited: list[tuple[str, str]] = []
            folders = [folder for path in paths if (folder := _listed(path, unvisited))]
            return Listed(folders, unvisited)

        def entered(folder: Folder, name: str) -> str | tuple[str, str]:
            path = os.path.join(folder.path, name)
            if os.path.islink(path):  # never followed: it may lead out of the store, or in a loop
                return path, "symbolic link to a folder: not followed"
            return path

        return breadth_first(str(self.root), listed, entered, left_out)

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        return each({path: partial(read_regular_file, path) for path in paths})

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        def read(path: str) -> bytes | None:
            try:
                info = os.stat(path)  # links followed: chunk folders may be deduplicated by links
            except FileNotFoundError:
                return None
            if not stat.S_ISREG(info.st_mode):
                # a FIFO or a device would block or never end
                raise OSError("not a regular file: not read")
            return Path(path).read_bytes()

        return each({path: partial(read, path) for path in paths})

    def read_ranges(self, ranges: Iterable[ByteRange]) -> dict[ByteRange, bytes | Exception]:
        def read(wanted: ByteRange) -> bytes:
            with open(wanted.path, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    raise OSError(f"{wanted.path}: not a regular file: not read")
                data = os.pread(handle.fileno(), wanted.end - wanted.start, wanted.start)
            if len(data) != wanted.end - wanted.start:
                raise OSError(
                    f"{wanted.path}: {wanted.start + len(data):,} bytes, not {wanted.end:,}"
                )
            return data

        return each({wanted: partial(read, wanted) for wanted in ranges})

    def tails(self, wanted: Mapping[str, int]) -> dict[str, tuple[int, bytes] | Exception]:
        def tail(path: str, size: int) -> tuple[int, bytes]:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise OSError(f"{path}: not a regular file: not read")
                if info.st_size < size:
                    raise OSError(f"{path}: {info.st_size:,} bytes, fewer than {size:,}")
                return info.st_size, os.pread(handle.fileno(), size, info.st_size - size)

        return each({path: partial(tail, path, size) for path, size in wanted.items()})

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        return each(
            {
                path: partial(
                    lambda path: os.stat(path, follow_symlinks=False).st_mtime_ns / 1e9, path
                )
                for path in paths
            }
        )

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        return local_writes.replace(self.root, replacements)

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        return local_writes.create(self.root, files)

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        return failures(
            each({removal.path: partial(local_writes.remove_one, removal) for removal in removals})
        )

    # -- shards ------------------------------------------------------------------------------------

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        """Each file's version as `pack` records it (inode, size, time written); None where there is
        none."""
        return local_shards.versions(paths)

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """None: a local file's version is its inode, size and time written."""
        return None

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        def below(folder: str) -> list[str]:
            found = []
            # links to folders are not followed
            for where, _, names in os.walk(folder, onerror=raise_unless_missing):
                relative = os.path.relpath(where, folder).replace(os.sep, "/")
                found += [name if relative == "." else f"{relative}/{name}" for name in names]
            return found

        return each({folder: partial(below, folder) for folder in folders})

    @contextmanager
    def lock(self, top: str) -> Iterator[None]:
        """One run of the store tools at a time per local store: an advisory lock (``flock``) on the
        folder of the store's topmost node, so that runs given a folder below it or above it exclude
        each other too. No file is added, and the system releases it when the process ends, however
        it ends."""
        if fcntl is None:  # Windows: no advisory locks
            yield
            return
        descriptor = os.open(top, os.O_RDONLY)
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise StoreBusyError(
                    f"{top}: another numcodecs-bytes run is working on this store"
                ) from None
            yield
        finally:
            os.close(descriptor)


def _listed(path: str, unvisited: list[tuple[str, str]]) -> Folder | None:
    """A local folder's subfolders (links to folders among them, as ``os.walk`` lists them) and
    files."""
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
    return Folder(path, tuple(sorted(subfolders)), tuple(sorted(files)))


probe_local = Probe(
    is_dir=os.path.isdir,
    any_exists=lambda paths: any(os.path.lexists(path) for path in paths),
    names_in=lambda folder: {
        name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name))
    },
)
"""What opening a local store asks of its folder."""
