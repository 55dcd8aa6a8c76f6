"""Zarr v2 stores as standard Zarr v3 stores, metadata only: the run of ``numcodecs-bytes to-v3`` over a store.

Every node gets a ``zarr.json`` beside its v2 files, made by the rules of
`numcodecs_bytes.v3_metadata` (this codec's filter folded into the standard
``bytes`` serializer, xarray's dimension names and masks, strings, the rest
by zarr-python's own mapping); no chunk is written, and any v3 reader opens
the result with no numcodecs-bytes installed.

What `convert_store` guarantees:

- Every array v2 readers reach reads the same values as v3, or stays v2 and
  is reported. Before an array's ``zarr.json`` is written, a sample is read
  as v2 and as v3 with zarr-python's own codecs and compared exactly
  (`numcodecs_bytes.v3_check`; ``verify=False``, ``--no-verify``, skips it).
  Arrays whose ``.zarray`` says the same are read by the same two pipelines:
  once one of them has shown the mapping right, the others are not read
  (they are read in rounds of one, two, four, ... arrays until one does); a
  sample in which a wrong mapping could not show (zeros, one value
  throughout) vouches for no other array. Arrays of objects are each checked.
- Chunks stored where the ``.zarray`` does not say (``0/0`` folders under a
  ``.zarray`` without ``dimension_separator``, as zarr before 2.8 wrote them)
  are found in the store and converted with the separator ``/``.
- A group's ``zarr.json`` is written only after every node below it
  converted, the root's last: zarr-python opens a node as v3 where it finds a
  ``zarr.json``, so a group over a member that failed stays v2 and v2 readers
  keep reaching that member. Folders that lead to nodes without being groups
  in v2 (zarr 2 reads through them) become groups.
- Consolidated metadata is kept whole. A group with a ``.zmetadata``, or with
  consolidated metadata in its ``zarr.json`` from an earlier run, gets its
  consolidated metadata brought up to date on every run, from every node
  below it. A node that its consolidated metadata lists but the walk did not
  find is read from its own files, or, where it has none (v2 readers reach it
  through ``.zmetadata`` alone), converted from its entry there; a v3 entry
  whose ``zarr.json`` is gone is left out, with a note.
- It never overwrites a ``zarr.json``: one that says what it would write is
  kept (so a rerun writes nothing and finishes an interrupted run); a
  consolidated group's may only get its consolidated metadata brought up to
  date. Each ``zarr.json`` is created atomically, with the store lock, fsspec
  URLs, batches and time limits of `numcodecs_bytes.stores`; on S3 only
  where none exists (``If-None-Match``), so of two runs at once each file is
  written by one and the other reports it.
- ``remove_v2_metadata`` removes the v2 metadata files only once every node
  converted, ``.zmetadata`` last, and only files this run read and that still
  hold what it read (a writer's change since is kept and reported); never a chunk.

What cannot be converted is reported with the reason and left as it is, and
the rest converts. Arrays that zarr-python releases older than the installed
one read wrong (`v3_metadata.ReadersNeed`) are converted and listed in the
report; ``oldest_zarr`` refuses them instead.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

from ._zarr_api import zarr_api
from .stores import (
    BATCH,
    JOBS,
    NODE_FILES,
    REQUEST_TIMEOUT,
    Files,
    Folder,
    Removal,
    Replacement,
    StoreBatch,
    chunk_folders,
    digest,
    nested_layout,
    open_store,
    reason,
    store_lock,
    walk_store,
)
from .v3_check import check_chunk, check_fill_value, chunk_indices, chunk_key, pipelines_key
from .v3_metadata import (
    Conversion,
    ReadersNeed,
    UnconvertibleError,
    array_document,
    group_document,
    v3_encoding,
)
from .zarr_versions import release, version_numbers

__all__ = ["V2_METADATA_FILES", "ConversionReport", "NodeResult", "UnconvertibleError", "convert_store", "v3_encoding"]

V2_METADATA_FILES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
"""The v2 metadata files ``remove_v2_metadata`` removes (never a chunk)."""
_READ = (*V2_METADATA_FILES, "zarr.json")  # the files a node's zarr.json is made from, or compared with


@dataclass(frozen=True)
class NodeResult:
    """One node converted: its path in the store and what was done."""

    path: str  # relative to the store, "" for the root
    kind: str  # "array" or "group"
    action: str  # "written"; "kept": its zarr.json said this already; "updated": its consolidated metadata
    folded: str | None = None  # e.g. "filters[0] 'bytes' (endian big)", where the filter was folded
    implicit: bool = False  # a folder without v2 metadata that leads to nodes: made a group
    document: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # its zarr.json
    v3_only: bool = False  # a node with no v2 metadata: Zarr v3 already (written so, or converted and removed)


@dataclass
class ConversionReport:
    """What `convert_store` did (or, in a dry run, would do)."""

    converted: list[NodeResult] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (node or file, reason)
    removed: list[str] = field(default_factory=list)  # v2 metadata files removed
    notes: list[tuple[str, str]] = field(default_factory=list)  # (node, zarr's warning or what was assumed)
    readers: list[tuple[str, ReadersNeed]] = field(default_factory=list)  # arrays older zarr-python reads wrong
    consolidated: bool = False  # the root's zarr.json holds every node's metadata (written, updated or kept)
    leftovers_removed: list[str] = field(default_factory=list)  # temporary files of killed runs

    @property
    def written(self) -> list[NodeResult]:
        """The nodes whose ``zarr.json`` this run wrote or brought up to date."""
        return [node for node in self.converted if node.action != "kept"]


def convert_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    remove_v2_metadata: bool = False,
    verify: bool = True,
    oldest_zarr: str | None = None,
    on_node: Callable[[NodeResult], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    jobs: int = JOBS,
    storage_options: dict[str, Any] | None = None,
    request_timeout: float = REQUEST_TIMEOUT,
    run_timeout: float | None = None,
) -> ConversionReport:
    """Write a Zarr v3 ``zarr.json`` for every node of a Zarr v2 store, folding the bytes filter.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would be written; write nothing (the checks still run).
    remove_v2_metadata : bool
        Once every node has its ``zarr.json``, remove the ``.zarray``,
        ``.zgroup``, ``.zattrs`` and ``.zmetadata`` files this run read and
        that still hold what it read; never a chunk. By default they stay, so
        v2 readers keep working.
    verify : bool
        Before writing an array's ``zarr.json``, read chunk 0 and the fill
        value both as v2 and through the new metadata as v3 with zarr-python's
        own codecs, and convert only what reads the same (once per ``.zarray``
        where a sample shows the mapping right: see the module's docstring).
    oldest_zarr : str, optional
        The oldest zarr-python release the store's readers use, e.g. ``"3.1"``:
        arrays that release reads wrong are refused (left as v2, reported).
        By default they are converted and listed in ``ConversionReport.readers``.
    on_node : callable, optional
        Called with each node converted, as it goes.
    on_progress : callable, optional
        Called after each batch of folders with (folders walked, folders found so far).
    jobs, storage_options, request_timeout, run_timeout
        How the store is reached, as `stores.open_store` takes them: requests
        in flight on an object store, fsspec's options for a URL, seconds per
        request (60; a node whose request takes longer is reported), seconds
        for the whole run (no limit; past it, `stores.RunTimeoutError`).

    Returns
    -------
    ConversionReport
        What cannot be converted (see the module's docstring) is listed with
        the reason and left as it is, and so are the groups above it; the rest
        is converted.

    Raises
    ------
    stores.NotAStoreError
        If ``location`` is not a folder holding Zarr metadata, or cannot be reached.
    stores.StoreBusyError
        If another run is working on the same local store.
    stores.RunTimeoutError
        If ``run_timeout`` passed (what was written is whole; a rerun finishes).
    ImportError
        If zarr-python 3 is not installed.
    """
    zarr_api()  # before touching the store: a missing zarr is a usage error
    oldest = None if oldest_zarr is None else version_numbers(oldest_zarr)
    if oldest is not None and not oldest:
        raise ValueError(f"oldest_zarr must be a version such as '3.1', got {oldest_zarr!r}")
    files, root = open_store(
        location, jobs=jobs, storage_options=storage_options, request_timeout=request_timeout, run_timeout=run_timeout
    )
    options = _Options(dry_run, remove_v2_metadata, verify, oldest, on_node, on_progress)
    with nullcontext() if dry_run else store_lock(files, root):
        run = _Run(files, root, options)
        for batch in walk_store(files, root, dry_run=dry_run, on_progress=on_progress):
            run.take(batch)
        run.take_what_consolidations_list()
        run.write_groups()
        if remove_v2_metadata and not run.report.failures:
            run.remove_v2_metadata()
        return run.report


class _Options(NamedTuple):
    dry_run: bool
    remove_v2_metadata: bool
    verify: bool
    oldest_zarr: tuple[int, ...] | None
    on_node: Callable[[NodeResult], None] | None
    on_progress: Callable[[int, int], None] | None


class _Node(NamedTuple):
    """A node found in the store and the ``zarr.json`` it gets."""

    folder: str  # its folder's path in the store
    path: str  # relative to the store, "" for the root
    kind: str  # "array" or "group"
    document: dict[str, Any]
    origin: str = "v2"  # "v2"; "v3": only a zarr.json; "implicit": a folder that leads to nodes; "consolidated":
    # known only from a .zmetadata (no v2 files of its own)
    read: Mapping[str, bytes] = {}  # the v2 metadata files read, by name: the digest of what was read
    existing: bytes | None = None  # its zarr.json as read, where it has one
    v2_array: dict[str, Any] | None = None  # a v2 array's metadata as v2 readers take it, for the check
    folded: str | None = None
    consolidates: bool = False  # a group whose consolidated metadata lists the nodes below it
    readers: ReadersNeed | None = None  # where older zarr-python releases read it wrong
    replaces: bool = False  # its zarr.json is older than its v2 metadata, which a v2 writer changed: brought up to date
    chunk_names: list[str] | None = None  # the files of an array's folder, where chunks may be (None: not listed)


class _Checking(NamedTuple):
    """An array being checked: what its samples are read with, and the chunks left to sample."""

    folder: str
    zarray: dict[str, Any]  # as v2 readers take it
    document: dict[str, Any]
    pipelines: str | None  # `pipelines_key`
    indices: Iterator[tuple[int, ...]]  # `chunk_indices` not read yet


class _Listed(NamedTuple):
    """The nodes one consolidated metadata lists: each one's v2 or v3 metadata there, by path below the group."""

    zarr_format: int
    entries: dict[str, dict[str, Any]]  # v2: {".zarray"/".zgroup"/".zattrs": document}; v3: {"zarr.json": ...}


class _Run:
    """One run of `convert_store` over a store: what it has found, converted and failed so far."""

    def __init__(self, files: Files, root: str, options: _Options) -> None:
        self.files, self.root, self.options = files, root, options
        self.report = ConversionReport()
        self.nodes: dict[str, _Node] = {}  # every node that converts (or was converted), by path
        self.arrays: set[str] = set()  # paths of arrays: a node below one is not part of the hierarchy
        self.failed: set[str] = set()  # paths that stay as they are
        self.proven: set[str] = set()  # the pipelines (`pipelines_key`) a check has shown right
        self.listed: dict[str, _Listed] = {}  # what each consolidated group's consolidated metadata lists
        self.notes: dict[str, list[str]] = {}  # each node's notes, reported once its zarr.json is written
        self.standing: dict[str, list[str]] = {}  # notes on what holds until the user acts: reported on every run
        self.unlisted: set[str] = set()  # nodes not found by the walk: their folders' files are not known

    def fail(self, path: str, why: str) -> None:
        self.failed.add("" if path == "." else path)
        self.report.failures.append((path or ".", why))

    def note(self, path: str, what: str) -> None:
        self.notes.setdefault(path, []).append(what)

    # -- nodes, a batch at a time -------------------------------------------------------------------------------

    def take(self, batch: StoreBatch) -> None:
        """The nodes of one batch of the walk: converted, checked and (arrays) written."""
        self.report.leftovers_removed += batch.leftovers_removed
        for path, why in batch.problems:
            self.fail(path, why)
        found: list[tuple[Folder, str]] = []
        for folder in batch.folders:
            path, names = _relative(folder.path, self.root), set(folder.files)
            if not names & set(NODE_FILES):
                continue  # not a node; a group in v3 if nodes lie below it
            container = next((parent for parent in _parents(path) if parent in self.arrays), None)
            if container is not None:
                self.arrays.add(path)
                self.fail(path, f"a node inside the array {container or '.'}: Zarr v3 arrays hold no nodes; left as v2")
                continue
            found.append((folder, path))
        self.take_nodes(found)

    def take_nodes(self, found: list[tuple[Folder, str]]) -> None:
        """``found`` nodes (folder, path): their files read, their documents made, arrays checked and written."""
        read = self.files.read(f"{folder.path}/{name}" for folder, _ in found for name in _READ if name in folder.files)
        built: list[_Node] = []
        for folder, path in found:
            try:
                node = self._node(folder, path, {name: read[f"{folder.path}/{name}"] for name in _present(folder)})
            except Exception as exc:  # one node's problem, whatever it is, is reported; the rest converts
                self.fail(path, reason(exc))
                if ".zarray" in folder.files:
                    self.arrays.add(path)
                    folder.subfolders[:] = [name for name in folder.subfolders if not name.isdigit()]
                continue
            built.append(node)
        built = self._settled(built)
        arrays = self._passing_the_check([node for node in built if node.kind == "array"])
        self.failed |= self._write([(node, node.document) for node in arrays])
        for node in [*arrays, *(node for node in built if node.kind == "group")]:
            # kept to the end for the groups and the consolidation: what those need only
            self.nodes[node.path] = node._replace(
                v2_array=None, existing=node.existing if node.kind == "group" else None, chunk_names=None
            )

    def _settled(self, nodes: list[_Node]) -> list[_Node]:
        """``nodes`` whose ``zarr.json`` and v2 metadata disagree settled by which was written last.

        Either side may be written after a conversion that kept the v2
        metadata: a v3 writer (xarray, zarr) changes ``zarr.json``, a v2 writer
        its ``.zarray``/``.zgroup``/``.zattrs``. Where ``zarr.json`` is the newer,
        it is kept as it is (and the v2 files, a stale view, go with
        ``remove_v2_metadata``); where the v2 files are, ``zarr.json`` is brought
        up to date from them; where their times do not tell, the node fails and
        both stay as they are.
        """
        disagreeing = {node.path: node for node in nodes if node.existing is not None and node.origin == "v2"
                       and _differences(node) is not None}  # fmt: skip
        if not disagreeing:
            return nodes
        names = {node.path: ["zarr.json", *(name for name in node.read if name != ".zmetadata")]
                 for node in disagreeing.values()}  # fmt: skip
        times = self.files.modified(
            f"{node.folder}/{name}" for node in disagreeing.values() for name in names[node.path]
        )
        settled: dict[str, _Node | None] = {}
        for path, node in disagreeing.items():
            when = {name: times[f"{node.folder}/{name}"] for name in names[path]}
            v3, v2 = when.pop("zarr.json"), list(when.values())
            what = f"zarr.json and its {', '.join(when)} differ ({_differences(node)})"
            known = [t for t in (v3, *v2) if isinstance(t, float)]
            if len(known) == len(v2) + 1 and isinstance(v3, float) and v3 > max(known[1:]):
                document = _existing_document(node) or {}
                kind = "array" if document.get("node_type") == "array" else "group"
                self.standing.setdefault(path, []).append(
                    f"{what}: zarr.json was written after them (through Zarr v3, since the conversion) and is kept; "
                    "v2 readers see the node as it was before (removing the v2 metadata ends that)"
                )
                settled[path] = node._replace(kind=kind, document=document, v2_array=None, folded=None, readers=None)
            elif len(known) == len(v2) + 1 and isinstance(v3, float) and v3 < max(known[1:]):
                self.note(path, f"{what}: they were written after zarr.json (by a v2 writer, since the conversion): "
                                "zarr.json is brought up to date from them")  # fmt: skip
                settled[path] = node._replace(replaces=True)
            else:
                problem = next((t for t in (v3, *v2) if isinstance(t, Exception)), None)
                why = f"their times cannot be read ({reason(problem)})" if problem else "their times do not tell"
                self.fail(path, f"{what}, and {why} which was written last: both left as they are; see which "
                                "holds the data as it is now before removing either")  # fmt: skip
                settled[path] = None
        kept = (settled[node.path] if node.path in settled else node for node in nodes)
        return [node for node in kept if node is not None]

    def _node(self, folder: Folder, path: str, read: dict[str, bytes | Exception]) -> _Node:
        """The node in ``folder`` and its ``zarr.json`` document, from its files as ``read`` (by name)."""

        def parsed(name: str) -> Any:
            data = read[name]
            if isinstance(data, Exception):
                raise data
            try:
                return json.loads(data.decode("utf-8-sig"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise UnconvertibleError(f"{name}: {reason(exc)}") from None

        digests = {name: digest(data) for name, data in read.items() if name != "zarr.json" and isinstance(data, bytes)}
        existing = read.get("zarr.json")
        if isinstance(existing, Exception):
            raise existing
        if ".zmetadata" in read:
            self._listed_by(path, parsed(".zmetadata"))
        if ".zarray" not in read and ".zgroup" not in read:
            if existing is None and ".zmetadata" in read:  # zarr 2's open_consolidated opens it as a group,
                # with the attributes its .zattrs or, where there is none, its .zmetadata gives
                zattrs = parsed(".zattrs") if ".zattrs" in read else parsed(".zmetadata")["metadata"].get(".zattrs")
                if not isinstance(zattrs, dict):
                    zattrs = {}
                node = self._converted(folder, path, None, zattrs, digests, None, origin="implicit")
                return node._replace(consolidates=True)
            if existing is None:
                raise UnconvertibleError("no .zarray, .zgroup, zarr.json or .zmetadata")
            document = parsed("zarr.json")  # its v2 files removed by an earlier run: it stays as it is
            if not isinstance(document, dict) or document.get("zarr_format") != 3:
                raise UnconvertibleError("zarr.json is not Zarr v3 metadata, and there is no v2 metadata")
            kind = "array" if document.get("node_type") == "array" else "group"
            if kind == "array":
                folder.subfolders[:] = []  # a Zarr v3 array holds chunks only
            consolidated = document.get("consolidated_metadata")
            if kind == "group" and isinstance(consolidated, dict):
                self.listed.setdefault(path, _Listed(3, _v3_entries(consolidated)))
            return _Node(folder.path, path, kind, document, "v3", digests, existing, consolidates=path in self.listed)
        zattrs = parsed(".zattrs") if ".zattrs" in read else self._consolidated_attributes(path)
        if not isinstance(zattrs, dict):
            raise UnconvertibleError(f".zattrs must be an object, got {type(zattrs).__name__}")
        if ".zarray" not in read:
            if not isinstance(parsed(".zgroup"), dict):
                raise UnconvertibleError(".zgroup is not Zarr v2 group metadata")
            self._compare_with_consolidation(path, None, zattrs)
            return self._converted(folder, path, None, zattrs, digests, existing)
        self.arrays.add(path)
        zarray = parsed(".zarray")
        self._compare_with_consolidation(path, zarray, zattrs)
        v2_array = self._as_stored(folder, path, zarray)
        return self._converted(folder, path, v2_array, zattrs, digests, existing)

    def _as_stored(self, folder: Folder, path: str, zarray: Any) -> Any:
        """``zarray`` with the chunk layout the store shows where it says none; the walk pruned of its chunks."""
        if not isinstance(zarray, dict) or not isinstance(zarray.get("shape"), list):
            raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
        rank, separator = len(zarray["shape"]), zarray.get("dimension_separator")
        if separator is None:
            try:
                nested = nested_layout(folder.subfolders, folder.files, rank)
            except ValueError as exc:
                raise UnconvertibleError(f"{exc}, under a .zarray without dimension_separator") from None
            if nested:
                zarray = {**zarray, "dimension_separator": "/"}
                self.note(
                    path,
                    "its .zarray names no dimension_separator, but its chunks lie in nested folders (0/0), as zarr "
                    "before 2.8 wrote them: converted with the separator '/'",
                )
        chunks = set(chunk_folders(folder.subfolders, folder.files, rank, zarray.get("dimension_separator")))
        folder.subfolders[:] = [name for name in folder.subfolders if name not in chunks]
        return zarray

    def _converted(
        self,
        folder: Folder,
        path: str,
        zarray: dict[str, Any] | None,
        zattrs: dict[str, Any],
        read: dict[str, bytes],
        existing: bytes | None,
        origin: str = "v2",
    ) -> _Node:
        """A v2 node (``zarray`` None: a group) made a v3 node by the rules, its notes and readers reported."""
        conversion: Conversion = group_document(zattrs) if zarray is None else array_document(zarray, zattrs)
        oldest, readers = self.options.oldest_zarr, conversion.readers
        if readers is not None and oldest is not None and oldest < readers.since:
            raise UnconvertibleError(
                f"zarr-python {release(oldest)} would read it wrong ({readers.why}); left as v2 for readers on "
                f"zarr-python {release(oldest)} (--oldest-zarr); {release(readers.since)} and later read it right"
            )
        for note in conversion.notes:
            self.note(path, note)
        kind = "group" if zarray is None else "array"
        return _Node(
            folder.path,
            path,
            kind,
            conversion.document,
            origin,
            read,
            existing,
            zarray,
            conversion.folded,
            consolidates=".zmetadata" in read or _consolidates(existing),
            readers=readers,
            chunk_names=None if zarray is None or path in self.unlisted else folder.files,
        )

    def _listed_by(self, path: str, zmetadata: Any) -> None:
        """What the ``.zmetadata`` of the group at ``path`` lists, kept for `take_what_consolidations_list`."""
        metadata = zmetadata.get("metadata") if isinstance(zmetadata, dict) else None
        if not isinstance(metadata, dict):
            raise UnconvertibleError(".zmetadata is not Zarr v2 consolidated metadata (no 'metadata' object)")
        entries: dict[str, dict[str, Any]] = {}
        for key, document in metadata.items():
            node, _, name = key.rpartition("/") if "/" in key else ("", "", key)
            if name in (".zarray", ".zgroup", ".zattrs"):
                entries.setdefault(node, {})[name] = document
        # A node is a .zarray or a .zgroup (attributes alone make none, as zarr 2 reads it).
        self.listed[path] = _Listed(2, {node: e for node, e in entries.items() if {".zarray", ".zgroup"} & set(e)})

    # -- the check ---------------------------------------------------------------------------------------------

    def _passing_the_check(self, arrays: list[_Node]) -> list[_Node]:
        """The arrays whose check passes (`v3_check`); the others fail.

        Each array's fill value is compared, then its stored chunks, chunk 0 first, until one shows the mapping
        right (`shows_the_mapping`) or every stored chunk has been compared: a sample in which a wrong mapping could
        not show vouches for no chunk but its own. A chunk that shows it vouches for the arrays read by the same
        pipelines too (`pipelines_key`, kept in ``proven``): they pass unread. The chunks are read in rounds: per
        pipelines one array, then two, four, ..., each its next one, two, four, ... chunks (few rounds where
        samples of zeros come first), ``Files.concurrency`` chunks in memory at a time.
        """
        if not self.options.verify:
            return arrays
        failed: set[str] = set()
        pending: dict[str, _Checking] = {}
        for node in arrays:
            if node.v2_array is None:
                continue
            pipelines = pipelines_key(node.v2_array)
            if pipelines is not None and pipelines in self.proven:
                continue
            try:
                check_fill_value(node.v2_array, node.document)
            except Exception as exc:
                self.fail(node.path, reason(exc))
                failed.add(node.path)
                continue
            indices = chunk_indices(node.v2_array, node.chunk_names)
            pending[node.path] = _Checking(node.folder, node.v2_array, node.document, pipelines, indices)
        size = 1
        while pending:
            taken: dict[str, int] = {}
            samples: list[tuple[str, tuple[int, ...]]] = []
            for path, checking in list(pending.items()):
                if checking.pipelines is not None and checking.pipelines in self.proven:
                    del pending[path]
                    continue
                group = checking.pipelines or path
                taken[group] = taken.get(group, 0) + 1
                if taken[group] > size:
                    continue
                more = list(islice(checking.indices, size))
                if not more:  # every stored chunk compared, none could show a mapping: each value was compared
                    del pending[path]
                samples += [(path, index) for index in more]
            for start in range(0, len(samples), self.files.concurrency):
                failed |= self._sample(pending, samples[start : start + self.files.concurrency])
            size *= 2
        return [node for node in arrays if node.path not in failed]

    def _sample(self, pending: dict[str, _Checking], samples: list[tuple[str, tuple[int, ...]]]) -> set[str]:
        """Read and compare ``samples`` (path, chunk index) of the ``pending`` arrays; those that show the mapping,
        or fail, leave ``pending``. The paths that failed."""
        wanted = [
            (path, index) for path, index in samples if path in pending and pending[path].pipelines not in self.proven
        ]
        files = {(path, index): f"{pending[path].folder}/{chunk_key(pending[path].zarray, index)}"
                 for path, index in wanted}  # fmt: skip
        chunks = self.files.read_data(files.values())
        failed: set[str] = set()
        for path, index in wanted:
            if path not in pending:  # failed, or shown right, by an earlier chunk of this batch
                continue
            checking = pending[path]
            try:
                shown = check_chunk(checking.zarray, checking.document, index, chunks[files[path, index]])
            except Exception as exc:
                self.fail(path, reason(exc))
                failed.add(path)
                del pending[path]
                continue
            if shown:
                del pending[path]
                if checking.pipelines is not None:
                    self.proven.add(checking.pipelines)
        return failed

    # -- what consolidated metadata lists ------------------------------------------------------------------------

    def take_what_consolidations_list(self) -> None:
        """Nodes a consolidated metadata lists that the walk did not find: read from their own files where they
        have them (a listing that missed them), else converted from the v2 entry (v2 readers reach them through
        ``.zmetadata`` alone) or left out of a v3 consolidation (their ``zarr.json`` is gone)."""
        missing: dict[str, tuple[str, _Listed]] = {}
        for group, listed in self.listed.items():
            for below in listed.entries:
                path = posixpath.join(group, below).strip("/") if below else group
                if path in self.nodes or self._unreachable(path):
                    continue
                missing.setdefault(path, (group, listed))
        for start in range(0, len(missing), BATCH):
            paths = list(missing)[start : start + BATCH]
            folders = {path: f"{self.root}/{path}" for path in paths}
            read = self.files.read(f"{folders[path]}/{name}" for path in paths for name in _READ)
            found: list[tuple[Folder, str]] = []
            for path in paths:
                results = {name: read[f"{folders[path]}/{name}"] for name in _READ}
                present = [name for name, data in results.items() if not isinstance(data, FileNotFoundError)]
                problem = next((data for data in results.values() if isinstance(data, Exception)), None)
                if set(present) & set(NODE_FILES):  # its own node: the walk's listing missed it (a .zattrs alone
                    # makes no node: zarr reads such a node through its .zmetadata entry)
                    found.append((Folder(folders[path], [], sorted(present)), path))
                    self.unlisted.add(path)
                elif problem is not None and not isinstance(problem, FileNotFoundError):
                    self.fail(path, reason(problem))
                else:
                    self._from_consolidation(path, *missing[path])
            self.take_nodes(found)

    def _unreachable(self, path: str) -> bool:
        """Whether ``path`` lies in an array, or below a path that failed (not visited, not converted)."""
        return any(parent in self.arrays or parent in self.failed for parent in _parents(path)) or path in self.failed

    def _consolidated_attributes(self, path: str) -> dict[str, Any]:
        """The attributes of a node without ``.zattrs``: those of its entry in a ``.zmetadata`` above it (the root's
        first), with a note, where one has them; v2 readers that open the store through it (xarray, open_consolidated)
        see them, and they must outlive the ``.zmetadata``."""
        for group, listed in sorted(self.listed.items(), key=lambda item: _depth(item[0])):
            if listed.zarr_format != 2 or not (group == "" or path == group or path.startswith(f"{group}/")):
                continue
            attributes = listed.entries.get(path[len(group) :].lstrip("/"), {}).get(".zattrs")
            if isinstance(attributes, dict) and attributes:
                where = f"{group}/.zmetadata".lstrip("/")
                self.note(path, f"it has no .zattrs: its attributes are those of its entry in {where}, where v2 "
                                "readers that open the store through it find them")  # fmt: skip
                return attributes
        return {}

    def _compare_with_consolidation(self, path: str, zarray: Any, zattrs: dict[str, Any]) -> None:
        """A note where a ``.zmetadata`` above the node lists other metadata than its own files hold (the walk
        is breadth first: a group's .zmetadata is read before the nodes below it)."""
        for group, listed in self.listed.items():
            if listed.zarr_format != 2 or not (group == "" or path == group or path.startswith(f"{group}/")):
                continue
            entry = listed.entries.get(path[len(group) :].lstrip("/"))
            if entry is not None and (entry.get(".zarray") != zarray or entry.get(".zattrs", {}) != zattrs):
                self.note(
                    path,
                    "its entry in .zmetadata differs from its own files (a consolidation older than a change): "
                    "converted from its own files, as zarr opens it without the consolidation",
                )

    def _from_consolidation(self, path: str, group: str, listed: _Listed) -> None:
        below = path[len(group) :].strip("/") if group else path
        entry = listed.entries[below]
        self.unlisted.add(path)
        folder = Folder(f"{self.root}/{path}" if path else self.root, [], [])
        if listed.zarr_format == 3:
            self.note(group, f"{below}: in the consolidated metadata, but its zarr.json is gone: left out of it")
            return
        zattrs, zarray = entry.get(".zattrs", {}), entry.get(".zarray")
        if not isinstance(zattrs, dict):
            self.fail(path, "its .zattrs in .zmetadata is not an object")
            return
        try:
            v2_array = None if zarray is None else self._as_stored(folder, path, zarray)
            node = self._converted(folder, path, v2_array, zattrs, {}, None, "consolidated")
        except Exception as exc:
            self.fail(path, reason(exc))
            return
        self.note(path, "known only from .zmetadata (its own v2 files are gone): converted from its entry there")
        if node.kind == "array":
            self.arrays.add(path)
            checked = self._passing_the_check([node])
            self.failed |= self._write([(n, n.document) for n in checked])
            if checked and path not in self.failed:
                self.nodes[path] = node._replace(v2_array=None, chunk_names=None)
        else:
            self.nodes[path] = node

    # -- groups, and the consolidation -----------------------------------------------------------------------

    def write_groups(self) -> None:
        """Every group's ``zarr.json``, deepest first (a batch per depth), each only once everything below it
        converted; the root last."""
        for path in [*self.nodes, *self.failed]:
            for parent in _parents(path):
                if parent in self.nodes or parent in self.arrays or parent in self.failed:
                    break
                folder = f"{self.root}/{parent}" if parent else self.root
                self.nodes[parent] = _Node(folder, parent, "group", _IMPLICIT_GROUP, "implicit")
        blocked = {parent for path in self.failed for parent in _parents(path)}
        groups = [node for node in self.nodes.values() if node.kind == "group"]
        for depth in sorted({_depth(node.path) for node in groups}, reverse=True):
            writes = []
            for node in (node for node in groups if _depth(node.path) == depth):
                if node.path in blocked:
                    below = sum(path.startswith(f"{node.path}/") or not node.path for path in self.failed)
                    if node.origin == "v2" and node.existing is None:
                        self.fail(node.path, f"left as Zarr v2: {below} path(s) below it could not be converted")
                    elif node.origin == "v2":
                        self.fail(node.path, f"its zarr.json is left as it is: {below} path(s) below it could not "
                                             "be converted")  # fmt: skip
                    continue
                document = node.document
                if node.consolidates:
                    try:
                        document = self._consolidated(node)
                    except UnconvertibleError as exc:
                        self.fail(node.path, str(exc))
                        continue
                writes.append((node, document))
            not_written = self._write(writes)
            self.failed |= not_written
            blocked |= {parent for path in not_written for parent in _parents(path)}
            self.report.consolidated |= any(
                node.path == "" and node.consolidates and "" not in not_written for node, _ in writes
            )

    def _consolidated(self, group: _Node) -> dict[str, Any]:
        """The group's document with every node below it consolidated, as zarr-python writes it.

        Each node's document is parsed by zarr-python on the way: one it cannot
        read is reported on its own line, and the group is not written.
        """
        zarr = zarr_api()
        prefix = f"{group.path}/" if group.path else ""
        below = {path[len(prefix) :]: node for path, node in self.nodes.items() if path.startswith(prefix) and path}
        documents = {"": group.document, **{path: node.document for path, node in below.items()}}
        buffer = zarr.prototype.buffer
        keys = {f"{path}/zarr.json".lstrip("/"): buffer.from_bytes(_encoded(doc)) for path, doc in documents.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "consolidated metadata is not part of the v3 spec": asked for here
            try:
                zarr.consolidate(zarr.memory_store(keys), zarr_format=3)  # a MemoryStore works on the dict given
            except Exception:
                unreadable = {path: why for path, doc in documents.items() if (why := _unreadable_by_zarr(doc))}
                for path, why in unreadable.items():
                    self.fail(f"{prefix}{path}".rstrip("/"), f"zarr-python {zarr.version} cannot read its zarr.json "
                              f"({why}): it cannot be consolidated")  # fmt: skip
                raise UnconvertibleError(
                    f"not consolidated: zarr-python {zarr.version} cannot read the zarr.json of "
                    f"{len(unreadable) or 'some'} node(s) below it"
                ) from None
        document: dict[str, Any] = json.loads(keys["zarr.json"].to_bytes())
        return {**group.document, "consolidated_metadata": document.get("consolidated_metadata")}

    # -- writing ---------------------------------------------------------------------------------------------

    def _write(self, writes: list[tuple[_Node, dict[str, Any]]]) -> set[str]:
        """Each node's ``zarr.json`` in one batch (created; never over another, but a consolidated group's
        consolidation); the paths of the nodes not written."""
        actions: dict[str, str] = {}
        failures: dict[str, Exception] = {}
        creates: dict[str, bytes] = {}
        replacements: list[Replacement] = []
        by_target = {f"{node.folder}/zarr.json": node.path for node, _ in writes}
        for node, document in writes:
            target = f"{node.folder}/zarr.json"
            try:
                if node.existing is None:
                    actions[node.path] = "written"
                    creates[target] = _encoded(document)
                    continue
                replacement = _update(node, target, document)
                actions[node.path] = "kept" if replacement is None else "updated"
                if replacement is not None:
                    replacements.append(replacement)
            except Exception as exc:
                failures[node.path] = exc
        if not self.options.dry_run:
            written = {**self.files.create(creates), **self.files.replace(replacements)}
            failures |= {by_target[target]: exc for target, exc in written.items()}
        for node, document in writes:
            if node.path in failures:
                self.fail(node.path, reason(failures[node.path]))
                continue
            result = NodeResult(
                node.path, node.kind, actions[node.path], node.folded, node.origin == "implicit", document,
                v3_only=node.origin == "v3",
            )  # fmt: skip
            self.report.converted.append(result)
            notes = self.notes.pop(node.path, [])
            self.report.notes += [(node.path or ".", note) for note in self.standing.pop(node.path, [])]
            if result.action != "kept":  # a rerun that writes nothing has nothing to tell again
                self.report.notes += [(node.path or ".", note) for note in notes]
                if node.readers is not None:
                    self.report.readers.append((node.path or ".", node.readers))
            if self.options.on_node is not None:
                self.options.on_node(result)
        return set(failures)

    def remove_v2_metadata(self) -> None:
        """The v2 metadata files this run read of every node, in batches, each only if it still holds what was
        read; ``.zmetadata`` last (v2 readers of it find the chunks to the end)."""
        for last in (False, True):
            removals = {
                f"{node.folder}/{name}": (f"{node.path}/{name}".lstrip("/"), read)
                for node in self.nodes.values()
                for name, read in node.read.items()
                if (name == ".zmetadata") == last
            }
            paths = list(removals)
            for start in range(0, len(paths), BATCH):
                batch = paths[start : start + BATCH]
                failures = {} if self.options.dry_run else self.files.remove(Removal(p, removals[p][1]) for p in batch)
                for path in batch:
                    relative = removals[path][0]
                    if path in failures:
                        self.report.failures.append((relative, reason(failures[path])))
                    else:
                        self.report.removed.append(relative)


_IMPLICIT_GROUP: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": {}}


def _present(folder: Folder) -> list[str]:
    return [name for name in _READ if name in folder.files]


def _relative(path: str, root: str) -> str:
    return path[len(root) :].lstrip("/\\").replace(os.sep, "/")


def _v3_entries(consolidated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    metadata = consolidated.get("metadata")
    return {path: {"zarr.json": document} for path, document in (metadata or {}).items() if isinstance(path, str)}


def _consolidates(existing: bytes | None) -> bool:
    """Whether a zarr.json (as read) holds consolidated metadata."""
    if existing is None or b"consolidated_metadata" not in existing:
        return False
    try:
        document = json.loads(existing.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(document, dict) and isinstance(document.get("consolidated_metadata"), dict)


def _unreadable_by_zarr(document: dict[str, Any]) -> str | None:
    """Why zarr-python cannot read a node's document (None where it can)."""
    zarr = zarr_api()
    parse = zarr.array_v3.from_dict if document.get("node_type") == "array" else zarr.group.from_dict
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse(dict(document))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _update(node: _Node, target: str, document: dict[str, Any]) -> Replacement | None:
    """None where the existing ``zarr.json`` says ``document`` already; else its replacement (only if the file
    still holds what was read), where only a consolidated group's consolidation differs or the node is to be
    brought up to date (`_Run._settled`); any other difference raises."""
    assert node.existing is not None
    try:
        existing = json.loads(node.existing.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UnconvertibleError(f"zarr.json exists already and is not JSON ({reason(exc)}): not overwritten") from None
    if not isinstance(existing, dict):
        raise UnconvertibleError("zarr.json exists already and is not a JSON object: not overwritten")
    wanted = json.loads(_encoded(document))
    if _same_document(existing, wanted):
        return None
    if not node.replaces and _differences(node._replace(document=wanted)) is not None:
        raise UnconvertibleError("zarr.json exists already and says something else than its v2 metadata")
    return Replacement(target, _encoded(document), node.existing)


def _existing_document(node: _Node) -> dict[str, Any] | None:
    """A node's ``zarr.json`` as read, parsed; None where it is not a JSON object."""
    try:
        existing = json.loads(node.existing.decode("utf-8-sig")) if node.existing is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return existing if isinstance(existing, dict) else None


def _differences(node: _Node) -> str | None:
    """What differs between a node's ``zarr.json`` (a JSON object) and its conversion: the top-level keys, shapes
    shown; None where they say the same but for a consolidated group's consolidation, or zarr.json is no object."""
    existing = _existing_document(node)
    if existing is None:
        return None
    wanted = json.loads(_encoded(node.document))
    if node.consolidates:
        existing, wanted = {**existing, "consolidated_metadata": None}, {**wanted, "consolidated_metadata": None}
    if _same_document(existing, wanted):
        return None
    if existing.get("node_type") != wanted.get("node_type"):
        return f"a {existing.get('node_type')} in zarr.json, a {wanted.get('node_type')} in v2"
    keys = [key for key in {**wanted, **existing} if existing.get(key) != wanted.get(key)]
    shown = [f"shape {existing.get('shape')} in zarr.json, {wanted.get('shape')} in v2" if key == "shape" else key
             for key in keys]  # fmt: skip
    return ", ".join(shown)


def _same_document(existing: Any, wanted: dict[str, Any]) -> bool:
    """Whether two zarr.json documents say the same (zarr 3.1.3 writes an absent consolidation as null)."""

    def without_null_consolidation(document: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in document.items() if not (k == "consolidated_metadata" and v is None)}

    return isinstance(existing, dict) and without_null_consolidation(existing) == without_null_consolidation(wanted)


def _encoded(document: dict[str, Any]) -> bytes:
    """A document as zarr-python writes it (indented), every node's attributes encoded compactly: attributes
    of tens of megabytes take as long as ``json.dumps`` in C, not seconds in Python's indenting encoder."""
    attributes: list[str] = []

    def marked(node: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(node.get("attributes"), dict) or not node["attributes"]:
            return node
        attributes.append(json.dumps(node["attributes"], allow_nan=True, separators=(", ", ": ")))
        return {**node, "attributes": f"\0attributes {len(attributes) - 1}"}

    skeleton = marked(document)
    consolidated = document.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        metadata = {path: marked(n) if isinstance(n, dict) else n for path, n in consolidated["metadata"].items()}
        skeleton = {**skeleton, "consolidated_metadata": {**consolidated, "metadata": metadata}}
    text = json.dumps(skeleton, indent=2, allow_nan=True)
    return _MARK.sub(lambda mark: attributes[int(mark.group(1))], text).encode("utf-8")


_MARK = re.compile(r'"\\u0000attributes (\d+)"')


def _parents(path: str) -> Iterator[str]:
    """The folders above a node, nearest first, up to the store's root ``""``."""
    while path:
        path = path.rpartition("/")[0]
        yield path


def _depth(path: str) -> int:
    """A node's depth: 0 for the root, 1 for its members, ..."""
    return path.count("/") + 1 if path else 0
