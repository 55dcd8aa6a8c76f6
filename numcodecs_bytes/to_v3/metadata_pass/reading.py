"""Reading a node: its files as read (or its entry in a consolidated metadata) made a `nodes.Node`,
its v3 document made by the rules (`rules`), with what the walk must not enter (its chunk folders).

What to tell of a node goes with it (`nodes.Node.notes`), for the writer of its ``zarr.json`` to
report. The reader reads what the run knows (`nodes.NodeIndex`: what each consolidated metadata
lists, which the run keeps from `consolidation_of` before it reads the node) and writes none of it.
Nothing here reads or writes a store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...problems import reason
from ...store import Folder, digest
from ...store.layout import REMOVING_V2, RETIRED, Location, chunk_folders, nested_layout
from ...zarr_versions import release
from ..nodes import Node, NodeIndex
from ..rules.arrays import (
    Conversion,
    UnconvertibleError,
    array_document,
    check_grid,
    group_document,
)
from ..rules.consolidations import (
    Consolidation,
    attributes_listed,
    differs_from_listing,
    listing_of,
    v3_listing,
)
from ..rules.documents import encoded, existing_document, holds_consolidation
from ..rules.ome import with_dimension_names
from ..rules.plan import may_hold_unread_shards
from ..rules.sharding import holds_chunks_of, is_sharding_of

__all__ = ["NodeReader"]


class NodeReader:
    """Reads the nodes of one run (see the module's docstring)."""

    def __init__(self, index: NodeIndex, oldest_zarr: tuple[int, ...] | None) -> None:
        self.index, self.oldest_zarr = index, oldest_zarr
        # each OME-Zarr 0.4 level array's dimension names, by its path (`ome.level_dimension_names`
        # of the groups above it: the run reads those before the arrays)
        self.level_names: dict[str, list[str]] = {}

    # -- a node from its files ---------------------------------------------------------------------

    def node(self, folder: Folder, at: Location, read: dict[str, bytes | Exception]) -> Node:
        """The node at ``at`` (``folder``: the walk's listing of its folder) and its ``zarr.json``
        document, from its files as ``read`` (by name), with the subfolders that hold its chunks
        (the walk does not enter them). An array that a killed run switched to new shards carries
        the files it was switching away from (`store.layout.RETIRED`), and one whose folder may
        hold shards a killed run placed says so (`plan.may_hold_unread_shards`): the rerun's
        sharding pass takes them. What to tell of it goes with it (`Node.notes`)."""
        notes: list[str] = []
        node = self._node(folder, at, read, notes)
        node = node._replace(notes=(*node.notes, *notes))
        if node.kind == "array":
            node = node._replace(
                leftovers=may_hold_unread_shards(node.document, folder.files, folder.subfolders)
            )
        retired = read.get(RETIRED)
        if isinstance(retired, Exception):
            raise retired
        if retired is None or node.kind != "array":
            return node
        return node._replace(retired=_retired(retired))

    def _node(
        self, folder: Folder, at: Location, read: dict[str, bytes | Exception], notes: list[str]
    ) -> Node:
        path = at.path

        def parsed(name: str) -> Any:
            return _parsed(name, read[name])

        digests = {
            name: digest(data)
            for name, data in read.items()
            if name not in ("zarr.json", RETIRED) and isinstance(data, bytes)
        }
        existing = read.get("zarr.json")
        if isinstance(existing, Exception):
            raise existing
        if ".zarray" not in read and ".zgroup" not in read:
            if existing is None and ".zmetadata" in read:
                # zarr 2's open_consolidated opens it as a group, with the attributes its .zattrs
                # or, where there is none, its .zmetadata gives
                zattrs = (
                    parsed(".zattrs")
                    if ".zattrs" in read
                    else parsed(".zmetadata")["metadata"].get(".zattrs")
                )
                if not isinstance(zattrs, dict):
                    zattrs = {}
                node = self.converted(folder, at, None, zattrs, digests, None, origin="implicit")
                return node._replace(consolidates=True)
            if existing is None:
                raise UnconvertibleError("no .zarray, .zgroup, zarr.json or .zmetadata")
            # its v2 files removed by an earlier run: it stays as it is
            document = parsed("zarr.json")
            node, note = v3_node(folder, at, document, read.get(REMOVING_V2), digests, existing)
            notes += filter(None, [note])
            if node.was_removing:
                return node
            return node._replace(consolidates=path in self.index.listed)
        if ".zattrs" in read:
            zattrs = parsed(".zattrs")
        else:
            zattrs, note = attributes_listed(self.index.listed, path)
            notes += filter(None, [note])
        if not isinstance(zattrs, dict):
            raise UnconvertibleError(f".zattrs must be an object, got {type(zattrs).__name__}")
        if ".zarray" not in read:
            if not isinstance(parsed(".zgroup"), dict):
                raise UnconvertibleError(".zgroup is not Zarr v2 group metadata")
            notes += filter(None, [differs_from_listing(self.index.listed, path, None, zattrs)])
            return self.converted(folder, at, None, zattrs, digests, existing)
        zarray = parsed(".zarray")
        notes += filter(None, [differs_from_listing(self.index.listed, path, zarray, zattrs)])
        v2_array = self.as_stored(folder, zarray, notes)
        leave_out = tuple(chunk_folders(folder.subfolders, folder.files, zarray))
        return self.converted(folder, at, v2_array, zattrs, digests, existing)._replace(
            leave_out=leave_out
        )

    def as_stored(self, folder: Folder, metadata: Any, notes: list[str]) -> dict[str, Any]:
        """A ``.zarray`` with the chunk layout the store shows where it says none (`as_stored`),
        what to tell of it into ``notes``."""
        zarray, note = as_stored(folder, metadata)
        notes += filter(None, [note])
        return zarray

    def converted(
        self,
        folder: Folder,
        at: Location,
        zarray: dict[str, Any] | None,
        zattrs: dict[str, Any],
        digests: dict[str, bytes],
        existing: bytes | None,
        origin: str = "v2",
    ) -> Node:
        """A v2 node (``zarray`` None: a group) made a v3 node by the rules (`converted`), with what
        to tell of it."""
        path = at.path
        listed = path not in self.index.unlisted
        names = self.level_names.get(path) if zarray is not None else None
        node, notes = converted(
            folder, at, zarray, zattrs, digests, existing, origin, self.oldest_zarr, listed, names
        )
        return node._replace(notes=(*node.notes, *notes))

    def from_consolidation(
        self, folder: Folder, at: Location, group: str, listed: Consolidation
    ) -> Node | str:
        """A node known only from its entry in a consolidated metadata (its own files are gone):
        converted from a v2 entry; a v3 entry is left out of the consolidation: what to tell of
        that on the ``group`` instead of a node. An entry that cannot be converted raises
        `rules.UnconvertibleError` (or what its rules raise)."""
        path = at.path
        below = path[len(group) :].strip("/") if group else path
        entry = listed.entries[below]
        if listed.zarr_format == 3:
            return (
                f"{below}: in the consolidated metadata, but its zarr.json is gone: left out of it"
            )
        zattrs, zarray = entry.get(".zattrs", {}), entry.get(".zarray")
        if not isinstance(zattrs, dict):
            raise UnconvertibleError("its .zattrs in .zmetadata is not an object")
        notes: list[str] = []
        v2_array = None if zarray is None else self.as_stored(folder, zarray, notes)
        node = self.converted(folder, at, v2_array, zattrs, {}, None, "consolidated")
        notes.append(
            "known only from .zmetadata (its own v2 files are gone): converted from its entry there"
        )
        return node._replace(notes=(*node.notes, *notes))


def as_stored(folder: Folder, metadata: Any) -> tuple[dict[str, Any], str | None]:
    """A ``.zarray`` with the chunk layout the store shows where it says none, and a note where it
    needed one."""
    if not isinstance(metadata, dict):
        raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
    check_grid(metadata)
    zarray: dict[str, Any] = metadata
    if zarray.get("dimension_separator") is not None:
        return zarray, None
    try:
        nested = nested_layout(folder.subfolders, folder.files, len(zarray["shape"]))
    except ValueError as exc:
        raise UnconvertibleError(f"{exc}, under a .zarray without dimension_separator") from None
    if not nested:
        return zarray, None
    return {**zarray, "dimension_separator": "/"}, (
        "its .zarray names no dimension_separator, but its chunks lie in nested folders (0/0), as "
        "zarr before 2.8 wrote them: converted with the separator '/'"
    )


def consolidation_of(read: Mapping[str, bytes | Exception]) -> Consolidation | None:
    """What a node's consolidated metadata lists, from its files as ``read`` (by name): its
    ``.zmetadata``'s, else the ``consolidated_metadata`` of a v3 group's ``zarr.json`` with no v2
    metadata beside it; None where it has neither. The run keeps it before it reads the node: the
    node, and the nodes below it, are read against it."""
    existing = read.get("zarr.json")
    if isinstance(existing, Exception):
        raise existing
    if ".zmetadata" in read:
        return listing_of(_parsed(".zmetadata", read[".zmetadata"]))
    if ".zarray" in read or ".zgroup" in read or existing is None:
        return None
    document = _parsed("zarr.json", existing)
    if not isinstance(document, dict) or document.get("zarr_format") != 3:
        return None  # not a v3 node: its reading says so
    consolidated = document.get("consolidated_metadata")
    if document.get("node_type") == "array" or not isinstance(consolidated, dict):
        return None
    return v3_listing(consolidated)


def v3_node(
    folder: Folder,
    at: Location,
    document: Any,
    kept: bytes | Exception | None,
    digests: dict[str, bytes],
    existing: bytes,
) -> tuple[Node, str | None]:
    """A node whose v2 files an earlier run removed, as its ``zarr.json`` ``document`` says, and a
    note; ``kept``: the file a run killed while it removed an array's v2 files kept aside
    (`store.layout.REMOVING_V2`), or None. The walk does not enter an array's folders: a Zarr v3
    array holds chunks only."""
    if not isinstance(document, dict) or document.get("zarr_format") != 3:
        raise UnconvertibleError("zarr.json is not Zarr v3 metadata, and there is no v2 metadata")
    if document.get("node_type") != "array":
        return Node(at, "group", document, "v3", digests, existing), None
    leave_out = tuple(folder.subfolders)
    if kept is None:
        node = Node(at, "array", document, "v3", digests, existing)
        return node._replace(leave_out=leave_out), None
    node, note = _being_removed(folder, at, document, _parsed(REMOVING_V2, kept), digests, existing)
    return node._replace(leave_out=leave_out), note


def _being_removed(
    folder: Folder,
    at: Location,
    document: dict[str, Any],
    kept: Any,
    digests: dict[str, bytes],
    existing: bytes | None,
) -> tuple[Node, str | None]:
    """An array sharded by a run that was killed while it removed its v2 files: finished where
    its zarr.json is a sharding of the array kept aside; else it stays as it is (the file kept
    aside, reported)."""
    if not isinstance(kept, dict) or not isinstance(kept.get("unsharded"), dict):
        raise UnconvertibleError(f"{REMOVING_V2} is not what to-v3 keeps there: left as it is")
    zarray, note = as_stored(folder, kept.get("zarray"))
    if not holds_chunks_of(document, kept["unsharded"]):
        raise UnconvertibleError(
            f"its zarr.json is not a sharding of the array in {REMOVING_V2}, which a killed "
            "to-v3 run kept there while it removed the chunk files: left as it is"
        )
    node = Node(
        at,
        "array",
        document,
        "v3",
        digests,
        existing,
        shard_zarray=zarray,
        conversion=kept["unsharded"],
        chunk_names=folder.files,
        was_removing=True,
    )
    return node, note


def _parsed(name: str, data: bytes | Exception) -> Any:
    """A file's JSON, or an `UnconvertibleError` naming it."""
    if isinstance(data, Exception):
        raise data
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UnconvertibleError(f"{name}: {reason(exc)}") from None


def _retired(data: bytes) -> dict[str, str]:
    """The files a killed run switched an array away from, as it wrote them down
    (`store.layout.RETIRED`)."""
    try:
        files = json.loads(data)["files"]
    except (ValueError, KeyError, TypeError):
        files = None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise UnconvertibleError(f"{RETIRED} is not what to-v3 writes there: left as it is")
    return files


def converted(
    folder: Folder,
    at: Location,
    zarray: dict[str, Any] | None,
    zattrs: dict[str, Any],
    digests: dict[str, bytes],
    existing: bytes | None,
    origin: str,
    oldest_zarr: tuple[int, ...] | None,
    listed: bool,
    level_names: list[str] | None = None,
) -> tuple[Node, tuple[str, ...]]:
    """A v2 node (``zarray`` None: a group) made a v3 node by the rules, and what to tell of it; an
    `UnconvertibleError` where ``oldest_zarr`` would read it wrong. ``listed``: the walk listed its
    folder (its chunk files are known); ``level_names``: an OME-Zarr level array's dimension names
    (its multiscale's axes)."""
    conversion: Conversion = (
        group_document(zattrs) if zarray is None else array_document(zarray, zattrs)
    )
    if level_names is not None:
        document, note = with_dimension_names(conversion.document, level_names)
        notes = conversion.notes if note is None else (*conversion.notes, note)
        conversion = replace(conversion, document=document, notes=notes)
    readers = conversion.readers
    if readers is not None and oldest_zarr is not None and oldest_zarr < readers.since:
        oldest = release(oldest_zarr)
        raise UnconvertibleError(
            f"zarr-python {oldest} would read it wrong ({readers.why}); left as v2 for readers on "
            f"zarr-python {oldest} (oldest_zarr); {release(readers.since)} and later read it right"
        )
    node = Node(
        at,
        "group" if zarray is None else "array",
        conversion.document,
        origin,
        digests,
        existing,
        zarray,
        conversion.folded,
        consolidates=".zmetadata" in digests or holds_consolidation(existing),
        readers=readers,
        chunk_names=folder.files if zarray is not None and listed else None,
        shard_zarray=zarray,
        conversion=None if zarray is None else conversion.document,
    )
    found = existing_document(existing) if zarray is not None else None
    if found is not None and is_sharding_of(found, json.loads(encoded(conversion.document))):
        # an earlier run's sharding of it: shards checked
        node = node._replace(document=found, v2_array=None)
    return node, conversion.notes
