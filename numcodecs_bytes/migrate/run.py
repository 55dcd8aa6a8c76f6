"""The run of ``numcodecs-bytes migrate`` over a store: every metadata file that names the legacy
codec rewritten.

The rules are `numcodecs_bytes.migrate.rules`; store access does the rest
(`numcodecs_bytes.store`): the walk, batched reads, conditional atomic
replacements, backups, the lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..problems import reason
from ..store import Replacement, Store, StoreOptions, open_store
from ..store.layout import NODE_FILES, chunk_folders
from .rules import METADATA_FILES, Change, migrated_file

__all__ = ["MigrationReport", "migrate_store"]


@dataclass
class MigrationReport:
    """What `migrate_store` did (or, in a dry run, would do)."""

    nodes: int = 0
    changes: list[Change] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (file or folder, reason)
    leftovers_removed: list[str] = field(default_factory=list)


def migrate_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    backup: bool = False,
    struct_endian: Literal["little", "big"] | None = None,
    on_change: Callable[[str, list[Change]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    store_options: StoreOptions | None = None,
) -> MigrationReport:
    """Rename every legacy ``endian`` codec in a Zarr store's metadata to ``bytes``, and give every
    v3 ``bytes`` codec of a multi-byte data type that states no byte order the draft's default,
    ``"endian": "little"`` (what zarr-python before 3.3 read; 3.3 refuses such metadata).

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would change; change no byte.
    backup : bool
        Keep each original beside it as ``<name>.bak`` (an existing one is
        never overwritten: that file is reported and left as it is).
    struct_endian : {"little", "big"}, optional
        The byte order of struct arrays' fields where their ``bytes`` codec
        states none: zarr-python's releases read such fields differently, so
        without it they are reported and left as they are.
    on_change : callable, optional
        Called with each file (relative to the store) and its changes, as it goes.
    on_progress : callable, optional
        Called after each batch with (folders walked, folders found so far).
    store_options : StoreOptions, optional
        How the store is reached: requests in flight on an object store,
        fsspec's options for a URL, time limits per request and per run.

    Returns
    -------
    MigrationReport
        Files that could not be migrated, and folders that were not visited
        (unreadable, or symbolic links, which are never followed), are listed
        with the reason; everything else is migrated all the same.

    Raises
    ------
    problems.NotAStoreError
        If ``location`` is not a folder holding Zarr metadata, or cannot be reached.
    problems.StoreBusyError
        If another run is migrating the same local store.
    problems.RunTimeoutError
        If the run's time limit passed (what was written is whole; a rerun finishes).
    """
    if struct_endian not in (None, "little", "big"):
        raise ValueError(f"struct_endian must be 'little' or 'big', got {struct_endian!r}")
    store = open_store(location, store_options)
    with store.locked(dry_run):
        return _migrated(store, dry_run, backup, struct_endian, on_change, on_progress)


def _migrated(
    store: Store,
    dry_run: bool,
    backup: bool,
    struct_endian: Literal["little", "big"] | None,
    on_change: Callable[[str, list[Change]], None] | None,
    on_progress: Callable[[int, int], None] | None,
) -> MigrationReport:
    report = MigrationReport()
    walk = store.walk(dry_run=dry_run, on_progress=on_progress)
    for batch in walk:
        report.leftovers_removed += batch.leftovers_removed
        report.failures += batch.problems
        report.nodes += sum(
            any(name in folder.files for name in NODE_FILES) for folder in batch.folders
        )
        metadata = {
            f"{f.path}/{name}": (f, name)
            for f in batch.folders
            for name in f.files
            if name in METADATA_FILES
        }
        changed: dict[str, tuple[Replacement, list[Change]]] = {}
        for path, data in store.files.read(metadata).items():
            folder, name = metadata[path]
            relative = store.relative(path)
            try:
                mended = migrated_file(name, _read(data), struct_endian)
            except Exception as exc:
                report.failures.append((relative, reason(exc)))
                continue
            document = mended.document
            if name == ".zarray":
                walk.leave_out(folder, chunk_folders(folder.subfolders, folder.files, document))
            elif (
                name == "zarr.json"
                and isinstance(document, dict)
                and document.get("node_type") == "array"
            ):
                walk.leave_out(folder, folder.subfolders)  # a Zarr v3 array holds chunks only
            report.failures += [(relative, problem) for problem in mended.problems]
            if mended.changes:
                replacement = Replacement(path, mended.data, _read(data), backup)
                changed[path] = (
                    replacement,
                    [Change(relative, where, what) for where, what in mended.changes],
                )
        write_failures = (
            {}
            if dry_run
            else store.files.replace(replacement for replacement, _ in changed.values())
        )
        for path, (_, changes) in changed.items():
            relative = store.relative(path)
            if path in write_failures:
                report.failures.append((relative, reason(write_failures[path])))
                continue
            report.changes += changes
            report.files_changed.append(relative)
            if on_change is not None:
                on_change(relative, changes)
    return report


def _read(data: bytes | Exception) -> bytes:
    """What reading a file gave: its bytes; the error it met, raised."""
    if isinstance(data, Exception):
        raise data
    return data
