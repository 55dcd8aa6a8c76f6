"""A local folder's writes: each file to write staged in a temporary file beside it, the batch made
durable together, then renamed or linked into place; a file to remove renamed aside, compared, and
put back where it changed. Nothing is replaced or removed that changed since it was read."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from .disk import (
    durable,
    file_version,
    read_regular_file,
    temporary_beside,
    temporary_name,
    umask,
)
from .files import BACKUP_SUFFIX, Removal, Replacement, changed, digest, each, failures

__all__ = ["create", "create_one", "remove_one", "replace", "replace_one"]


def replace(root: Path, replacements: Iterable[Replacement]) -> dict[str, Exception]:
    """Each file replaced where it still holds what was read, atomically (a rename), keeping its
    mode, owner and group (a backup beside it where asked); the failures."""
    replacements = list(replacements)
    staged = _staged(
        root,
        {r.path: r.data for r in replacements},
        {r.path: r.expected for r in replacements if r.backup},
    )
    return _placed(
        root, staged, {r.path: partial(replace_one, r, staged[r.path]) for r in replacements}
    )


def replace_one(replacement: Replacement, temporaries: Any) -> None:
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


def create(root: Path, files: Mapping[str, bytes]) -> dict[str, Exception]:
    """New files, each linked into place (an existing one never overwritten: one holding the
    same bytes is no failure); the failures."""
    # a node whose folder holds nothing yet
    for folder in {os.path.dirname(path) for path in files}:
        # where it cannot be made, staging the file there says why, per file
        with suppress(OSError):
            os.makedirs(folder, exist_ok=True)
    staged = _staged(root, dict(files), {})
    create = {path: partial(create_one, path, staged[path], data) for path, data in files.items()}
    return _placed(root, staged, create)


def create_one(path: str, temporaries: Any, data: bytes) -> None:
    temporary, _ = temporaries
    os.chmod(temporary, 0o666 & ~umask())
    _link_or_same(temporary, path, data, f"{os.path.basename(path)} exists already")


def _staged(root: Path, files: dict[str, bytes], backups: dict[str, bytes]) -> dict[str, Any]:
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
    durable(_temporaries(staged), root)
    return staged


def _placed(
    root: Path, staged: dict[str, Any], place: Mapping[str, Callable[[], None]]
) -> dict[str, Exception]:
    """Each staged file put in place (``place``), its leftover temporary files removed, the
    renames made durable; the failures."""
    failed = failures(staged)
    try:
        failed |= failures(each({path: job for path, job in place.items() if path not in failed}))
    finally:
        for temporary in _temporaries(staged):  # those renamed into place are gone already
            Path(temporary).unlink(missing_ok=True)
    placed = {os.path.dirname(path) for path in place if path not in failed}
    durable(sorted(placed), root)
    return failed


def remove_one(removal: Removal) -> None:
    """A file removed where it is still the version read (or holds what was read): renamed
    aside, compared, and put back where it changed (`files.changed`)."""
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
            unchanged = digest(read_regular_file(aside)) == read
    finally:  # what is not removed goes back, also where reading it failed or was interrupted
        if not unchanged:
            # unless a writer has made a new one meanwhile: theirs is newer
            with suppress(FileExistsError):
                os.link(aside, path, follow_symlinks=False)
        os.unlink(aside)
    if not unchanged:
        raise changed(": not removed")


def _temporaries(staged: Mapping[str, Any]) -> list[str]:
    """The temporary files of a batch `_staged` wrote (its failures aside)."""
    return [
        temporary
        for pair in staged.values()
        if isinstance(pair, tuple)
        for temporary in pair
        if temporary
    ]


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
            same = read_regular_file(target) == data
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
