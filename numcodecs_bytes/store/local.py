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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

from ..problems import StoreBusyError
from . import local_shards
from .disk import durable, file_version, temporary_beside, temporary_name, umask
from .files import (
    BACKUP_SUFFIX,
    ByteRange,
    Folder,
    Listed,
    Probe,
    Removal,
    Replacement,
    breadth_first,
    changed,
    digest,
    each,
    failures,
    made_for,
)
from .shard_format import Held, Packed, Shard

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
        return each({path: partial(_read_regular_file, path) for path in paths})

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
        replacements = list(replacements)
        staged = self._staged(
            {r.path: r.data for r in replacements},
            {r.path: r.expected for r in replacements if r.backup},
        )
        return self._placed(
            staged, {r.path: partial(self._replace, r, staged[r.path]) for r in replacements}
        )

    def _replace(self, replacement: Replacement, temporaries: Any) -> None:
        path, _, expected, backup = replacement
        temporary, backup_temporary = temporaries
        folder, name = os.path.split(path)
        info = os.stat(path)
        if info.st_nlink > 1:
            # A rename would give this name a new file and leave the other names with the old one.
            raise OSError(
                f"hard link ({info.st_nlink} names for one file): not replaced, which would split "
                "the link; make the names separate copies, then run again"
            )
        if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
            raise OSError(f"not writable: {path}")
        for staged_file in (temporary, backup_temporary):
            if staged_file is not None:
                os.chmod(staged_file, stat.S_IMODE(info.st_mode))
                _keep_owner(staged_file, info)
        if backup:
            _link_or_same(
                backup_temporary,
                path + BACKUP_SUFFIX,
                expected,
                f"{name}{BACKUP_SUFFIX} exists already",
            )
        if Path(path).read_bytes() != expected:
            raise changed()
        os.replace(temporary, path)

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        # a node whose folder holds nothing yet
        for folder in {os.path.dirname(path) for path in files}:
            # where it cannot be made, staging the file there says why, per file
            with suppress(OSError):
                os.makedirs(folder, exist_ok=True)
        staged = self._staged(dict(files), {})
        create = {
            path: partial(self._create, path, staged[path], data) for path, data in files.items()
        }
        return self._placed(staged, create)

    def _create(self, path: str, temporaries: Any, data: bytes) -> None:
        temporary, _ = temporaries
        os.chmod(temporary, 0o666 & ~umask())
        _link_or_same(temporary, path, data, f"{os.path.basename(path)} exists already")

    def _staged(self, files: dict[str, bytes], backups: dict[str, bytes]) -> dict[str, Any]:
        """Each file's data, and the bytes of its backup where ``backups`` has them (by the file's
        path), in temporary files beside it, written but not yet in place; per path (temporary,
        backup's temporary or None) or the OSError met."""

        def stage(path: str, data: bytes) -> tuple[str, str | None]:
            temporary = _temporary(path, data)
            try:
                return temporary, _temporary(
                    path + BACKUP_SUFFIX, backups[path]
                ) if path in backups else None
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise

        staged: dict[str, Any] = each(
            {path: partial(stage, path, data) for path, data in files.items()}
        )
        durable(_temporaries(staged), self.root)
        return staged

    def _placed(
        self, staged: dict[str, Any], place: Mapping[str, Callable[[], None]]
    ) -> dict[str, Exception]:
        """Each staged file put in place (``place``), its leftover temporary files removed, the
        renames made durable; the failures."""
        failed = failures(staged)
        try:
            failed |= failures(
                each({path: job for path, job in place.items() if path not in failed})
            )
        finally:
            for temporary in _temporaries(staged):  # those renamed into place are gone already
                Path(temporary).unlink(missing_ok=True)
        placed = {os.path.dirname(path) for path in place if path not in failed}
        durable(sorted(placed), self.root)
        return failed

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        return failures(
            each({removal.path: partial(self._remove, removal) for removal in removals})
        )

    def _remove(self, removal: Removal) -> None:
        path, read, version = removal
        if read is None and version is None:
            Path(path).unlink(missing_ok=True)
            return
        aside = temporary_name(path, os.urandom(6).hex())
        try:
            os.rename(path, aside)  # from here, a writer of ``path`` makes a new file, which stays
        except FileNotFoundError:
            return
        unchanged = False
        try:
            # a data file, as a shard's source was read: the same file, not written since
            if version is not None:
                # a link: its target's (the link goes, not it)
                unchanged = file_version(os.stat(aside)) == version
            else:
                unchanged = digest(_read_regular_file(aside)) == read
        finally:  # what is not removed goes back, also where reading it failed or was interrupted
            if not unchanged:
                # unless a writer has made a new one meanwhile: theirs is newer
                with suppress(FileExistsError):
                    os.link(aside, path, follow_symlinks=False)
            os.unlink(aside)
        if not unchanged:
            raise changed(": not removed")

    # -- shards ------------------------------------------------------------------------------------

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        """Each file's version as `pack` records it (inode, size, time written); None where there is
        none."""
        return local_shards.versions(paths)

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """None: a local file's version is its inode, size and time written."""
        return None

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        """Each shard made by `local_shards.pack`: copied in the kernel, compared, linked into
        place."""
        return local_shards.pack(list(shards), self.root, on_progress)

    def held(self, shards: Iterable[Shard]) -> dict[str, Held | Exception]:
        return local_shards.held(shards)

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        def below(folder: str) -> list[str]:
            found = []
            # links to folders are not followed
            for where, _, names in os.walk(folder, onerror=_raise):
                relative = os.path.relpath(where, folder).replace(os.sep, "/")
                found += [name if relative == "." else f"{relative}/{name}" for name in names]
            return found

        return each({folder: partial(below, folder) for folder in folders})

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """`files_below`, then `versions` (a listing here tells no version)."""
        return self.files_below(folders), self.versions(paths)

    def tidy(self, folders: Iterable[str]) -> dict[str, Exception]:
        def tidy(folder: str) -> None:
            for where, _, names in os.walk(folder, topdown=False, onerror=_raise):
                for name in names:
                    if made_for(name) is not None:
                        Path(where, name).unlink(missing_ok=True)
                with suppress(FileNotFoundError, OSError):  # not empty: it stays
                    os.rmdir(where)

        return failures(each({folder: partial(tidy, folder) for folder in folders}))

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


def _raise(error: OSError) -> None:
    """For ``os.walk``: a folder that cannot be read is an error, not a folder with nothing in it (a
    missing one is, though: there is nothing below it)."""
    if not isinstance(error, FileNotFoundError):
        raise error


def _temporaries(staged: Mapping[str, Any]) -> list[str]:
    """The temporary files of a batch `_LocalFiles._staged` wrote (its failures aside)."""
    return [
        temporary
        for pair in staged.values()
        if isinstance(pair, tuple)
        for temporary in pair
        if temporary
    ]


def _read_regular_file(path: str) -> bytes:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(
            f"symbolic link (to {os.readlink(path)}): not replaced by a file; use its target"
        )
    if not stat.S_ISREG(info.st_mode):
        raise OSError("not a regular file")  # a FIFO or a device would block or never end
    return Path(path).read_bytes()


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


def _temporary(target: str, data: bytes) -> str:
    """A temporary file beside ``target`` holding ``data`` (not yet durable: see `disk.durable`)."""
    descriptor, temporary = temporary_beside(target)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return temporary


def _link_or_same(temporary: str, target: str, data: bytes, exists: str) -> None:
    """``temporary`` linked into place as ``target``, which must not exist: an existing one is no
    failure where it holds ``data`` already (an earlier run's, or another writer's same bytes)."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        try:
            same = _read_regular_file(target) == data
        except OSError:
            same = False
        if not same:
            raise FileExistsError(f"{exists}: not overwritten") from None


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
            f"its owner (uid {like.st_uid}, gid {like.st_gid}) could not be kept: only that user "
            "or root can replace it without taking it over; run as that user or as root"
        ) from None


probe_local = Probe(
    is_dir=os.path.isdir,
    any_exists=lambda paths: any(os.path.lexists(path) for path in paths),
    names_in=lambda folder: {
        name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name))
    },
)
"""What opening a local store asks of its folder."""
