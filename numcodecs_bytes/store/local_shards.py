"""A local folder's shards, packed from its chunk files (see `store.shard_format`): copied in the
kernel, read back and compared, made durable a batch at a time, then linked into place.

Resources stay bounded whatever the shard size: one source file is open at a
time, and comparisons read `COMPARE_BLOCK` bytes of each side at a time (no
file is mapped whole).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path

from .disk import (
    durable,
    file_version,
    past_their_tick,
    raise_unless_missing,
    temporary_beside,
    umask,
)
from .files import BATCH, Files, each, failures, made_for
from .shard_format import (
    ByteRange,
    Held,
    Packed,
    Shard,
    ShardError,
    gone,
    index_size,
    parsed_index,
    shard_index,
    source_path,
)

__all__ = ["COMPARE_BLOCK", "LocalPacking", "held", "pack", "versions"]

COMPARE_BLOCK = 4 << 20
"""Bytes of each side read at a time where a shard is compared with its sources: what bounds that
memory."""
# where the kernel cannot copy between files: bytes read and written at a time
_COPY_BLOCK = 8 << 20

_Staged = tuple[str | None, tuple[int | None, ...], tuple[str | None, ...], int]
"""A shard staged: its temporary file (None: no source, no shard), each inner chunk's size and its
source's version, and how many sources are symbolic links."""


def versions(paths: Iterable[str]) -> dict[str, str | Exception | None]:
    """Each file's version as `pack` records it (inode, size, time written; links followed); None
    where there is none."""

    def version(path: str) -> str | None:
        try:
            return file_version(os.stat(path))
        except FileNotFoundError:
            return None

    return each({path: partial(version, path) for path in paths})


def pack(
    shards: Sequence[Shard], root: Path, on_progress: Callable[[int, int], None] | None = None
) -> dict[str, Packed | Exception]:
    """Each shard copied from its chunk files in the kernel (``copy_file_range``: on XFS and btrfs
    no byte is copied) into a temporary file beside it, read back at once and compared with its
    sources (which must not have changed meanwhile); a batch's shards made durable together (one
    ``syncfs``), then linked or renamed into place. ``on_progress`` hears of (shards, bytes) packed
    as each chunk and each shard is compared."""
    results: dict[str, Packed | Exception] = {}
    for start in range(0, len(shards), BATCH):
        results |= _pack_batch(list(shards[start : start + BATCH]), root, on_progress or _nothing)
    return results


def _nothing(shards: int, nbytes: int) -> None:
    """No one hears of the progress."""


def _pack_batch(
    shards: list[Shard], root: Path, on_progress: Callable[[int, int], None]
) -> dict[str, Packed | Exception]:
    past_their_tick(
        [
            info
            for shard in shards
            for src in shard.sources
            if src and (info := _stat(source_path(src)))
        ]
    )
    _remove_killed_runs_temporaries(shards)
    staged: dict[str, _Staged | Exception] = {}
    try:
        for shard in shards:
            staged |= each({shard.path: partial(_staged_and_checked, shard, on_progress)})
            on_progress(1, 0)
        temporaries = [
            item[0] for item in staged.values() if not isinstance(item, Exception) and item[0]
        ]
        durable(temporaries, root)
        results: dict[str, Packed | Exception] = {}
        for shard in shards:
            item = staged[shard.path]
            results |= (
                {shard.path: item}
                if isinstance(item, Exception)
                else each({shard.path: partial(_placed_shard, shard, *item)})
            )
    finally:
        for item in staged.values():
            if not isinstance(item, Exception) and item[0]:
                # those linked into place have another name too
                Path(item[0]).unlink(missing_ok=True)
    durable(sorted({os.path.dirname(shard.path) for shard in shards}), root)
    return results


def _staged_and_checked(shard: Shard, on_progress: Callable[[int, int], None]) -> _Staged:
    """A shard staged (`_staged_shard`) and checked (`_checked_shard`): its temporary file goes
    where the check fails."""
    staged = _staged_shard(shard)
    try:
        _checked_shard(shard, *staged, on_progress=on_progress)
    except BaseException:
        if staged[0] is not None:
            Path(staged[0]).unlink(missing_ok=True)
        raise
    return staged


def _remove_killed_runs_temporaries(shards: list[Shard]) -> None:
    """The temporary files a killed run left for these shards (the walk enters no chunk folder to
    find them). Only these shards' own: another task may be packing others in the same folder."""
    names: dict[str, set[str]] = {}
    for shard in shards:
        folder, name = os.path.split(shard.path)
        names.setdefault(folder, set()).add(name)
    for folder, here in names.items():
        try:
            entries = os.listdir(folder)
        except OSError:
            continue  # no folder yet (staging makes it), or one staging will report
        for entry in entries:
            if made_for(entry) in here:
                with suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, entry))


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None  # missing, or a problem that staging meets and reports


def _open_source(path: str) -> tuple[int, os.stat_result]:
    """A source opened for reading (links followed), with what ``fstat`` says of it; `gone` where it
    is missing, an OSError where it is not a regular file (a FIFO is opened without waiting for a
    writer, and refused)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise gone(os.path.basename(path)) from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        raise OSError(f"{path}: not a regular file: not read")
    return descriptor, info


def _staged_shard(shard: Shard) -> _Staged:
    """The shard in a temporary file beside its path (None where it has no source), its sources
    copied one at a time, with each inner chunk's size and its source's version."""
    if all(source is None for source in shard.sources):
        return None, tuple(None for _ in shard.sources), tuple(None for _ in shard.sources), 0
    os.makedirs(os.path.dirname(shard.path), exist_ok=True)
    descriptor, temporary = temporary_beside(shard.path)
    sizes: list[int | None] = []
    versions: list[str | None] = []
    try:
        offset = 0
        for source in shard.sources:
            if source is None:
                sizes.append(None)
                versions.append(None)
                continue
            opened, info = _open_source(source_path(source))
            try:
                start, size = _span(source, info)
                _copy(opened, descriptor, size, offset, start)
            finally:
                os.close(opened)
            sizes.append(size)
            versions.append(file_version(info))
            offset += size
        os.pwrite(descriptor, shard_index(sizes), offset)
    except BaseException:
        os.close(descriptor)
        Path(temporary).unlink(missing_ok=True)
        raise
    os.close(descriptor)
    linked = sum(isinstance(source, str) and os.path.islink(source) for source in shard.sources)
    return temporary, tuple(sizes), tuple(versions), linked


def _span(source: str | ByteRange, info: os.stat_result) -> tuple[int, int]:
    """Where a source's bytes start in its file, and how many: the whole file, or a range of it
    (which must lie in it: a shard shorter than its index says is not read)."""
    if isinstance(source, str):
        return 0, info.st_size
    if not 0 <= source.start <= source.end <= info.st_size:
        raise ShardError(
            f"{os.path.basename(source.path)}: {info.st_size:,} bytes, where its index "
            f"reads bytes {source.start:,} to {source.end:,}"
        )
    return source.start, source.end - source.start


def _copy(source: int, target: int, size: int, offset: int, start: int = 0) -> None:
    """``size`` bytes of ``source`` from ``start`` into ``target`` at ``offset``: in the kernel
    where it can."""
    done = 0
    try:
        while done < size:
            copied = os.copy_file_range(source, target, size - done, start + done, offset + done)
            if copied == 0:
                break  # the source is shorter than it was: the comparison that follows says so
            done += copied
    # no copy_file_range here (not Linux), or not between these files
    except (AttributeError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (
            errno.EXDEV,
            errno.ENOSYS,
            errno.EINVAL,
            errno.EOPNOTSUPP,
        ):
            raise
    else:
        return
    while done < size:
        block = os.pread(source, min(_COPY_BLOCK, size - done), start + done)
        if not block:
            break
        os.pwrite(target, block, offset + done)
        done += len(block)


def _checked_shard(
    shard: Shard,
    temporary: str | None,
    sizes: tuple[int | None, ...],
    versions: tuple[str | None, ...],
    _: int,
    *,
    on_progress: Callable[[int, int], None],
) -> None:
    """A staged shard read back: its index parsed, each inner chunk the bytes of its source, which
    has not changed since it was copied; a ShardError where not."""
    if temporary is None:
        return
    descriptor = os.open(temporary, os.O_RDONLY)
    try:
        entries = _index_of(descriptor, len(sizes))
        offset = 0
        for source_of, size, version, entry in zip(
            shard.sources, sizes, versions, entries, strict=True
        ):
            if source_of is None or size is None:
                if entry is not None:
                    raise ShardError(
                        f"{os.path.basename(shard.path)}: its index reads a chunk "
                        "where none was put"
                    )
                continue
            path = source_path(source_of)
            source, info = _open_source(path)
            try:
                if file_version(info) != version:
                    raise ShardError(
                        f"{os.path.basename(path)}: changed while it was read: no shard written"
                    )
                start, _ = _span(source_of, info)
                if entry != (offset, size) or not _same_ranges(
                    source, start, descriptor, offset, size
                ):
                    raise ShardError(
                        f"{os.path.basename(shard.path)}: not what its sources hold, "
                        "read back (a file system error)"
                    )
            finally:
                os.close(source)
            offset += size
            on_progress(0, size)
    finally:
        os.close(descriptor)


def _placed_shard(
    shard: Shard,
    temporary: str | None,
    sizes: tuple[int | None, ...],
    versions: tuple[str | None, ...],
    linked: int,
) -> Packed:
    """A staged and checked shard put in place: linked where there is none, else (an interrupted
    run's: no zarr.json reads it, the caller made sure) renamed over it."""
    # no chunk: no shard (an interrupted run's file there says otherwise: it goes)
    if temporary is None:
        Path(shard.path).unlink(missing_ok=True)
        return Packed(sizes, versions, False)
    os.chmod(temporary, 0o666 & ~umask())
    try:
        os.link(temporary, shard.path)
    except FileExistsError:
        os.replace(temporary, shard.path)
    return Packed(sizes, versions, True, linked)


def held(shards: Iterable[Shard]) -> dict[str, Held | Exception]:
    """What each shard in the store holds of its sources: compared a block at a time, one source
    open at a time; a FileNotFoundError where the shard is missing, a ShardError where its index
    cannot be read."""
    return each({shard.path: partial(_held, shard) for shard in shards})


def _held(shard: Shard) -> Held:
    descriptor = os.open(shard.path, os.O_RDONLY)
    try:
        info = os.fstat(descriptor)
        entries = _index_of(descriptor, len(shard.sources))
        same: list[bool | None] = []
        versions: list[str | None] = []
        written: list[float | None] = []
        for path, entry in zip(shard.sources, entries, strict=True):
            try:
                source, source_info = (
                    _open_source(source_path(path)) if path is not None else (None, None)
                )
            except ShardError:  # gone since it was listed: nothing to compare, nothing to remove
                source, source_info = None, None
            if source is None or source_info is None:
                same.append(None)
                versions.append(None)
                written.append(None)
                continue
            try:
                size = source_info.st_size
                same.append(
                    entry is not None
                    and entry[1] == size
                    and _same_ranges(source, 0, descriptor, entry[0], size)
                )
            finally:
                os.close(source)
            versions.append(file_version(source_info))
            written.append(source_info.st_mtime_ns / 1e9)
        return Held(tuple(same), tuple(versions), tuple(written), info.st_mtime_ns / 1e9)
    finally:
        os.close(descriptor)


def _index_of(descriptor: int, count: int) -> list[tuple[int, int] | None]:
    """A shard file's index (its last bytes), its checksum checked."""
    size = os.fstat(descriptor).st_size
    footer = index_size(count)
    if size < footer:
        raise ShardError(f"shard of {size} bytes is shorter than its index ({footer} bytes)")
    return parsed_index(os.pread(descriptor, footer, size - footer), count)


def _same_ranges(left: int, left_offset: int, right: int, right_offset: int, size: int) -> bool:
    """Whether ``size`` bytes of two files, from these offsets, are the same: `COMPARE_BLOCK` at a
    time."""
    done = 0
    while done < size:
        step = min(COMPARE_BLOCK, size - done)
        a = os.pread(left, step, left_offset + done)
        if len(a) != step or a != os.pread(right, step, right_offset + done):
            return False
        done += step
    return True


class LocalPacking:
    """The packing of a local folder's shards (`files.ShardPacking`): copied in the kernel,
    compared, linked into place (`pack`); what a shard holds, compared byte for byte (`held`); what
    was packed from, as it is now (`files_and_versions`); the chunk folders tidied (`tidy`)."""

    def __init__(self, files: Files, root: Path) -> None:
        self.files, self.root = files, root

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        return pack(list(shards), self.root, on_progress)

    def held(self, shards: Iterable[Shard]) -> dict[str, Held | Exception]:
        return held(shards)

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """`Files.files_below`, then `versions` (a listing here tells no version)."""
        return self.files.files_below(folders), versions(paths)

    def tidy(self, folders: Iterable[str]) -> dict[str, Exception]:
        def tidy(folder: str) -> None:
            for where, _, names in os.walk(folder, topdown=False, onerror=raise_unless_missing):
                for name in names:
                    if made_for(name) is not None:
                        Path(where, name).unlink(missing_ok=True)
                with suppress(FileNotFoundError, OSError):  # not empty: it stays
                    os.rmdir(where)

        return failures(each({folder: partial(tidy, folder) for folder in folders}))
