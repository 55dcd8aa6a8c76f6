"""``zarr.json`` documents as the run compares and writes them: pure functions of documents and
bytes."""

from __future__ import annotations

import json
import re
from typing import Any

from ...problems import reason
from .arrays import UnconvertibleError

__all__ = [
    "differences",
    "encoded",
    "existing_document",
    "holds_consolidation",
    "same_document",
    "update",
]

IMPLICIT_GROUP: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": {}}
"""The document of a folder that leads to nodes without being a group in v2 (zarr 2 reads through
it)."""


def existing_document(existing: bytes | None) -> dict[str, Any] | None:
    """A ``zarr.json`` as read, parsed; None where there is none or it is not a JSON object."""
    try:
        document = json.loads(existing.decode("utf-8-sig")) if existing is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def holds_consolidation(existing: bytes | None) -> bool:
    """Whether a zarr.json (as read) holds consolidated metadata."""
    if existing is None or b"consolidated_metadata" not in existing:
        return False
    document = existing_document(existing)
    return document is not None and isinstance(document.get("consolidated_metadata"), dict)


def same_document(existing: Any, wanted: dict[str, Any]) -> bool:
    """Whether two zarr.json documents say the same (zarr 3.1.3 writes an absent consolidation as
    null)."""

    def without_null_consolidation(document: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v for k, v in document.items() if not (k == "consolidated_metadata" and v is None)
        }

    return isinstance(existing, dict) and without_null_consolidation(
        existing
    ) == without_null_consolidation(wanted)


def differences(existing: bytes | None, document: dict[str, Any], consolidates: bool) -> str | None:
    """What differs between a ``zarr.json`` as read (a JSON object) and ``document``: the top-level
    keys, shapes shown; None where they say the same (but for the consolidation, where
    ``consolidates``), or it is no object.

    >>> differences(b'{"zarr_format": 3, "node_type": "array", "shape": [6]}',
    ...             {"zarr_format": 3, "node_type": "array", "shape": [3]}, False)
    'shape [6] in zarr.json, [3] in v2'
    """
    found = existing_document(existing)
    if found is None:
        return None
    wanted = json.loads(encoded(document))
    if consolidates:
        found, wanted = (
            {**found, "consolidated_metadata": None},
            {**wanted, "consolidated_metadata": None},
        )
    if same_document(found, wanted):
        return None
    if found.get("node_type") != wanted.get("node_type"):
        return f"a {found.get('node_type')} in zarr.json, a {wanted.get('node_type')} in v2"
    keys = [key for key in {**wanted, **found} if found.get(key) != wanted.get(key)]
    shown = [
        f"shape {found.get('shape')} in zarr.json, {wanted.get('shape')} in v2"
        if key == "shape"
        else key
        for key in keys
    ]
    return ", ".join(shown)


def update(
    existing: bytes, document: dict[str, Any], consolidates: bool, replaces: bool
) -> bytes | None:
    """None where an existing ``zarr.json`` says ``document`` already; else what replaces it, where
    only a consolidated group's consolidation differs or the node is to be brought up to date
    (``replaces``).

    Raises
    ------
    UnconvertibleError
        Where it says something else, or is not a JSON object: it is not overwritten.
    """
    try:
        found = json.loads(existing.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UnconvertibleError(
            f"zarr.json exists already and is not JSON ({reason(exc)}): not overwritten"
        ) from None
    if not isinstance(found, dict):
        raise UnconvertibleError(
            "zarr.json exists already and is not a JSON object: not overwritten"
        )
    wanted = json.loads(encoded(document))
    if same_document(found, wanted):
        return None
    if not replaces and differences(existing, wanted, consolidates) is not None:
        raise UnconvertibleError(
            "zarr.json exists already and says something else than its v2 metadata"
        )
    return encoded(document)


def encoded(document: dict[str, Any]) -> bytes:
    """A document as zarr-python writes it (indented), every node's attributes encoded compactly:
    attributes of tens of megabytes take as long as ``json.dumps`` in C, not seconds in Python's
    indenting encoder."""
    attributes: list[str] = []

    def marked(node: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(node.get("attributes"), dict) or not node["attributes"]:
            return node
        attributes.append(json.dumps(node["attributes"], allow_nan=True, separators=(", ", ": ")))
        return {**node, "attributes": f"\0attributes {len(attributes) - 1}"}

    skeleton = marked(document)
    consolidated = document.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        metadata = {
            path: marked(n) if isinstance(n, dict) else n
            for path, n in consolidated["metadata"].items()
        }
        skeleton = {**skeleton, "consolidated_metadata": {**consolidated, "metadata": metadata}}
    text = json.dumps(skeleton, indent=2, allow_nan=True)
    return _MARK.sub(lambda mark: attributes[int(mark.group(1))], text).encode("utf-8")


_MARK = re.compile(r'"\\u0000attributes (\d+)"')


def parents(path: str) -> list[str]:
    """The folders above a node, nearest first, up to the store's root ``""``.

    >>> parents("a/b/c")
    ['a/b', 'a', '']
    """
    found = []
    while path:
        path = path.rpartition("/")[0]
        found.append(path)
    return found


def depth(path: str) -> int:
    """A node's depth: 0 for the root, 1 for its members, ..."""
    return path.count("/") + 1 if path else 0
