"""The one writer of a run's ``zarr.json`` files: the documents the metadata pass converts
(`ZarrJsonWriter.documents`), the arrays switched to new shards (`ZarrJsonWriter.arrays`), and
the consolidated metadata above them (`ZarrJsonWriter.consolidations`). Each returns what it found
(`Findings`: each node written, with its notes, and those that were not), which the run records.

A ``zarr.json`` is created only where none exists, and replaced only while
it holds what this run read or wrote (`store.Replacement`): an array whose
``zarr.json`` changed meanwhile (another writer) keeps it, reported. Until the
consolidated metadata above an array is brought up to date it lists the
array as it was: it reads the files that array read, which stay until then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...problems import reason
from ...store import Replacement
from ..findings import Findings
from ..nodes import Kept, Node, RunState
from ..report import NodeResult
from ..rules.documents import encoded, parents, update
from ..rules.plan import Pack
from .groups import NotConsolidated, consolidated

__all__ = ["ZarrJsonWriter"]


class ZarrJsonWriter:
    """The writer of one run's ``zarr.json`` files (see the module's docstring)."""

    def __init__(self, state: RunState) -> None:
        self.store, self.index, self.dry_run = state.store, state.index, state.dry_run
        # each node's zarr.json as this run left it (written or found), by path
        self.current: dict[str, bytes] = {}
        # the groups whose consolidated metadata lists an array as it was
        self.stale: set[str] = set()

    def documents(self, writes: Sequence[tuple[Node | Kept, dict[str, Any]]]) -> Findings:
        """Each node's ``zarr.json`` in one batch (created; never over another, but a consolidated
        group's consolidation, or one brought up to date); the nodes not written fail."""
        found = Findings()
        actions: dict[str, str] = {}
        failures: dict[str, Exception] = {}
        creates: dict[str, bytes] = {}
        replacements: list[Replacement] = []
        by_target = {node.at.file("zarr.json"): node.path for node, _ in writes}
        for node, document in writes:
            target = node.at.file("zarr.json")
            try:
                if node.existing is None:
                    actions[node.path] = "written"
                    creates[target] = encoded(document)
                    continue
                replacement = update(node.existing, document, node.consolidates, node.replaces)
                actions[node.path] = "kept" if replacement is None else "updated"
                if replacement is not None:
                    replacements.append(Replacement(target, replacement, node.existing))
            except Exception as exc:
                failures[node.path] = exc
        if not self.dry_run:
            written = {**self.store.files.create(creates), **self.store.files.replace(replacements)}
            failures |= {by_target[target]: exc for target, exc in written.items()}
        for node, document in writes:
            if node.path in failures:
                found.fail(node.path, reason(failures[node.path]))
            else:
                self._written(node, document, actions[node.path], found)
        return found

    def _written(
        self, node: Node | Kept, document: dict[str, Any], action: str, found: Findings
    ) -> None:
        """A node's outcome: kept as this run left it, into ``found`` with its notes (those of a
        node written anew; the standing ones always)."""
        result = NodeResult(
            node.path,
            node.kind,
            action,
            node.folded,
            node.origin == "implicit",
            document,
            v3_only=node.origin == "v3",
        )
        self.current[node.path] = encoded(document) if action != "kept" else node.existing or b""
        found.report.converted.append(result)
        for note in node.standing:
            found.note(node.path, note)
        if action != "kept":  # a rerun that writes nothing has nothing to tell again
            for note in node.notes:
                found.note(node.path, note)
            if node.readers is not None:
                found.report.readers.append((node.path or ".", node.readers))

    def arrays(self, packs: list[Pack]) -> tuple[set[str], Findings]:
        """Each array's ``zarr.json`` replaced by its sharded document; the paths switched (the
        others fail)."""
        found = Findings()
        failed = self.store.files.replace(
            Replacement(
                pack.array.at.file("zarr.json"),
                encoded(pack.sharded),
                self.current[pack.array.path],
            )
            for pack in packs
        )
        switched = set()
        for pack in packs:
            path = pack.array.path
            problem = failed.get(pack.array.at.file("zarr.json"))
            if problem is not None:
                found.fail(path, reason(problem))
                continue
            switched.add(path)
            found.report.sharded.append(path)
            self.current[path] = encoded(pack.sharded)
            if path in self.index.nodes:
                self.index.nodes[path] = self.index.nodes[path]._replace(document=pack.sharded)
            self.stale |= {group for group in parents(path) if self._consolidates(group)}
        return switched, found

    def consolidations(self) -> Findings:
        """The consolidated metadata of every group above an array switched since the last call
        brought up to date, the deepest first (a group's consolidated metadata holds those below
        it)."""
        found = Findings()
        # by the path of its zarr.json: the group, its new bytes
        written: dict[str, tuple[str, bytes]] = {}
        for group in sorted(self.stale, key=lambda path: -path.count("/")):
            node = self.index.nodes[group]
            try:
                data = encoded(consolidated(self.index, node))
            except NotConsolidated as exc:
                exc.failed_into(found, group)
                continue
            except Exception as exc:
                found.fail(group, reason(exc))
                continue
            if data != self.current[group]:
                written[node.at.file("zarr.json")] = (group, data)
        self.stale.clear()
        failed = self.store.files.replace(
            Replacement(target, data, self.current[group])
            for target, (group, data) in written.items()
        )
        for target, (group, data) in written.items():
            if target in failed:
                found.fail(group, reason(failed[target]))
            else:
                self.current[group] = data
        return found

    def _consolidates(self, group: str) -> bool:
        node = self.index.nodes.get(group)
        return node is not None and node.consolidates and group in self.current
