"""A local folder's shards, packed from its chunk files (see `store.chunks`): copied in the kernel, read back
and compared while the disk writes them, then linked into place."""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

from .chunks import KEPT_SHARD, Packed, Shard, ShardError, parsed_index, same_bytes, shard_index
from .disk import durable, file_version, made_for, past_their_tick, temporary_beside, umask
from .files import each

__all__ = ["pack", "versions"]

_COPY_BLOCK = 8 << 20  # where the kernel cannot copy between files: bytes read and written at a time


def versions(paths: Iterable[str]) -> dict[str, str | Exception | None]:
    """Each file's version as `pack` records it (inode, size, time written); None where there is none."""

    def version(path: str) -> str | None:
        try:
            return file_version(os.stat(path))
        except FileNotFoundError:
            return None

    return each({path: partial(version, path) for path in paths})


def pack(shards: Iterable[Shard], root: Path) -> dict[str, Packed | Exception]:
    """Each shard copied from its chunk files in the kernel (``copy_file_range``: on XFS and btrfs no byte is
    copied), into a temporary file beside it; read back and compared with its sources (which must not have
    changed meanwhile) while the batch reaches the disk (one ``syncfs``, on a thread of its own); then linked
    or renamed into place. A shard that is there already and holds what its sources say is kept."""
    shards = list(shards)
    past_their_tick([info for shard in shards for path in shard.sources if path and (info := _stat(path))])
    kept = each({shard.path: partial(_kept_shard, shard) for shard in shards})
    results: dict[str, Packed | Exception] = {path: found for path, found in kept.items() if found is not None}
    pending = [shard for shard in shards if kept[shard.path] is None]
    _remove_killed_runs_temporaries(pending)
    staged = each({shard.path: partial(_staged_shard, shard) for shard in pending})
    good = {path: item for path, item in staged.items() if not isinstance(item, Exception)}
    temporaries = [temporary for temporary, _, _ in good.values() if temporary]
    try:
        with ThreadPoolExecutor(1) as flusher:  # the disk writes the batch while its bytes are compared
            flushed = flusher.submit(durable, temporaries, root)
            checked = each({shard.path: partial(_checked_shard, shard, *good[shard.path]) for shard in pending
                            if shard.path in good})  # fmt: skip
            flushed.result()
        for shard in pending:
            problem = staged[shard.path] if shard.path not in good else checked[shard.path]
            if isinstance(problem, Exception):
                results[shard.path] = problem
            else:
                results |= each({shard.path: partial(_placed_shard, shard, *good[shard.path])})
    finally:
        for temporary in temporaries:
            Path(temporary).unlink(missing_ok=True)
    durable(sorted({os.path.dirname(shard.path) for shard in pending}), root)
    return results


def _remove_killed_runs_temporaries(shards: list[Shard]) -> None:
    """The temporary files a killed run left for these shards (the walk enters no chunk folder to find them).
    Only these shards' own: another task may be packing others in the same folder."""
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


def _opened(shard: Shard) -> tuple[list[int | None], tuple[int | None, ...], tuple[str | None, ...]]:
    """Each of the shard's sources opened (None where missing), with its size and version; an OSError where one
    is not a regular file (a FIFO is opened without waiting for a writer, and refused)."""
    descriptors: list[int | None] = []
    sizes: list[int | None] = []
    versions: list[str | None] = []
    try:
        for path in shard.sources:
            descriptor, info = _open_source(path) if path is not None else (None, None)
            descriptors.append(descriptor)
            sizes.append(None if info is None else info.st_size)
            versions.append(None if info is None else file_version(info))
    except BaseException:
        _close(descriptors)
        raise
    return descriptors, tuple(sizes), tuple(versions)


def _open_source(path: str) -> tuple[int | None, os.stat_result | None]:
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        raise OSError(f"{path}: not a regular file: not read")
    return descriptor, info


def _close(descriptors: list[int | None]) -> None:
    for descriptor in descriptors:
        if descriptor is not None:
            os.close(descriptor)


def _staged_shard(shard: Shard) -> tuple[str | None, tuple[int | None, ...], tuple[str | None, ...]]:
    """The shard in a temporary file beside its path (None where every source is missing), with each inner
    chunk's size and its source's version."""
    sources, sizes, versions = _opened(shard)
    try:
        if all(size is None for size in sizes):
            return None, sizes, versions
        os.makedirs(os.path.dirname(shard.path), exist_ok=True)
        descriptor, temporary = temporary_beside(shard.path)
        try:
            offset = 0
            for source, size in zip(sources, sizes, strict=True):
                if source is not None and size is not None:
                    _copy(source, descriptor, size, offset)
                    offset += size
            os.pwrite(descriptor, shard_index(sizes), offset)
        except BaseException:
            os.close(descriptor)
            Path(temporary).unlink(missing_ok=True)
            raise
        os.close(descriptor)
        return temporary, sizes, versions
    finally:
        _close(sources)


def _copy(source: int, target: int, size: int, offset: int) -> None:
    """``size`` bytes of ``source`` from its start into ``target`` at ``offset``: in the kernel where it can."""
    done = 0
    try:
        while done < size:
            copied = os.copy_file_range(source, target, size - done, done, offset + done)
            if copied == 0:
                break  # the source is shorter than it was: the comparison that follows says so
            done += copied
    except (AttributeError, OSError) as exc:  # no copy_file_range here (not Linux), or not between these files
        if isinstance(exc, OSError) and exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    else:
        return
    while done < size:
        block = os.pread(source, min(_COPY_BLOCK, size - done), done)
        if not block:
            break
        os.pwrite(target, block, offset + done)
        done += len(block)


def _kept_shard(shard: Shard) -> Packed | None:
    """The shard at its path where it holds what its sources hold now (an earlier run's); None where there is
    none, or (where it may be replaced) another; a ShardError where one that may not be replaced differs."""
    try:
        handle = open(shard.path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        sizes, versions, same = _compared(shard, handle.fileno())
    if same:
        return Packed(sizes, versions, False)
    if not shard.replace:
        raise ShardError(KEPT_SHARD)
    return None


def _checked_shard(
    shard: Shard, temporary: str | None, sizes: tuple[int | None, ...], versions: tuple[str | None, ...]
) -> None:
    """A staged shard read back: its index parsed, each inner chunk the bytes of its source, which has not
    changed since it was read; a ShardError where not."""
    if temporary is None:
        return
    with open(temporary, "rb") as handle:
        seen_sizes, seen_versions, same = _compared(shard, handle.fileno())
    if seen_versions != versions or seen_sizes != sizes:
        changed_source = next(
            (path for path, a, b in zip(shard.sources, versions, seen_versions, strict=True) if a != b), None
        )
        raise ShardError(f"{changed_source}: changed while it was read: no shard written")
    if not same:
        raise ShardError(f"{os.path.basename(shard.path)}: not what its sources hold, read back (a file system error)")


def _compared(shard: Shard, descriptor: int) -> tuple[tuple[int | None, ...], tuple[str | None, ...], bool]:
    """A shard file compared with its sources as they are now: their sizes and versions, and whether the file
    holds exactly them, and its index says so."""
    sources, sizes, versions = _opened(shard)
    try:
        if os.fstat(descriptor).st_size == 0:
            return sizes, versions, False
        with _mapped(descriptor) as view:
            try:
                index = parsed_index(view, len(sizes))
                same = [entry is None for entry in index] == [size is None for size in sizes]
                offset = 0
                for source, size, entry in zip(sources, sizes, index, strict=True):
                    if not same or source is None or entry is None:
                        continue
                    same = entry == (offset, size) and (not size or _same_as_file(view[offset : offset + size], source))
                    offset += size or 0
            except ShardError:
                same = False
        return sizes, versions, same
    finally:
        _close(sources)


def _placed_shard(
    shard: Shard, temporary: str | None, sizes: tuple[int | None, ...], versions: tuple[str | None, ...]
) -> Packed:
    """A staged and checked shard put in place: linked where there is none, else (an earlier run's, which holds
    other bytes) renamed over it."""
    if temporary is None:  # no chunk: no shard (an interrupted run's file there says otherwise: it goes)
        Path(shard.path).unlink(missing_ok=True)
        return Packed(sizes, versions, False)
    os.chmod(temporary, 0o666 & ~umask())
    try:
        os.link(temporary, shard.path)
    except FileExistsError:
        if not shard.replace:
            raise ShardError(KEPT_SHARD) from None
        os.replace(temporary, shard.path)
    return Packed(sizes, versions, True)


def _same_as_file(data: memoryview, descriptor: int) -> bool:
    size = os.fstat(descriptor).st_size
    if size != data.nbytes:
        return False
    with _mapped(descriptor) as view:
        return same_bytes(data, view)


@contextmanager
def _mapped(descriptor: int) -> Iterator[memoryview]:
    """A file's bytes, mapped; unmapped after, unless a view of them is still held (by the traceback of an error
    on its way out: the error goes on, the mapping goes with the view)."""
    mapped = mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
    view = memoryview(mapped)
    try:
        yield view
    finally:
        try:
            view.release()
            mapped.close()
        except BufferError:
            pass
