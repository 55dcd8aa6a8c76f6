"""Groups: which get a ``zarr.json`` and when (deepest first, each once every node below it
converted), and their consolidated metadata, made by zarr-python from every node below."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from ...store.layout import Location
from .._zarr_api import zarr_api
from ..findings import Findings
from ..nodes import Kept, NodeIndex
from ..rules.arrays import UnconvertibleError
from ..rules.documents import IMPLICIT_GROUP, depth, encoded, parents

__all__ = ["NotConsolidated", "consolidated", "groups_by_depth"]


def groups_by_depth(index: NodeIndex, at: Callable[[str], Location]) -> list[list[Kept]]:
    """The groups to write, deepest first, a list per depth; folders without v2 metadata that lead
    to nodes (``at``: where a path lies) become groups (zarr 2 reads through them)."""
    for path in [*index.nodes, *index.failed]:
        for parent in parents(path):
            if parent in index.nodes or parent in index.arrays or parent in index.failed:
                break
            index.nodes[parent] = Kept(at(parent), "group", IMPLICIT_GROUP, "implicit")
    groups = [node for node in index.nodes.values() if node.kind == "group"]
    return [
        [node for node in groups if depth(node.path) == level]
        for level in sorted({depth(node.path) for node in groups}, reverse=True)
    ]


class NotConsolidated(UnconvertibleError):
    """A group not consolidated: zarr-python cannot read the ``zarr.json`` of nodes below it
    (``unreadable``: why, by path), each a failure of its own."""

    def __init__(self, message: str, unreadable: dict[str, str]) -> None:
        super().__init__(message)
        self.unreadable = unreadable

    def failed_into(self, found: Findings, group: str) -> None:
        """Each node zarr-python cannot read, and the group, failed into ``found``."""
        for path, why in self.unreadable.items():
            found.fail(path, why)
        found.fail(group, str(self))


def consolidated(index: NodeIndex, group: Kept) -> dict[str, Any]:
    """The group's document with every node below it consolidated, as zarr-python writes it.

    Each node's document is parsed by zarr-python on the way: where one is not read, the group is
    not written: `NotConsolidated`, each such node with its reason.
    """
    zarr = zarr_api()
    prefix = f"{group.path}/" if group.path else ""
    below = {
        path[len(prefix) :]: node
        for path, node in index.nodes.items()
        if path.startswith(prefix) and path
    }
    documents = {"": group.document, **{path: node.document for path, node in below.items()}}
    buffer = zarr.prototype.buffer
    keys = {
        f"{path}/zarr.json".lstrip("/"): buffer.from_bytes(encoded(doc))
        for path, doc in documents.items()
    }
    with warnings.catch_warnings():
        # "consolidated metadata is not part of the v3 spec": asked for here
        warnings.simplefilter("ignore")
        try:
            # a MemoryStore works on the dict given
            zarr.consolidate(zarr.memory_store(keys), zarr_format=3)
        except Exception:
            unreadable = {
                f"{prefix}{path}".rstrip("/"): f"zarr-python {zarr.version} cannot read its "
                f"zarr.json ({why}): it cannot be consolidated"
                for path, doc in documents.items()
                if (why := _unreadable_by_zarr(doc))
            }
            raise NotConsolidated(
                f"not consolidated: zarr-python {zarr.version} cannot read the zarr.json of "
                f"{len(unreadable) or 'some'} node(s) below it",
                unreadable,
            ) from None
    document: dict[str, Any] = json.loads(keys["zarr.json"].to_bytes())
    return {**group.document, "consolidated_metadata": document.get("consolidated_metadata")}


def _unreadable_by_zarr(document: dict[str, Any]) -> str | None:
    """Why zarr-python cannot read a node's document (None where it can)."""
    zarr = zarr_api()
    parse = (
        zarr.array_v3.from_dict if document.get("node_type") == "array" else zarr.group.from_dict
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse(dict(document))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
