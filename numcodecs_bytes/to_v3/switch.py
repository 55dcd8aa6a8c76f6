"""Switching arrays to their shards: each ``zarr.json`` replaced by its sharded document, and the consolidated
metadata above brought up to date.

A ``zarr.json`` is replaced only while it holds what this run read or wrote
(`store.Replacement`); an array whose ``zarr.json`` changed meanwhile (another
writer) keeps it, reported. Until the consolidated metadata above an array is
brought up to date it lists the array unsharded: it reads the chunk files,
which stay until then.
"""

from __future__ import annotations

from ..problems import reason
from ..store import Replacement, Store
from .documents import encoded, parents
from .groups import consolidated
from .nodes import NodeIndex
from .plan import Pack
from .report import ConversionReport

__all__ = ["Switch"]


class Switch:
    """The writer of the sharding pass's ``zarr.json`` files (arrays, and the groups that consolidate them)."""

    def __init__(self, store: Store, index: NodeIndex, report: ConversionReport, current: dict[str, bytes]) -> None:
        self.store, self.index, self.report = store, index, report
        self.current = current  # each node's zarr.json as this run left it, by path
        self.stale: set[str] = set()  # the groups whose consolidated metadata lists an array as it was

    def arrays(self, packs: list[Pack]) -> set[str]:
        """Each array's ``zarr.json`` replaced by its sharded document; the paths switched (the others fail)."""
        failed = self.store.files.replace(
            Replacement(f"{pack.array.folder}/zarr.json", encoded(pack.sharded), self.current[pack.array.path])
            for pack in packs
        )
        switched = set()
        for pack in packs:
            path = pack.array.path
            problem = failed.get(f"{pack.array.folder}/zarr.json")
            if problem is not None:
                self.index.fail(path, reason(problem))
                continue
            switched.add(path)
            self.report.sharded.append(path)
            self.current[path] = encoded(pack.sharded)
            if path in self.index.nodes:
                self.index.nodes[path] = self.index.nodes[path]._replace(document=pack.sharded)
            self.stale |= {group for group in parents(path) if self._consolidates(group)}
        return switched

    def consolidations(self) -> None:
        """The consolidated metadata of every group above an array switched since the last call brought up to
        date, the deepest first (a group's consolidated metadata holds those below it)."""
        written: dict[str, tuple[str, bytes]] = {}  # by the path of its zarr.json: the group, its new bytes
        for group in sorted(self.stale, key=lambda path: -path.count("/")):
            node = self.index.nodes[group]
            try:
                data = encoded(consolidated(self.index, node))
            except Exception as exc:
                self.index.fail(group, reason(exc))
                continue
            if data != self.current[group]:
                written[f"{node.folder}/zarr.json"] = (group, data)
        self.stale.clear()
        failed = self.store.files.replace(
            Replacement(target, data, self.current[group]) for target, (group, data) in written.items()
        )
        for target, (group, data) in written.items():
            if target in failed:
                self.index.fail(group, reason(failed[target]))
            else:
                self.current[group] = data

    def _consolidates(self, group: str) -> bool:
        node = self.index.nodes.get(group)
        return node is not None and node.consolidates and group in self.current
