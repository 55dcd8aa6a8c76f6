"""What consolidated metadata lists: the rules that read a ``.zmetadata`` (or a v3 group's
consolidated metadata) and a node's entries in those above it. Pure: documents in, entries and notes
out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .arrays import UnconvertibleError
from .documents import depth

__all__ = ["Consolidation", "attributes_listed", "differs_from_listing", "listing_of", "v3_listing"]


class Consolidation(NamedTuple):
    """The nodes one consolidated metadata lists: each one's v2 or v3 metadata there, by path below
    the group."""

    zarr_format: int
    # v2: {".zarray"/".zgroup"/".zattrs": document}; v3: {"zarr.json": ...}
    entries: dict[str, dict[str, Any]]


Listings = Mapping[str, Consolidation]
"""What each consolidated group lists, by the group's path."""


def listing_of(zmetadata: Any) -> Consolidation:
    """What a ``.zmetadata`` lists: the nodes (a ``.zarray`` or a ``.zgroup``: attributes alone make
    none, as zarr 2 reads it), each with its entries.

    Raises
    ------
    rules.UnconvertibleError
        Where it is not Zarr v2 consolidated metadata.
    """
    metadata = zmetadata.get("metadata") if isinstance(zmetadata, dict) else None
    if not isinstance(metadata, dict):
        raise UnconvertibleError(
            ".zmetadata is not Zarr v2 consolidated metadata (no 'metadata' object)"
        )
    entries: dict[str, dict[str, Any]] = {}
    for key, document in metadata.items():
        node, _, name = key.rpartition("/") if "/" in key else ("", "", key)
        if name in (".zarray", ".zgroup", ".zattrs"):
            entries.setdefault(node, {})[name] = document
    return Consolidation(
        2, {node: e for node, e in entries.items() if {".zarray", ".zgroup"} & set(e)}
    )


def v3_listing(consolidated: dict[str, Any]) -> Consolidation:
    """What a v3 group's consolidated metadata lists."""
    metadata = consolidated.get("metadata")
    entries = {
        path: {"zarr.json": document}
        for path, document in (metadata or {}).items()
        if isinstance(path, str)
    }
    return Consolidation(3, entries)


def _v2_entries(listings: Listings, path: str) -> list[tuple[str, dict[str, Any]]]:
    """A node's entries in the ``.zmetadata`` files above it, the root's first: (the group, its
    entry)."""
    found = []
    for group, listed in sorted(listings.items(), key=lambda item: depth(item[0])):
        if listed.zarr_format == 2 and (
            group == "" or path == group or path.startswith(f"{group}/")
        ):
            entry = listed.entries.get(path[len(group) :].lstrip("/"))
            if entry is not None:
                found.append((group, entry))
    return found


def attributes_listed(listings: Listings, path: str) -> tuple[dict[str, Any], str | None]:
    """The attributes of a node without ``.zattrs``: those of its entry in a ``.zmetadata`` above it
    (the root's first), with a note, where one has them; v2 readers that open the store through it
    (xarray, open_consolidated) see them, and they must outlive the ``.zmetadata``."""
    for group, entry in _v2_entries(listings, path):
        attributes = entry.get(".zattrs")
        if isinstance(attributes, dict) and attributes:
            where = f"{group}/.zmetadata".lstrip("/")
            return attributes, (
                f"it has no .zattrs: its attributes are those of its entry in {where}, where v2 "
                "readers that open the store through it find them"
            )
    return {}, None


def differs_from_listing(
    listings: Listings, path: str, zarray: Any, zattrs: dict[str, Any]
) -> str | None:
    """A note where a ``.zmetadata`` above the node lists other metadata than its own files hold
    (the walk is breadth first: a group's .zmetadata is read before the nodes below it)."""
    for _, entry in _v2_entries(listings, path):
        if entry.get(".zarray") != zarray or entry.get(".zattrs", {}) != zattrs:
            return (
                "its entry in .zmetadata differs from its own files (a consolidation older than a "
                "change): converted from its own files, as zarr opens it without the consolidation"
            )
    return None
