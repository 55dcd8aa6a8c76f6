"""What the store tools need of a file system, a batch at a time (`Files`: the basic operations),
how its shards are packed (`ShardPacking`: a strategy built on them), and the values that cross
both.

Each backend (`local`, `fsspec_files`, `object_files`, `s3_objects`)
implements `Files`, and its packing strategy (`local_shards`,
`fsspec_packing`, `object_packing`, `s3_copy`) `ShardPacking`; the tools
reach them through `store.Store`. Paths are the backend's own: under the
store's root, ``/``-separated on object stores.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from .shard_format import ByteRange, Held, Packed, Shard

__all__ = [
    "BACKUP_SUFFIX",
    "BATCH",
    "TEMP_SUFFIX",
    "ByteRange",
    "Files",
    "Folder",
    "Listed",
    "Opened",
    "Probe",
    "Removal",
    "Replacement",
    "ShardPacking",
    "breadth_first",
    "changed",
    "digest",
    "each",
    "failures",
    "made_for",
    "temporary_entry",
]

TEMP_SUFFIX = ".numcodecs-bytes-tmp"
"""The suffix of temporary files: only a killed run leaves one behind."""
BACKUP_SUFFIX = ".bak"
BATCH = 1000
"""Folders listed, or files read or written, per batch: what bounds the memory a run needs."""

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)


def digest(data: bytes) -> bytes:
    """What a removal compares a file with: the SHA-256 of the bytes read."""
    return hashlib.sha256(data).digest()


@dataclass(frozen=True)
class Folder:
    """One folder found by a walk: its path and the names in it, sorted."""

    path: str
    subfolders: tuple[str, ...]
    files: tuple[str, ...]


class Listed(NamedTuple):
    """One batch of a walk: the folders listed, and the paths that could not be visited, with the
    reason."""

    folders: list[Folder]
    unvisited: list[tuple[str, str]]


class Replacement(NamedTuple):
    """A file to replace by ``data``, only if it still holds ``expected`` (what was read)."""

    path: str
    data: bytes
    expected: bytes
    # keep ``expected`` beside it as ``<name>.bak`` (an existing one only if it holds that)
    backup: bool = False


class Removal(NamedTuple):
    """A file to remove, only if it still holds what was read (its `digest`), or is still the
    version read (a data file: `Files.versions`); neither: whatever it holds."""

    path: str
    read: bytes | None
    version: str | None = None


class Probe(NamedTuple):
    """Three questions about a location, each one request (or one request a path, all at once):
    what opening a store asks before it calls it one."""

    is_dir: Callable[[str], bool]
    any_exists: Callable[[list[str]], bool]  # whether any of these paths is there (asked at once)
    names_in: Callable[[str], set[str]]  # the files in a folder


class Files(Protocol):
    """What the store tools need of a file system, a batch at a time: a local folder or an fsspec
    one.

    Each batch method takes many paths and returns, per path, the result or the
    exception that path met (reads), or only the paths that failed (writes): one
    file's problem never stops the others.
    """

    deadline: float | None  # time.monotonic() at which the run stops; None: no limit
    # requests in flight at most: how many data files a caller may ask for in one batch
    concurrency: int

    def walk(self, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
        """Breadth first, a batch of folders at a time; before taking the next batch, it enters no
        subfolder that ``left_out`` (by folder path, filled in by the caller meanwhile) names."""
        ...

    def read(self, paths: Iterable[str]) -> dict[str, bytes | Exception]:
        """Metadata files (never through a symbolic link: it could not be replaced); a missing one
        is a FileNotFoundError. Replacements and removals are conditional on what these reads
        saw."""
        ...

    def read_data(self, paths: Iterable[str]) -> dict[str, bytes | Exception | None]:
        """Data files such as chunks, links followed; None where there is none."""
        ...

    def read_ranges(self, ranges: Iterable[ByteRange]) -> dict[ByteRange, bytes | Exception]:
        """Byte ranges of data files (a shard's index and one chunk, not the whole shard); a range
        past a file's end is an OSError, a missing file a FileNotFoundError."""
        ...

    def tails(self, wanted: Mapping[str, int]) -> dict[str, tuple[int, bytes] | Exception]:
        """The last ``n`` bytes of each file (``wanted``: n by path; a shard's index), with the
        file's size; an OSError where the file is shorter, a FileNotFoundError where it is
        missing."""
        ...

    def modified(self, paths: Iterable[str]) -> dict[str, float | Exception]:
        """When each file was last written, in seconds since the epoch as its file system keeps them
        (an OSError where it keeps none)."""
        ...

    def replace(self, replacements: Iterable[Replacement]) -> dict[str, Exception]:
        """Replace each file that still holds what was read; the failures (OSError where it
        cannot)."""
        ...

    def create(self, files: Mapping[str, bytes]) -> dict[str, Exception]:
        """Write new files; the failures (an existing file is never overwritten: one that holds the
        same bytes is no failure)."""
        ...

    def remove(self, removals: Iterable[Removal]) -> dict[str, Exception]:
        """Remove files that still hold what was read (a missing one is no failure); the
        failures."""
        ...

    def versions(self, paths: Iterable[str]) -> dict[str, str | Exception | None]:
        """Each data file's version as `pack` saw it (a file changed since has another); None where
        there is none."""
        ...

    def version_holds(self, version: str, data: bytes) -> bool | None:
        """Whether ``data`` are the bytes of a file at ``version`` (as `versions` says it): None
        where the version does not tell (a time written, an ETag that is no digest)."""
        ...

    def files_below(self, folders: Iterable[str]) -> dict[str, list[str] | Exception]:
        """Every file below each folder, at any depth, by its path relative to the folder
        (``/``-separated); an empty list where the folder does not exist."""
        ...

    def lock(self, top: str) -> AbstractContextManager[None]:
        """One run of the store tools at a time on the store whose topmost node is the folder
        ``top``, where the file system can say so; else nothing. Raises `problems.StoreBusyError`
        where another run holds it."""
        ...


class ShardPacking(Protocol):
    """How a store's shards are made and checked: a packing strategy built on its `Files`
    (`local_shards.LocalPacking`, `fsspec_packing.FsspecPacking`, `object_packing.ObjectPacking`,
    `s3_copy.S3Packing`), chosen where the store is opened."""

    def pack(
        self, shards: Iterable[Shard], on_progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Packed | Exception]:
        """Each shard made of its chunk files (`shard_format`), whole or not at all, read back and
        compared with them; what was read of each source, or the failure (a source that changed or
        went meanwhile is one). ``on_progress`` hears of the work as it goes: (shards done, bytes
        packed) since its last call."""
        ...

    def held(self, shards: Iterable[Shard]) -> dict[str, Held | Exception]:
        """What each shard in the store (as `pack` writes them: its index at the end, with its
        checksum) holds of its sources, whole files each, compared byte for byte (FileNotFoundError
        where the shard is missing)."""
        ...

    def files_and_versions(
        self, folders: Iterable[str], paths: Iterable[str]
    ) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
        """What was packed from, as it is now: `Files.files_below` of ``folders`` and
        `Files.versions` of ``paths`` (data files below them), from one listing per folder where
        the store's listings tell versions (S3's and Azure's ETags)."""
        ...

    def tidy(self, folders: Iterable[str]) -> dict[str, Exception]:
        """Below each chunk folder (which no other task is writing in), the temporary files killed
        packs left removed, then the folders left empty (the folder itself too, where empty); the
        failures. Object stores have neither (their packs remove their own temporaries)."""
        ...


class Opened(NamedTuple):
    """A location opened: its files, its root (a path of those files), how to ask whether it is a
    store, and how its shards are packed."""

    files: Files
    root: str
    probe: Probe
    packing: ShardPacking


def breadth_first(
    root: str,
    listed: Callable[[list[str]], Listed],
    entered: Callable[[Folder, str], str | tuple[str, str]],
    left_out: Mapping[str, set[str]],
    unvisited: list[tuple[str, str]] | None = None,
) -> Iterator[Listed]:
    """The walk of every file system: the folders of one level ``listed`` a batch at a time; once
    the caller has taken a batch, the subfolders it did not leave out (``left_out``, by folder path)
    are ``entered``: a path, or (path, reason) where not followed (reported with the next batch).
    ``unvisited``: paths known before the walk not to be reachable."""
    level, refused = [root], list(unvisited or ())
    while level:
        below: list[str] = []
        for start in range(0, len(level), BATCH):
            batch = listed(level[start : start + BATCH])
            yield Listed(batch.folders, refused + batch.unvisited)
            refused = []
            for folder in batch.folders:
                skipped = left_out.get(folder.path, set())
                for name in folder.subfolders:
                    if name in skipped:
                        continue
                    path = entered(folder, name)
                    if isinstance(path, str):
                        below.append(path)
                    else:
                        refused.append(path)
        level = below
    if refused:
        yield Listed([], refused)


def each(work: Mapping[_K, Callable[[], _T]]) -> dict[_K, _T | Exception]:
    """Each path's work in turn; what each returned, or the OSError it raised."""
    results: dict[_K, _T | Exception] = {}
    for path, job in work.items():
        try:
            results[path] = job()
        except OSError as exc:
            results[path] = exc
    return results


def failures(results: Mapping[str, object]) -> dict[str, Exception]:
    """The paths whose work failed, with the exception."""
    return {path: result for path, result in results.items() if isinstance(result, Exception)}


def changed(what: str = "") -> OSError:
    """The error of a file someone else changed since it was read."""
    return OSError(f"changed by someone else since it was read{what}: left as it is")


def temporary_entry(name: str, tag: str) -> str:
    """The name of a temporary file made beside the file ``name``: ``.NAME.TAG`` and `TEMP_SUFFIX`
    (what `made_for` reads back), on disks and object stores alike."""
    return f".{name}.{tag}{TEMP_SUFFIX}"


def made_for(entry: str) -> str | None:
    """The name of the file a temporary file named ``entry`` was made beside (`temporary_entry`);
    None for any other name."""
    if not (entry.startswith(".") and entry.endswith(TEMP_SUFFIX)):
        return None
    return entry[1 : -len(TEMP_SUFFIX)].rpartition(".")[0] or None
