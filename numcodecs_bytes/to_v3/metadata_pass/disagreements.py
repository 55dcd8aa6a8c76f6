"""A node whose ``zarr.json`` and v2 metadata disagree, settled by which was written last: a rule on
times.

Either side may be written after a conversion that kept the v2 metadata: a
v3 writer (xarray, zarr) changes ``zarr.json``, a v2 writer its
``.zarray``/``.zgroup``/``.zattrs``. Where ``zarr.json`` is the newer, it is
kept as it is (and the v2 files, a stale view, go with
``remove_v2_metadata``); where the v2 files are, ``zarr.json`` is brought up
to date from them; where their times do not tell, the node fails and both
stay as they are. Pure: the run reads the times (`files_to_time`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ...problems import reason
from ..nodes import Node
from ..rules.documents import differences, existing_document
from ..rules.ome import attributes_05, is_ome_04

__all__ = ["Settled", "disagreement", "files_to_time", "settle", "settled_by_documents"]


class Settled(NamedTuple):
    """What becomes of a node whose two sides disagree: the node to go on with (None: it fails), and
    what to tell (a note once, a standing note on every run until the user acts, or the failure)."""

    node: Node | None
    note: str | None = None
    standing: str | None = None
    failure: str | None = None


def disagreement(node: Node) -> str | None:
    """What differs between a v2 node's ``zarr.json`` (from an earlier run) and its v2 metadata
    converted now; None where they agree, or the node has no ``zarr.json``."""
    if node.existing is None or node.origin != "v2":
        return None
    what = differences(node.existing, node.document, node.consolidates)
    attributes = node.document.get("attributes") or {}
    if what is None or node.kind != "group" or not is_ome_04(attributes):
        return what
    # an OME-Zarr 0.4 group an earlier run made 0.5 (`ome`): that agrees too
    made_05 = {**node.document, "attributes": attributes_05(attributes)}
    return what if differences(node.existing, made_05, node.consolidates) else None


def settled_by_documents(node: Node) -> Settled | None:
    """A disagreement the documents settle alone, without times: an array's ``zarr.json`` that is
    its v2 metadata converted, but for the ``dimension_names`` it lacks (as ``zarr migrate v3`` and
    other converters write it), is brought up to date with them (xarray's names, or an OME-Zarr
    level's axes, which 0.5 requires); None for any other disagreement."""
    names = node.document.get("dimension_names")
    found = existing_document(node.existing)
    if node.kind != "array" or names is None or found is None:
        return None
    if found.get("dimension_names") is not None:
        return None
    without = {key: value for key, value in node.document.items() if key != "dimension_names"}
    if differences(node.existing, without, node.consolidates) is not None:
        return None
    return Settled(
        node._replace(replaces=True),
        note=(
            f"its zarr.json (written by another converter) names no dimensions: given "
            f"dimension_names {list(names)} from its v2 metadata"
        ),
    )


def files_to_time(node: Node) -> list[str]:
    """The files whose times settle a disagreement: ``zarr.json`` first, then its v2 metadata files
    (not a ``.zmetadata``, which consolidates others)."""
    return ["zarr.json", *(name for name in node.digests if name != ".zmetadata")]


def settle(node: Node, differing: str, times: Mapping[str, float | Exception]) -> Settled:
    """``node`` settled by the times (by file name, `files_to_time`) its files were written."""
    when = dict(times)
    v3, v2 = when.pop("zarr.json"), list(when.values())
    what = f"zarr.json and its {', '.join(when)} differ ({differing})"
    known = [t for t in (v3, *v2) if isinstance(t, float)]
    if len(known) == len(v2) + 1 and isinstance(v3, float) and v3 > max(known[1:]):
        document = existing_document(node.existing) or {}
        kind = "array" if document.get("node_type") == "array" else "group"
        kept = node._replace(kind=kind, document=document, v2_array=None, folded=None, readers=None)
        return Settled(
            kept,
            standing=(
                f"{what}: zarr.json was written after them (through Zarr v3, since the conversion) "
                "and is kept; v2 readers see the node as it was before (removing the v2 metadata "
                "ends that)"
            ),
        )
    if len(known) == len(v2) + 1 and isinstance(v3, float) and v3 < max(known[1:]):
        return Settled(
            node._replace(replaces=True),
            note=(
                f"{what}: they were written after zarr.json (by a v2 writer, since the "
                "conversion): zarr.json is brought up to date from them"
            ),
        )
    problem = next((t for t in (v3, *v2) if isinstance(t, Exception)), None)
    why = (
        f"their times cannot be read ({reason(problem)})" if problem else "their times do not tell"
    )
    return Settled(
        None,
        failure=(
            f"{what}, and {why} which was written last: both left as they are; see which holds the "
            "data as it is now before removing either"
        ),
    )
