"""The one way the store tools work a store: open it, lock it, walk it, read and write its files in
batches.

`open_store` checks a location and returns a `Store`: its `Files` (a local
folder, an fsspec file system, S3) and its root. `Store.walk` is the walk both
tools make, a batch of folders at a time: it removes the temporary files that
killed runs left (only with the store's lock held, or on an object store: no
live run is writing them; not in a dry run), reports progress after each
batch, and stops with `problems.RunTimeoutError` between two batches once the
run's time limit has passed. The tool says which subfolders of a batch hold
chunks (`Walk.leave_out`, by `layout.chunk_folders`): the walk does not enter
them. Nothing here prints or knows about codecs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from ..problems import NotAStoreError, RunTimeoutError, StoreBusyError, reason
from .files import TEMP_SUFFIX, Files, Folder, Probe, Removal, ShardPacking
from .layout import NODE_FILES, Location
from .options import StoreOptions

__all__ = ["Store", "StoreBatch", "Walk", "open_store"]


@dataclass(frozen=True)
class Store:
    """An open store: its files, its root (a path of its `Files`), the folder of the topmost Zarr
    node at or above the root, where runs lock the store (runs given a folder below it or above it
    exclude each other), and its packing strategy (`files.ShardPacking`)."""

    files: Files
    root: str
    top: str
    packing: ShardPacking  # how its shards are made and checked

    def relative(self, path: str) -> str:
        """``path`` relative to the store's root, ``/``-separated ("" for the root)."""
        return path[len(self.root) :].lstrip("/\\").replace(os.sep, "/")

    def at(self, relative: str) -> Location:
        """Where a node lies, given its path relative to the store's root ("" for the root)."""
        return Location(self.root, relative)

    def above(self) -> list[str]:
        """The folders of the Zarr nodes above the root, nearest first, up to `top`."""
        folders: list[str] = []
        folder = self.root
        while folder != self.top:
            parent = os.path.dirname(folder)
            if not parent or parent == folder:
                break
            folders.append(folder := parent)
        return folders

    @contextmanager
    def locked(self, dry_run: bool) -> Iterator[None]:
        """The store's lock for a run that writes (`Files.lock`); none for a dry run. A lock that
        cannot be taken for another reason than another run (the server unreachable, the run's time
        limit) stops the run too."""
        with ExitStack() as held:
            try:
                if not dry_run:
                    held.enter_context(self.files.lock(self.top or self.root))
            except (StoreBusyError, RunTimeoutError):
                raise
            except Exception as exc:
                deadline = self.files.deadline
                if deadline is not None and time.monotonic() >= deadline:
                    raise RunTimeoutError(
                        "the run's time limit passed while the store's lock was taken"
                    ) from None
                raise NotAStoreError(
                    f"{self.top or self.root}: its lock cannot be taken ({reason(exc)})"
                ) from None
            yield

    def walk(self, *, dry_run: bool, on_progress: Callable[[int, int], None] | None = None) -> Walk:
        """The walk over the store that both tools make (see the module's docstring)."""
        return Walk(self, dry_run, on_progress)


class StoreBatch(NamedTuple):
    """One batch of a `Walk`: its folders, the paths it could not work (relative to the store, with
    the reason), and the temporary files of killed runs it removed (relative)."""

    folders: list[Folder]
    problems: list[tuple[str, str]]
    leftovers_removed: list[str]


class Walk:
    """The walk over a store, breadth first, a batch of folders at a time (iterate it for
    `StoreBatch`es)."""

    def __init__(
        self, store: Store, dry_run: bool, on_progress: Callable[[int, int], None] | None
    ) -> None:
        self.store, self.dry_run, self.on_progress = store, dry_run, on_progress
        self._left_out: dict[str, set[str]] = {}

    def leave_out(self, folder: Folder, names: Iterable[str]) -> None:
        """Do not enter these subfolders of a folder of the batch taken last (an array's chunk
        folders)."""
        self._left_out.setdefault(folder.path, set()).update(names)

    def __iter__(self) -> Iterator[StoreBatch]:
        files, store = self.store.files, self.store
        done, found = 0, 1  # the root
        for listed in files.walk(self._left_out):
            leftovers = [
                f"{f.path}/{name}"
                for f in listed.folders
                for name in f.files
                if name.endswith(TEMP_SUFFIX)
            ]
            failed = {} if self.dry_run else files.remove(Removal(path, None) for path in leftovers)
            problems = [(store.relative(path) or ".", why) for path, why in listed.unvisited]
            problems += [(store.relative(path), reason(exc)) for path, exc in failed.items()]
            yield StoreBatch(
                listed.folders, problems, [store.relative(p) for p in leftovers if p not in failed]
            )
            done += len(listed.folders)
            found += sum(
                len(set(f.subfolders) - self._left_out.get(f.path, set())) for f in listed.folders
            )
            if self.on_progress is not None:
                self.on_progress(done, found)
            if files.deadline is not None and time.monotonic() >= files.deadline:
                raise RunTimeoutError(
                    f"the run's time limit passed: {done:,} of {found:,} folders done"
                )


def open_store(location: str | os.PathLike[str], options: StoreOptions | None = None) -> Store:
    """The store at ``location``, after checking it is a Zarr store.

    Parameters
    ----------
    location : str or path
        A local folder, a ``file:`` URL of this host, or an fsspec URL.
    options : StoreOptions, optional
        How it is reached (requests in flight, fsspec's options, time limits).

    Raises
    ------
    problems.NotAStoreError
        For an empty path, a missing folder, a file, a folder without Zarr
        metadata, or a URL that cannot be opened.
    """
    options = options or StoreOptions()
    text = os.fspath(location)
    if not text.strip():
        raise NotAStoreError("the store path is empty")
    deadline = None if options.run_timeout is None else time.monotonic() + options.run_timeout
    if "://" in text and not text.startswith("file:"):
        from .remote import open_remote  # fsspec only where a URL asks for it

        files, root, probe, packing = open_remote(text, options, deadline)
    else:
        from .local import LocalFiles, probe_local
        from .local_shards import LocalPacking

        root = str(Path(_local_path(text)))
        local = LocalFiles(Path(root))
        local.deadline = deadline
        files, probe, packing = local, probe_local, LocalPacking(local, Path(root))
    try:
        problem = _not_a_store(root, probe)
    # OSError, or a file system's own error (a broken reference file system)
    except Exception as exc:
        if deadline is not None and time.monotonic() >= deadline:
            raise RunTimeoutError(
                "the run's time limit passed while the store was being opened"
            ) from None
        raise NotAStoreError(f"{text}: cannot be reached ({type(exc).__name__}: {exc})") from None
    if problem is not None:
        raise NotAStoreError(f"{text}: {problem}")
    return Store(
        files,
        root,
        _topmost_node(root, probe, remote="://" in text and not text.startswith("file:")),
        packing,
    )


def _topmost_node(root: str, probe: Probe, remote: bool) -> str:
    """The folder of the topmost Zarr node at or above ``root``: each folder above it holding a
    node's metadata file, up to the first that holds none (on an object store, up to the bucket)."""
    top = root
    while True:
        parent = top.rpartition("/")[0] if remote else os.path.dirname(top)
        if not parent or parent == top:
            return top
        try:
            if not probe.any_exists([f"{parent}/{name}" for name in NODE_FILES]):
                return top
        # a folder above that cannot be asked about (no permission): the store stops below it
        except Exception:
            return top
        top = parent


def _not_a_store(root: str, probe: Probe) -> str | None:
    """Why ``root`` is not a Zarr store, or None if it is one (one listing of the root, where it is
    a folder)."""
    if not probe.is_dir(root):
        return "not a folder" if probe.any_exists([root]) else "no such folder"
    if not probe.names_in(root) & set(NODE_FILES):
        return "not a Zarr store (no zarr.json, .zgroup, .zarray or .zmetadata)"
    return None


def _local_path(text: str) -> str:
    """A local path, or a ``file:`` URL of this host (``file:///p``, ``file://localhost/p``) made a
    path."""
    if not text.startswith("file:"):
        return text
    url = urlsplit(text)
    if url.netloc not in ("", "localhost"):
        raise NotAStoreError(
            f"{text}: a file URL of another host ({url.netloc}) cannot be opened here"
        )
    return url.path
