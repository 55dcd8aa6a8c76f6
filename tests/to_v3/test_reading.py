"""to_v3.metadata_pass.reading: a node read from its files is a value with what to tell of it; the
reader writes nothing into what the run knows (the run keeps a node's consolidated listing itself,
before the node is read)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from numcodecs_bytes.store import Folder
from numcodecs_bytes.store.layout import Location
from numcodecs_bytes.to_v3.metadata_pass.reading import NodeReader, consolidation_of
from numcodecs_bytes.to_v3.nodes import NodeIndex

ZARRAY = {
    "zarr_format": 2,
    "shape": [4],
    "chunks": [2],
    "dtype": "<i4",
    "compressor": None,
    "fill_value": 0,
    "order": "C",
    "filters": None,
}
V3_GROUP = {
    "zarr_format": 3,
    "node_type": "group",
    "attributes": {},
    "consolidated_metadata": {
        "kind": "inline",
        "must_understand": False,
        "metadata": {"a": {"zarr_format": 3, "node_type": "group", "attributes": {}}},
    },
}


def _json(document: Any) -> bytes:
    return json.dumps(document).encode()


CASES = {
    # a v2 group consolidated, with no .zattrs of its own: its attributes from its entry there
    "v2 group, consolidated": (
        {
            ".zgroup": _json({"zarr_format": 2}),
            ".zmetadata": _json(
                {
                    "zarr_consolidated_format": 1,
                    "metadata": {
                        ".zgroup": {"zarr_format": 2},
                        ".zattrs": {"title": "t"},
                        "a/.zarray": ZARRAY,
                    },
                }
            ),
        },
        2,
    ),
    "v3 group, consolidated": ({"zarr.json": _json(V3_GROUP)}, 3),
    "v2 array": ({".zarray": _json(ZARRAY), ".zattrs": _json({})}, None),
}


@pytest.mark.parametrize("kept", [True, False], ids=["listing kept", "listing not kept"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_reader_writes_nothing_into_what_the_run_knows(case: str, kept: bool) -> None:
    """Whether or not the run kept the node's listing first, the reader leaves what the run knows
    as it was; with it kept, the node is read against it."""
    pytest.importorskip("zarr", minversion="3", reason="the rules convert with zarr 3")
    files, listing_format = CASES[case]
    index = NodeIndex()
    listing = consolidation_of(files)
    assert (listing and listing.zarr_format) == listing_format
    if listing is not None and kept:
        index.listed["g"] = listing
    before = copy.deepcopy(vars(index))
    node = NodeReader(index, None).node(
        Folder("root/g", (), tuple(sorted(files))), Location("root", "g"), dict(files)
    )
    assert vars(index) == before
    assert node.at == Location("root", "g") and node.path == "g"
    if case == "v2 group, consolidated" and kept:
        assert node.document["attributes"] == {"title": "t"}
        assert any("its attributes are those of its entry in g/.zmetadata" in n for n in node.notes)
    if case == "v3 group, consolidated":
        assert node.consolidates == kept


def test_a_node_whose_zarr_json_cannot_be_read_gives_no_listing() -> None:
    with pytest.raises(PermissionError):
        consolidation_of({"zarr.json": PermissionError("denied"), ".zmetadata": b"{}"})
