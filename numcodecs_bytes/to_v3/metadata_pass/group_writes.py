"""The groups' ``zarr.json`` files, written once everything below each converted: the OME-Zarr 0.4
groups among them made 0.5 where their hierarchy holds together (and ome-zarr-models, where
installed, finds them valid), then every group, deepest first, the root last."""

from __future__ import annotations

from collections.abc import Callable

from ...store.layout import Location
from ..findings import Findings
from ..nodes import NodeIndex
from ..rules.documents import parents
from ..rules.ome import kind_of, ome_05
from ..rules.ome_validation import rejected
from .groups import NotConsolidated, consolidated, groups_by_depth
from .zarr_json import ZarrJsonWriter

__all__ = ["OME_NOT_VALIDATED", "make_ome_05", "write_groups"]


def make_ome_05(index: NodeIndex) -> tuple[dict[str, str], Findings]:
    """The OME-Zarr 0.4 groups among the nodes made 0.5 where their hierarchy holds together
    (`ome.ome_05`) and ome-zarr-models, where installed, finds them valid as they are about to be
    written (`ome_validation`: a group it rejects, and those holding or naming it, are not made
    0.5), the others noted; what each group made 0.5 is, by path, and what was found."""
    found = Findings()
    nodes = index.nodes
    documents = {path: node.document for path, node in nodes.items()}
    convertible = {path for path, node in nodes.items() if node.origin != "v3"}
    made, problems = ome_05(documents, convertible)
    while made:
        verdicts = rejected(
            {**documents, **made},
            {path: kind_of(document) or "" for path, document in made.items()},
        )
        if verdicts is None:
            found.note(".", OME_NOT_VALIDATED)
            break
        if not verdicts:
            break
        # the deepest first: a group holding one rejected is left by the rules, with their reason
        holding = {parent for path in verdicts for parent in parents(path)}
        deepest = {path: why for path, why in verdicts.items() if path not in holding}
        convertible -= set(deepest)
        made, more = ome_05(documents, convertible)
        problems |= more | {
            path: f"OME-Zarr 0.4 not made 0.5: ome-zarr-models rejects it as 0.5 ({why}); "
            "converted as plain Zarr v3, its 0.4 attributes kept as they are"
            for path, why in deepest.items()
        }
    for path, why in problems.items():
        index.tell(path, why)
    for path, document in made.items():
        nodes[path] = nodes[path]._replace(document=document)
    kinds = {path: kind_of(document) or "OME group" for path, document in sorted(made.items())}
    return kinds, found


OME_NOT_VALIDATED = (
    "OME-Zarr 0.5 not validated: ome-zarr-models is not installed (pip install ome-zarr-models, "
    "and the run checks each OME group with it before writing it)"
)


def write_groups(
    index: NodeIndex, at: Callable[[str], Location], zarr_json: ZarrJsonWriter
) -> Findings:
    """Every group's ``zarr.json``, deepest first (a batch per depth), each only once everything
    below it converted; the root last. What was found."""
    found = Findings()
    blocked = {parent for path in index.failed for parent in parents(path)}
    for groups in groups_by_depth(index, at):
        writes = []
        for node in groups:
            if node.path in blocked:
                failed = index.failed | found.failed
                below = sum(path.startswith(f"{node.path}/") or not node.path for path in failed)
                if node.origin == "v2" and node.existing is None:
                    found.fail(
                        node.path,
                        f"left as Zarr v2: {below} path(s) below it could not be converted",
                    )
                elif node.origin == "v2":
                    found.fail(
                        node.path,
                        f"its zarr.json is left as it is: {below} path(s) below "
                        "it could not be converted",
                    )
                continue
            document = node.document
            if node.consolidates:
                try:
                    document = consolidated(index, node)
                except NotConsolidated as exc:
                    exc.failed_into(found, node.path)
                    continue
            writes.append((node, document))
        written = zarr_json.documents(writes)
        found.add(written)
        blocked |= {parent for path in written.failed for parent in parents(path)}
        found.report.consolidated |= any(
            node.path == "" and node.consolidates and "" not in written.failed for node, _ in writes
        )
    return found
