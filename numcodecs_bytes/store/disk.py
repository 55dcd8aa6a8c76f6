"""A local disk's facts for writing files that last: ``syncfs``, the umask, temporary files' names,
a file's version, and when a version tells every later write apart."""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .files import TEMP_SUFFIX, temporary_entry

__all__ = [
    "durable",
    "file_version",
    "past_their_tick",
    "raise_unless_missing",
    "read_regular_file",
    "temporary_beside",
    "temporary_name",
    "umask",
]


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


def durable(paths: list[str], root: Path) -> None:
    """Files written, or folders whose names changed, on disk: one ``syncfs`` of the store's file
    system on Linux (where a folder of many small files would take a ``fsync`` each), else a
    ``fsync`` per path."""
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


def temporary_name(path: str, tag: str) -> str:
    """A temporary file's path beside ``path`` (`files.temporary_entry`)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, temporary_entry(name, tag))


def temporary_beside(path: str) -> tuple[int, str]:
    """A new empty temporary file beside ``path``, its descriptor and name: `temporary_name`'s, a
    random tag."""
    folder, name = os.path.split(path)
    return tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=TEMP_SUFFIX)


def umask() -> int:
    """The process's umask, read without setting it (``os.umask`` would change it for every thread
    meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022  # where the system does not say: the usual default


def file_version(info: os.stat_result) -> str:
    """A file's version: the same file, of the same size, written at the same time (a rename keeps
    it)."""
    return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


# The clock Linux stamps files with, CLOCK_REALTIME_COARSE (5; Python names no constant for it):
# behind the precise one by up to a tick. Elsewhere the precise one.
_FILE_CLOCK = 5 if sys.platform.startswith("linux") else time.CLOCK_REALTIME


def past_their_tick(infos: list[os.stat_result]) -> None:
    """Back once a write to any of these files would give it another time written than it has now.

    A file's time written comes from the kernel's coarse clock (a tick of 1 to 10 ms), rounded down
    to what its file system keeps: a file rewritten in place, to the same size, within the tick of
    its last write would keep its version. Once that clock is past the tick (two seconds past a time
    in whole seconds: FAT keeps two), any later write shows. Files written earlier than that, as
    most are, cost no wait. (Since Linux 6.13 a file whose time was read gets a precise one at its
    next write: the wait is then a formality.)
    """
    newest = max((info.st_mtime_ns for info in infos), default=0)
    tick = 2_000_000_000 if newest % 1_000_000_000 == 0 else 0
    while (wait := newest + tick - time.clock_gettime_ns(_FILE_CLOCK)) >= 0:
        time.sleep(wait / 1e9 + 0.001)


def read_regular_file(path: str) -> bytes:
    """A file's bytes, never through a symbolic link (it could not be replaced) nor of a file that
    is not a regular one (a FIFO or a device would block or never end)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(
            f"symbolic link (to {os.readlink(path)}): not replaced by a file; use its target"
        )
    if not stat.S_ISREG(info.st_mode):
        raise OSError("not a regular file")  # a FIFO or a device would block or never end
    return Path(path).read_bytes()


def raise_unless_missing(error: OSError) -> None:
    """For ``os.walk``: a folder that cannot be read is an error, not a folder with nothing in it (a
    missing one is, though: there is nothing below it)."""
    if not isinstance(error, FileNotFoundError):
        raise error
