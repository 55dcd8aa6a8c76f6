"""The v2 consolidated metadata (``.zmetadata``) of groups that keep their v2 metadata, once nodes
below them lost theirs: made to list only the nodes still v2."""

from __future__ import annotations

import json
from collections.abc import Collection

from ...problems import reason
from ...store import Replacement
from ..findings import Findings
from ..nodes import RunState

__all__ = ["listing_only_v2"]


def listing_only_v2(state: RunState, groups: Collection[str], removed: set[str]) -> Findings:
    """The ``.zmetadata`` of these groups (which keep their v2 metadata: a node below them does)
    made to list only the nodes that are still v2 (``removed``: the nodes whose v2 metadata went):
    an entry of a node whose v2 files are gone would read its chunks as missing, without an error,
    in v2 readers that open the store through it."""
    store = state.store
    found = Findings()
    listings = {store.at(group).file(".zmetadata"): group for group in groups}
    read = store.files.read(listings)
    replacements = []
    for path, group in listings.items():
        data = read[path]
        if isinstance(data, FileNotFoundError):
            continue
        if isinstance(data, Exception):
            found.file_stays((store.at(group) / ".zmetadata").path, reason(data))
            continue
        listed = _without(data, group, removed)
        if listed is not None:
            replacements.append(Replacement(path, listed, data))
    if state.dry_run:
        return found
    for path, problem in store.files.replace(replacements).items():
        found.file_stays(store.relative(path), reason(problem))
    return found


def _without(data: bytes, group: str, removed: set[str]) -> bytes | None:
    """A ``.zmetadata`` (as read) without the entries of the nodes in ``removed`` (by path in the
    store); None where it lists none of them, or is not consolidated metadata."""
    try:
        document = json.loads(data)
        metadata = document["metadata"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(metadata, dict):
        return None
    prefix = f"{group}/" if group else ""
    kept = {
        key: value
        for key, value in metadata.items()
        if f"{prefix}{key.rpartition('/')[0]}".rstrip("/") not in removed
    }
    if len(kept) == len(metadata):
        return None
    return json.dumps(
        {**document, "metadata": kept}, indent=4, sort_keys=True, ensure_ascii=True
    ).encode()
