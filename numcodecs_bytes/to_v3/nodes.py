"""The nodes a run finds, as values (`Node` as its batch reads it, `Kept` as the run keeps it, each
with where it lies and what to tell of it), and what the run knows of them so far (`NodeIndex`):
those converted, the arrays (no node below one is part of the hierarchy), the paths that failed,
what each consolidated metadata lists. Reading a node from its files is `reading`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..store import Store
from ..store.layout import REMOVING_V2, RETIRED, Location
from .rules.arrays import ReadersNeed
from .rules.consolidations import Consolidation
from .rules.documents import parents

__all__ = ["READ", "Consolidation", "Kept", "Node", "NodeIndex", "RunState"]

READ = (".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json", REMOVING_V2, RETIRED)
"""The files a node's zarr.json is made from, or compared with."""


class Node(NamedTuple):
    """A node as its batch of the metadata pass reads it: the ``zarr.json`` it gets, and what the
    check, the switch and the sharding pass need of it. The run keeps less of it to the end
    (`kept`)."""

    at: Location  # where it lies
    kind: str  # "array" or "group"
    document: dict[str, Any]
    # "v2"; "v3": only a zarr.json; "implicit": a folder that leads to nodes; "consolidated":
    # known only from a .zmetadata (no v2 files of its own)
    origin: str = "v2"
    # the v2 metadata files read, by name: the digest of what was read
    digests: Mapping[str, bytes] = {}
    existing: bytes | None = None  # its zarr.json as read, where it has one
    # a v2 array's metadata as v2 readers take it, for the check
    v2_array: dict[str, Any] | None = None
    folded: str | None = None
    consolidates: bool = False  # a group whose consolidated metadata lists the nodes below it
    readers: ReadersNeed | None = None  # where older zarr-python releases read it wrong
    # its zarr.json is older than its v2 metadata, which a v2 writer changed: brought up to date
    replaces: bool = False
    # the files of an array's folder, where chunks may be (None: not listed)
    chunk_names: tuple[str, ...] | None = None
    # an array's v2 metadata as stored: where its chunk files lie
    shard_zarray: dict[str, Any] | None = None
    # an array's v2 metadata converted, unsharded (what its chunks are)
    conversion: dict[str, Any] | None = None
    # a killed run was removing its v2 files (see `store.layout.REMOVING_V2`)
    was_removing: bool = False
    # files a killed run switched the array away from (`store.layout.RETIRED`)
    retired: Mapping[str, str] = {}
    # its folder may hold shards a killed run placed that its zarr.json does not read
    leftovers: bool = False
    # its folder's subfolders that hold chunks: the walk does not enter them
    leave_out: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what to tell of it once its zarr.json is written anew
    standing: tuple[str, ...] = ()  # what to tell of it on every run, until the user acts

    @property
    def path(self) -> str:
        """Its path relative to the store, "" for the root: what the run knows it by."""
        return self.at.path

    def kept(self) -> Kept:
        """The node as the run keeps it once its batch is done (`Kept`)."""
        existing = self.existing if self.kind == "group" else None
        return Kept(
            self.at,
            self.kind,
            self.document,
            self.origin,
            self.digests,
            existing,
            self.folded,
            self.consolidates,
            self.readers,
            self.replaces,
            self.notes,
            self.standing,
        )


class Kept(NamedTuple):
    """A node as the run keeps it once its batch is done, to the end: what the groups' writes, the
    consolidated metadata and the removal of v2 metadata need of it (an array's check and chunk
    layout are done with; the sharding pass has its own record, `rules.plan.ArrayFound`)."""

    at: Location  # where it lies
    kind: str  # "array" or "group"
    document: dict[str, Any]
    origin: str = "v2"  # as `Node.origin`
    digests: Mapping[str, bytes] = {}  # the v2 metadata files read, by name: their digests
    existing: bytes | None = None  # a group's zarr.json as read, where it has one
    folded: str | None = None
    consolidates: bool = False  # a group whose consolidated metadata lists the nodes below it
    readers: ReadersNeed | None = None
    replaces: bool = False  # as `Node.replaces`
    notes: tuple[str, ...] = ()  # as `Node.notes`
    standing: tuple[str, ...] = ()  # as `Node.standing`

    @property
    def path(self) -> str:
        """Its path relative to the store, "" for the root: what the run knows it by."""
        return self.at.path


class NodeIndex:
    """What one run knows of the store's nodes so far."""

    def __init__(self) -> None:
        self.nodes: dict[str, Kept] = {}  # every node that converts (or was converted), by path
        # paths of arrays: a node below one is not part of the hierarchy
        self.arrays: set[str] = set()
        # paths that stay as they are (what the run recorded: `findings.Findings.fail`)
        self.failed: set[str] = set()
        # what each consolidated group's consolidated metadata lists
        self.listed: dict[str, Consolidation] = {}
        # nodes not found by the walk: their folders' files are not known
        self.unlisted: set[str] = set()

    def tell(self, path: str, what: str) -> None:
        """``what`` to tell of a node the run keeps (`Kept.notes`), once its zarr.json is written;
        nothing where the run does not keep it (it writes none)."""
        node = self.nodes.get(path)
        if node is not None:
            self.nodes[path] = node._replace(notes=(*node.notes, what))

    def unreachable(self, path: str) -> bool:
        """Whether ``path`` lies in an array, or below a path that failed (not visited, not
        converted)."""
        return (
            any(parent in self.arrays or parent in self.failed for parent in parents(path))
            or path in self.failed
        )

    def container(self, path: str) -> str | None:
        """The array a node lies in, if it lies in one."""
        return next((parent for parent in parents(path) if parent in self.arrays), None)

    def missing_from_walk(self) -> dict[str, tuple[str, Consolidation]]:
        """The nodes a consolidated metadata lists that the walk did not find, by path: (the group,
        its listing)."""
        missing: dict[str, tuple[str, Consolidation]] = {}
        for group, listed in self.listed.items():
            for below in listed.entries:
                path = f"{group}/{below}".strip("/") if below else group
                if path in self.nodes or self.unreachable(path):
                    continue
                missing.setdefault(path, (group, listed))
        return missing


@dataclass(frozen=True)
class RunState:
    """What the rooms of one run share: the store, what the run knows of its nodes, and whether it
    writes (a dry run reads and checks the same, and writes nothing)."""

    store: Store
    index: NodeIndex
    dry_run: bool
    # told of each data file removed (or, in a dry run, that would be), by its path in the store
    on_removed: Callable[[str], None] | None = None
