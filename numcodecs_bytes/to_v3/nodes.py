"""The nodes a run finds: each one read from its files (or its consolidated entry) and made a v3 node.

`NodeIndex` owns what the run knows of the store's nodes: those converted,
the arrays (no node below one is part of the hierarchy), the paths that
failed, what each consolidated metadata lists, and each node's notes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..problems import reason
from ..store import Files, Folder, Walk, digest
from ..store.layout import REMOVING_V2, RETIRED, chunk_folders, nested_layout
from ..zarr_versions import release
from .documents import depth, differences, encoded, existing_document, holds_consolidation, parents
from .report import ConversionReport
from .rules import Conversion, ReadersNeed, UnconvertibleError, array_document, group_document
from .sharding import holds_chunks_of, is_sharding_of

__all__ = ["READ", "Consolidation", "Node", "NodeIndex"]

READ = (".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json", REMOVING_V2, RETIRED)
"""The files a node's zarr.json is made from, or compared with."""


class Node(NamedTuple):
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
    chunk_names: tuple[str, ...] | None = None  # the files of an array's folder, where chunks may be (None: not listed)
    shard_zarray: dict[str, Any] | None = None  # an array's v2 metadata as stored: where its chunk files lie
    conversion: dict[str, Any] | None = None  # an array's v2 metadata converted, unsharded (what its chunks are)
    removing_v2: bool = False  # a killed run was removing its v2 files (see `store.layout.REMOVING_V2`)
    retired: Mapping[str, str] = {}  # files a killed run switched the array away from (`store.layout.RETIRED`)

    def kept(self) -> Node:
        """The node as the run keeps it to the end, for the groups and the consolidation: what those need only."""
        existing = self.existing if self.kind == "group" else None
        return self._replace(v2_array=None, existing=existing, chunk_names=None, shard_zarray=None, conversion=None)


class Consolidation(NamedTuple):
    """The nodes one consolidated metadata lists: each one's v2 or v3 metadata there, by path below the group."""

    zarr_format: int
    entries: dict[str, dict[str, Any]]  # v2: {".zarray"/".zgroup"/".zattrs": document}; v3: {"zarr.json": ...}


class NodeIndex:
    """What one run knows of the store's nodes so far; it reads each node as the walk finds it."""

    def __init__(self, report: ConversionReport, oldest_zarr: tuple[int, ...] | None) -> None:
        self.report, self.oldest_zarr = report, oldest_zarr
        self.nodes: dict[str, Node] = {}  # every node that converts (or was converted), by path
        self.arrays: set[str] = set()  # paths of arrays: a node below one is not part of the hierarchy
        self.failed: set[str] = set()  # paths that stay as they are
        self.listed: dict[str, Consolidation] = {}  # what each consolidated group's consolidated metadata lists
        self.notes: dict[str, list[str]] = {}  # each node's notes, reported once its zarr.json is written
        self.standing: dict[str, list[str]] = {}  # notes on what holds until the user acts: reported on every run
        self.unlisted: set[str] = set()  # nodes not found by the walk: their folders' files are not known

    def fail(self, path: str, why: str) -> None:
        self.failed.add("" if path == "." else path)
        self.report.failures.append((path or ".", why))

    def note(self, path: str, what: str) -> None:
        self.notes.setdefault(path, []).append(what)

    def unreachable(self, path: str) -> bool:
        """Whether ``path`` lies in an array, or below a path that failed (not visited, not converted)."""
        return any(parent in self.arrays or parent in self.failed for parent in parents(path)) or path in self.failed

    def container(self, path: str) -> str | None:
        """The array a node lies in, if it lies in one."""
        return next((parent for parent in parents(path) if parent in self.arrays), None)

    # -- a node from its files ---------------------------------------------------------------------------------

    def node(self, folder: Folder, path: str, read: dict[str, bytes | Exception], walk: Walk | None) -> Node:
        """The node in ``folder`` and its ``zarr.json`` document, from its files as ``read`` (by name); the walk
        told which of its subfolders hold chunks. An array that a killed run switched to new shards carries the
        files it was switching away from (`store.layout.RETIRED`), for the rerun to remove."""
        node = self._node(folder, path, read, walk)
        retired = read.get(RETIRED)
        if isinstance(retired, Exception):
            raise retired
        if retired is None or node.kind != "array":
            return node
        try:
            files = json.loads(retired)["files"]
        except (ValueError, KeyError, TypeError):
            files = None
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise UnconvertibleError(f"{RETIRED} is not what to-v3 writes there: left as it is")
        return node._replace(retired=files)

    def _node(self, folder: Folder, path: str, read: dict[str, bytes | Exception], walk: Walk | None) -> Node:

        def parsed(name: str) -> Any:
            data = read[name]
            if isinstance(data, Exception):
                raise data
            try:
                return json.loads(data.decode("utf-8-sig"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise UnconvertibleError(f"{name}: {reason(exc)}") from None

        digests = {name: digest(data) for name, data in read.items()
                   if name not in ("zarr.json", RETIRED) and isinstance(data, bytes)}  # fmt: skip
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
                node = self.converted(folder, path, None, zattrs, digests, None, origin="implicit")
                return node._replace(consolidates=True)
            if existing is None:
                raise UnconvertibleError("no .zarray, .zgroup, zarr.json or .zmetadata")
            document = parsed("zarr.json")  # its v2 files removed by an earlier run: it stays as it is
            if not isinstance(document, dict) or document.get("zarr_format") != 3:
                raise UnconvertibleError("zarr.json is not Zarr v3 metadata, and there is no v2 metadata")
            kind = "array" if document.get("node_type") == "array" else "group"
            if kind == "array" and walk is not None:
                walk.leave_out(folder, folder.subfolders)  # a Zarr v3 array holds chunks only
            if kind == "array" and REMOVING_V2 in read:
                return self._being_removed(folder, path, document, parsed(REMOVING_V2), digests, existing)
            consolidated = document.get("consolidated_metadata")
            if kind == "group" and isinstance(consolidated, dict):
                self.listed.setdefault(path, Consolidation(3, _v3_entries(consolidated)))
            return Node(folder.path, path, kind, document, "v3", digests, existing, consolidates=path in self.listed)
        zattrs = parsed(".zattrs") if ".zattrs" in read else self._consolidated_attributes(path)
        if not isinstance(zattrs, dict):
            raise UnconvertibleError(f".zattrs must be an object, got {type(zattrs).__name__}")
        if ".zarray" not in read:
            if not isinstance(parsed(".zgroup"), dict):
                raise UnconvertibleError(".zgroup is not Zarr v2 group metadata")
            self._compare_with_consolidation(path, None, zattrs)
            return self.converted(folder, path, None, zattrs, digests, existing)
        self.arrays.add(path)
        zarray = parsed(".zarray")
        if walk is not None:
            walk.leave_out(folder, chunk_folders(folder.subfolders, folder.files, zarray))
        self._compare_with_consolidation(path, zarray, zattrs)
        v2_array = self.as_stored(folder, path, zarray)
        return self.converted(folder, path, v2_array, zattrs, digests, existing)

    def _being_removed(self, folder: Folder, path: str, document: dict[str, Any], kept: Any,
                       read: dict[str, bytes], existing: bytes | None) -> Node:  # fmt: skip
        """An array sharded by a run that was killed while it removed its v2 files: finished where its zarr.json
        is the sharding of the conversion kept aside; else it stays as it is (the file kept aside, reported)."""
        if not isinstance(kept, dict) or not isinstance(kept.get("unsharded"), dict):
            raise UnconvertibleError(f"{REMOVING_V2} is not what to-v3 keeps there: left as it is")
        zarray = self.as_stored(folder, path, kept.get("zarray"))
        if not holds_chunks_of(document, kept["unsharded"]):
            raise UnconvertibleError(
                f"its zarr.json is not a sharding of the array in {REMOVING_V2}, which a killed to-v3 run kept there "
                "while it removed the chunk files: left as it is"
            )
        return Node(folder.path, path, "array", document, "v3", read, existing, shard_zarray=zarray,
                    conversion=kept["unsharded"], chunk_names=folder.files, removing_v2=True)  # fmt: skip

    def as_stored(self, folder: Folder, path: str, metadata: Any) -> dict[str, Any]:
        """A ``.zarray`` with the chunk layout the store shows where it says none."""
        if not isinstance(metadata, dict) or not isinstance(metadata.get("shape"), list):
            raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
        zarray: dict[str, Any] = metadata
        if zarray.get("dimension_separator") is None:
            try:
                nested = nested_layout(folder.subfolders, folder.files, len(zarray["shape"]))
            except ValueError as exc:
                raise UnconvertibleError(f"{exc}, under a .zarray without dimension_separator") from None
            if nested:
                zarray = {**zarray, "dimension_separator": "/"}
                self.note(
                    path,
                    "its .zarray names no dimension_separator, but its chunks lie in nested folders (0/0), as zarr "
                    "before 2.8 wrote them: converted with the separator '/'",
                )
        return zarray

    def converted(
        self,
        folder: Folder,
        path: str,
        zarray: dict[str, Any] | None,
        zattrs: dict[str, Any],
        read: dict[str, bytes],
        existing: bytes | None,
        origin: str = "v2",
    ) -> Node:
        """A v2 node (``zarray`` None: a group) made a v3 node by the rules, its notes and readers reported."""
        conversion: Conversion = group_document(zattrs) if zarray is None else array_document(zarray, zattrs)
        oldest, readers = self.oldest_zarr, conversion.readers
        if readers is not None and oldest is not None and oldest < readers.since:
            raise UnconvertibleError(
                f"zarr-python {release(oldest)} would read it wrong ({readers.why}); left as v2 for readers on "
                f"zarr-python {release(oldest)} (oldest_zarr); {release(readers.since)} and later read it right"
            )
        for note in conversion.notes:
            self.note(path, note)
        kind = "group" if zarray is None else "array"
        node = Node(
            folder.path,
            path,
            kind,
            conversion.document,
            origin,
            read,
            existing,
            zarray,
            conversion.folded,
            consolidates=".zmetadata" in read or holds_consolidation(existing),
            readers=readers,
            chunk_names=None if zarray is None or path in self.unlisted else folder.files,
            shard_zarray=zarray,
            conversion=None if zarray is None else conversion.document,
        )
        found = existing_document(existing) if zarray is not None else None
        if found is not None and is_sharding_of(found, json.loads(encoded(conversion.document))):
            return node._replace(document=found, v2_array=None)  # an earlier run's sharding of it: shards checked
        return node

    # -- a node whose zarr.json and v2 metadata disagree ---------------------------------------------------------

    def settled(self, nodes: list[Node], files: Files) -> list[Node]:
        """``nodes`` whose ``zarr.json`` and v2 metadata disagree settled by which was written last.

        Either side may be written after a conversion that kept the v2
        metadata: a v3 writer (xarray, zarr) changes ``zarr.json``, a v2 writer
        its ``.zarray``/``.zgroup``/``.zattrs``. Where ``zarr.json`` is the newer,
        it is kept as it is (and the v2 files, a stale view, go with
        ``remove_v2_metadata``); where the v2 files are, ``zarr.json`` is brought
        up to date from them; where their times do not tell, the node fails and
        both stay as they are.
        """
        disagreeing = {node.path: (node, what) for node in nodes if node.existing is not None and node.origin == "v2"
                       and (what := differences(node.existing, node.document, node.consolidates))}  # fmt: skip
        if not disagreeing:
            return nodes
        names = {path: ["zarr.json", *(name for name in node.read if name != ".zmetadata")]
                 for path, (node, _) in disagreeing.items()}  # fmt: skip
        times = files.modified(
            f"{node.folder}/{name}" for path, (node, _) in disagreeing.items() for name in names[path]
        )
        settled: dict[str, Node | None] = {}
        for path, (node, differing) in disagreeing.items():
            when = {name: times[f"{node.folder}/{name}"] for name in names[path]}
            v3, v2 = when.pop("zarr.json"), list(when.values())
            what = f"zarr.json and its {', '.join(when)} differ ({differing})"
            known = [t for t in (v3, *v2) if isinstance(t, float)]
            if len(known) == len(v2) + 1 and isinstance(v3, float) and v3 > max(known[1:]):
                document = existing_document(node.existing) or {}
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

    # -- what consolidated metadata lists ------------------------------------------------------------------------

    def _listed_by(self, path: str, zmetadata: Any) -> None:
        """What the ``.zmetadata`` of the group at ``path`` lists, kept for the nodes the walk does not find."""
        metadata = zmetadata.get("metadata") if isinstance(zmetadata, dict) else None
        if not isinstance(metadata, dict):
            raise UnconvertibleError(".zmetadata is not Zarr v2 consolidated metadata (no 'metadata' object)")
        entries: dict[str, dict[str, Any]] = {}
        for key, document in metadata.items():
            node, _, name = key.rpartition("/") if "/" in key else ("", "", key)
            if name in (".zarray", ".zgroup", ".zattrs"):
                entries.setdefault(node, {})[name] = document
        # A node is a .zarray or a .zgroup (attributes alone make none, as zarr 2 reads it).
        self.listed[path] = Consolidation(
            2, {node: e for node, e in entries.items() if {".zarray", ".zgroup"} & set(e)}
        )

    def _v2_entries(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        """A node's entries in the ``.zmetadata`` files above it, the root's first: (the group, its entry)."""
        found = []
        for group, listed in sorted(self.listed.items(), key=lambda item: depth(item[0])):
            if listed.zarr_format == 2 and (group == "" or path == group or path.startswith(f"{group}/")):
                entry = listed.entries.get(path[len(group) :].lstrip("/"))
                if entry is not None:
                    found.append((group, entry))
        return found

    def _consolidated_attributes(self, path: str) -> dict[str, Any]:
        """The attributes of a node without ``.zattrs``: those of its entry in a ``.zmetadata`` above it (the root's
        first), with a note, where one has them; v2 readers that open the store through it (xarray, open_consolidated)
        see them, and they must outlive the ``.zmetadata``."""
        for group, entry in self._v2_entries(path):
            attributes = entry.get(".zattrs")
            if isinstance(attributes, dict) and attributes:
                where = f"{group}/.zmetadata".lstrip("/")
                self.note(path, f"it has no .zattrs: its attributes are those of its entry in {where}, where v2 "
                                "readers that open the store through it find them")  # fmt: skip
                return attributes
        return {}

    def _compare_with_consolidation(self, path: str, zarray: Any, zattrs: dict[str, Any]) -> None:
        """A note where a ``.zmetadata`` above the node lists other metadata than its own files hold (the walk
        is breadth first: a group's .zmetadata is read before the nodes below it)."""
        for _, entry in self._v2_entries(path):
            if entry.get(".zarray") != zarray or entry.get(".zattrs", {}) != zattrs:
                self.note(
                    path,
                    "its entry in .zmetadata differs from its own files (a consolidation older than a change): "
                    "converted from its own files, as zarr opens it without the consolidation",
                )

    def missing_from_walk(self) -> dict[str, tuple[str, Consolidation]]:
        """The nodes a consolidated metadata lists that the walk did not find, by path: (the group, its listing)."""
        missing: dict[str, tuple[str, Consolidation]] = {}
        for group, listed in self.listed.items():
            for below in listed.entries:
                path = f"{group}/{below}".strip("/") if below else group
                if path in self.nodes or self.unreachable(path):
                    continue
                missing.setdefault(path, (group, listed))
        return missing

    def from_consolidation(self, folder: Folder, path: str, group: str, listed: Consolidation) -> Node | None:
        """A node known only from its entry in a consolidated metadata (its own files are gone): converted from a
        v2 entry; a v3 entry is left out of the consolidation with a note. None where there is no node to write."""
        below = path[len(group) :].strip("/") if group else path
        entry = listed.entries[below]
        self.unlisted.add(path)
        if listed.zarr_format == 3:
            self.note(group, f"{below}: in the consolidated metadata, but its zarr.json is gone: left out of it")
            return None
        zattrs, zarray = entry.get(".zattrs", {}), entry.get(".zarray")
        if not isinstance(zattrs, dict):
            self.fail(path, "its .zattrs in .zmetadata is not an object")
            return None
        try:
            v2_array = None if zarray is None else self.as_stored(folder, path, zarray)
            node = self.converted(folder, path, v2_array, zattrs, {}, None, "consolidated")
        except Exception as exc:
            self.fail(path, reason(exc))
            return None
        self.note(path, "known only from .zmetadata (its own v2 files are gone): converted from its entry there")
        if node.kind == "array":
            self.arrays.add(path)
        return node


def _v3_entries(consolidated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    metadata = consolidated.get("metadata")
    return {path: {"zarr.json": document} for path, document in (metadata or {}).items() if isinstance(path, str)}
