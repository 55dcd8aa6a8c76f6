"""The metadata pass of a run: the walk's batches taken, each node read (`reading`), settled where
its ``zarr.json`` and v2 metadata disagree (`disagreements`), its sample checked (`sampling`), and
an array's ``zarr.json`` written (`zarr_json`); then the nodes only a consolidated metadata lists.
Each step returns what it found (`Findings`), which the run records before the next: a node's
failure keeps the groups above it as they are."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from ...problems import reason
from ...store import Folder, Store, StoreBatch, Walk
from ...store.layout import NODE_FILES, V2_METADATA_FILES, Location, chunk_folders
from ..findings import Findings
from ..nodes import READ, Node, NodeIndex, RunState
from ..rules.documents import parents
from ..rules.ome import level_dimension_names
from ..rules.plan import ArrayFound
from ..rules.sharding import layout_of
from .disagreements import disagreement, files_to_time, settle, settled_by_documents
from .reading import NodeReader, consolidation_of
from .sampling import Sampler
from .zarr_json import ZarrJsonWriter

__all__ = ["MetadataOptions", "MetadataPass"]


class MetadataOptions(NamedTuple):
    """What a run asks of its metadata pass."""

    sample_check: bool  # each array's sample read as v2 and as v3 before its zarr.json is written
    oldest_zarr: tuple[int, ...] | None  # the oldest zarr-python release the readers use
    sharding: bool  # a shard size or shapes asked: the sharding pass takes every array
    remove_v2_metadata: bool  # it also takes arrays sharded already with v2 files kept


class MetadataPass:
    """The metadata pass of one run (see the module's docstring); the arrays the sharding pass
    takes, as it left them (``to_shard``)."""

    def __init__(
        self, state: RunState, walk: Walk, options: MetadataOptions, zarr_json: ZarrJsonWriter
    ) -> None:
        self.store, self.index, self.walk, self.options = state.store, state.index, walk, options
        self.reader = NodeReader(self.index, options.oldest_zarr)
        self.sampler = Sampler(state.store.files)
        self.zarr_json = zarr_json
        # the arrays the sharding pass takes, as this run left them
        self.to_shard: dict[str, ArrayFound] = {}
        self.groups_seen: set[str] = set()  # whose attributes gave their OME levels' names

    def take(self, batch: StoreBatch) -> Findings:
        """The nodes of one batch of the walk: converted, checked and (arrays) written; what was
        found."""
        taken = Findings()
        taken.report.leftovers_removed += batch.leftovers_removed
        for path, why in batch.problems:
            taken.fail(path, why)
        found: list[tuple[Folder, Location]] = []
        for folder in batch.folders:
            path = self.store.relative(folder.path)
            if not set(folder.files) & set(NODE_FILES):
                continue  # not a node; a group in v3 if nodes lie below it
            container = self.index.container(path)
            if container is not None:
                self.index.arrays.add(path)
                taken.fail(
                    path,
                    f"a node inside the array {container or '.'}: Zarr v3 arrays "
                    "hold no nodes; left as v2",
                )
                continue
            found.append((folder, self.store.at(path)))
        return taken.add(self._take_nodes(found))

    def _take_nodes(self, found: list[tuple[Folder, Location]], walked: bool = True) -> Findings:
        """``found`` nodes (the walk's listing of each, where it lies): their files read, their
        documents made, arrays checked and written; what was found."""
        taken = Findings()
        present = {
            folder.path: [name for name in READ if name in folder.files] for folder, _ in found
        }
        read = self.store.files.read(
            at.file(name) for folder, at in found for name in present[folder.path]
        )
        walk = self.walk if walked else None
        self.reader.level_names |= ome_level_names(self.store, found, read, self.groups_seen)
        built: list[Node] = []
        for folder, at in found:
            path = at.path
            files = {name: read[at.file(name)] for name in present[folder.path]}
            if ".zarray" in folder.files:  # converted or not: no node below it is read
                self.index.arrays.add(path)
            try:
                listing = consolidation_of(files)
                if listing is not None:
                    self.index.listed[path] = listing
                node = self.reader.node(folder, at, files)
            # one node's problem, whatever it is, is reported; the rest converts
            except Exception as exc:
                taken.fail(path, reason(exc))
                if ".zarray" in folder.files and walk is not None:
                    # no digit folder holds a node that zarr reads
                    walk.leave_out(folder, chunk_folders(folder.subfolders, folder.files, None))
                continue
            if walk is not None:
                walk.leave_out(folder, node.leave_out)
            built.append(node)
        settled, disagreements = settled_by_times(self.store, self.index, built)
        taken.add(disagreements)
        taken.add(self._write_arrays(settled))
        for node in settled:
            if node.kind == "group":
                self.index.nodes[node.path] = node.kept()
        return taken

    def _write_arrays(self, nodes: list[Node]) -> Findings:
        """The arrays among ``nodes`` checked (where the run checks) and their ``zarr.json``
        written; those written known from now on, and those the sharding pass takes kept for it."""
        taken = Findings()
        arrays = [node for node in nodes if node.kind == "array"]
        if self.options.sample_check:
            arrays, checked = self.sampler.passing(arrays)
            taken.add(checked)
        taken.add(self.zarr_json.documents([(node, node.document) for node in arrays]))
        for node in arrays:
            if node.path not in taken.failed:
                self.index.nodes[node.path] = node.kept()
                if self._sharding_takes(node):
                    self.to_shard[node.path] = _found(node, self.zarr_json.current[node.path])
        return taken

    def _sharding_takes(self, node: Node) -> bool:
        """Whether the sharding pass takes an array: where shards are asked for, where a killed run
        was removing its v2 files or switching it to new shards (or placed shards its zarr.json
        does not read), and where a removing run finds it sharded with its v2 files kept."""
        if self.options.sharding or node.was_removing or node.retired or node.leftovers:
            return True
        return (
            self.options.remove_v2_metadata
            and node.shard_zarray is not None
            and layout_of(node.document) is not None
        )

    def take_nodes_the_walk_missed(self) -> Findings:
        """Nodes a consolidated metadata lists that the walk did not find: read from their own files
        where they have them (a listing that missed them), else converted from the v2 entry (v2
        readers reach them through ``.zmetadata`` alone) or left out of a v3 consolidation (their
        ``zarr.json`` is gone); what was found."""
        taken = Findings()
        missing = self.index.missing_from_walk()
        paths = list(missing)
        places = {path: self.store.at(path) for path in paths}
        read = self.store.files.read(places[path].file(name) for path in paths for name in READ)
        found: list[tuple[Folder, Location]] = []
        for path in paths:
            at = places[path]
            results = {name: read[at.file(name)] for name in READ}
            present = [
                name for name, data in results.items() if not isinstance(data, FileNotFoundError)
            ]
            problem = next((data for data in results.values() if isinstance(data, Exception)), None)
            if set(present) & set(NODE_FILES):
                # its own node: the walk's listing missed it (a .zattrs alone makes no node: zarr
                # reads such a node through its .zmetadata entry)
                found.append((Folder(at.key, (), tuple(sorted(present))), at))
                self.index.unlisted.add(path)
            elif problem is not None and not isinstance(problem, FileNotFoundError):
                taken.fail(path, reason(problem))
            else:
                group, listed = missing[path]
                self.index.unlisted.add(path)
                try:
                    node = self.reader.from_consolidation(Folder(at.key, (), ()), at, group, listed)
                except Exception as exc:
                    taken.fail(path, reason(exc))
                    continue
                if isinstance(node, str):  # left out of the group's consolidated metadata
                    self.index.tell(group, node)
                elif node.kind == "array":
                    self.index.arrays.add(path)
                    taken.add(self._write_arrays([node]))
                else:
                    self.index.nodes[path] = node.kept()
        return taken.add(self._take_nodes(found, walked=False))


def _found(node: Node, current: bytes) -> ArrayFound:
    """An array as the metadata run leaves it (``current``: its zarr.json as written or read), for
    the sharding pass."""
    v2_metadata = {name: d for name, d in node.digests.items() if name in V2_METADATA_FILES}
    return ArrayFound(
        node.at,
        node.document,
        current,
        node.shard_zarray,
        node.conversion,
        v2_metadata,
        node.was_removing,
        node.retired,
        node.leftovers,
    )


def ome_level_names(
    store: Store, found: list[tuple[Folder, Location]], read: Mapping[str, Any], seen: set[str]
) -> dict[str, list[str]]:
    """The dimension names of OME-Zarr level arrays (`ome.level_dimension_names`), from the groups
    above ``found`` arrays: the groups among ``found`` as ``read``, the others not ``seen`` yet read
    now (where the walk reaches an array before its group); ``seen`` takes them all."""
    groups = [at for folder, at in found if ".zarray" not in folder.files]
    attributes = {at.path: read.get(at.file(".zattrs")) for at in groups}
    arrays = [at.path for folder, at in found if ".zarray" in folder.files]
    unread = sorted(
        {parent for path in arrays for parent in parents(path)} - seen - set(attributes)
    )
    if unread:
        files = {path: store.at(path).file(".zattrs") for path in unread}
        got = store.files.read(files.values())
        attributes |= {path: got[name] for path, name in files.items()}
    names: dict[str, list[str]] = {}
    for path, data in attributes.items():
        seen.add(path)
        try:
            parsed = json.loads(data) if isinstance(data, bytes) else None
        except (ValueError, RecursionError):
            continue  # the node's reading reports it
        if isinstance(parsed, dict):
            names |= level_dimension_names(path, parsed)
    return names


def settled_by_times(
    store: Store, index: NodeIndex, nodes: list[Node]
) -> tuple[list[Node], Findings]:
    """The nodes whose ``zarr.json`` and v2 metadata disagree settled by the documents alone where
    they tell (`settled_by_documents`), else by which side was written last (`settle`: the times of
    their files, read here); those that cannot be settled fail."""
    found = Findings()
    disagreeing = {node.path: what for node in nodes if (what := disagreement(node))}
    if not disagreeing:
        return nodes, found
    by_documents = {
        node.path: settled
        for node in nodes
        if node.path in disagreeing and (settled := settled_by_documents(node)) is not None
    }
    disagreeing = {path: what for path, what in disagreeing.items() if path not in by_documents}
    timed = [node for node in nodes if node.path in disagreeing]
    times = store.files.modified(
        node.at.file(name) for node in timed for name in files_to_time(node)
    )
    kept = []
    for node in nodes:
        if node.path in by_documents:
            settled = by_documents[node.path]
        elif node.path in disagreeing:
            when = {name: times[node.at.file(name)] for name in files_to_time(node)}
            settled = settle(node, disagreeing[node.path], when)
        else:
            kept.append(node)
            continue
        if settled.failure is not None:
            found.fail(node.path, settled.failure)
        if settled.node is not None:
            notes = (*settled.node.notes, *filter(None, [settled.note]))
            standing = (*settled.node.standing, *filter(None, [settled.standing]))
            kept.append(settled.node._replace(notes=notes, standing=standing))
    return kept, found
