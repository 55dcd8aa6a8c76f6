"""to-v3 on OME-Zarr 0.4 stores: images, labels, HCS plates and bioformats2raw collections become
OME-Zarr 0.5, metadata only or sharded, and nothing else changes.

The oracles: ome-zarr-models' 0.4 classes say the samples are valid 0.4, its
0.5 classes that the results are valid 0.5 (each in a fresh process); the
values are zarr-python's (before as v2, after as v3, in fresh interpreters);
ome-zarr-py writes 0.4 samples of its own and reads the results as 0.5 where its
Python allows (3.12 and later). The rules (`numcodecs_bytes.to_v3.rules.ome`) are
tested by examples and a property on attributes.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numcodecs_bytes.to_v3.rules.ome import OME_KEYS, attributes_05, kind_of, ome_05

SUPPORT = Path(__file__).parents[1] / "support"


# -- the rules ---------------------------------------------------------------------------------


AXES = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"}, {"name": "x"}]


def _image(**multiscale: Any) -> dict[str, Any]:
    found = {"version": "0.4", "axes": AXES, "datasets": [{"path": "0"}, {"path": "1"}]}
    return {"multiscales": [{**found, **multiscale}]}


def _level(shape: list[int], data_type: str = "uint16") -> dict[str, Any]:
    """A level array's document as converted: its dimension names its multiscale's axes, where as
    many (`ome.with_dimension_names`)."""
    names = [axis["name"] for axis in AXES] if len(shape) == len(AXES) else None
    return {"node_type": "array", "shape": shape, "data_type": data_type, "dimension_names": names}


def _group(attributes: dict[str, Any]) -> dict[str, Any]:
    return {"node_type": "group", "attributes": attributes}


def _made(documents: dict[str, dict[str, Any]]) -> tuple[set[str], dict[str, str]]:
    made, problems = ome_05(documents, set(documents))
    return set(made), problems


def test_an_image_its_labels_and_a_plate_are_made_0_5_deepest_first() -> None:
    label = {**_image(), "image-label": {"version": "0.4", "colors": []}}
    documents = {
        "": _group({"plate": {"version": "0.4", "wells": [{"path": "A/1"}]}, "mine": 1}),
        "A": _group({}),
        "A/1": _group({"well": {"version": "0.4", "images": [{"path": "0"}]}}),
        "A/1/0": _group({**_image(), "omero": {"channels": []}}),
        "A/1/0/0": _level([2, 8, 8]),
        "A/1/0/1": _level([2, 4, 4]),
        "A/1/0/labels": _group({"labels": ["cells"]}),
        "A/1/0/labels/cells": _group(label),
        "A/1/0/labels/cells/0": _level([1, 8, 8], "uint8"),
        "A/1/0/labels/cells/1": _level([1, 4, 4], "uint8"),
    }
    made, problems = ome_05(documents, set(documents))
    assert problems == {}
    assert set(made) == {"", "A/1", "A/1/0", "A/1/0/labels", "A/1/0/labels/cells"}
    root = made[""]["attributes"]
    assert root == {
        "mine": 1,
        "ome": {"version": "0.5", "plate": {"wells": [{"path": "A/1"}], "version": "0.5"}},
    }
    assert made["A/1"]["attributes"] == {
        "ome": {"version": "0.5", "well": {"images": [{"path": "0"}]}}
    }
    image = made["A/1/0"]["attributes"]["ome"]
    assert "version" not in image["multiscales"][0] and image["omero"] == {"channels": []}
    assert made["A/1/0/labels/cells"]["attributes"]["ome"]["image-label"]["version"] == "0.5"
    kinds = {path: kind_of(document) for path, document in made.items()}
    assert kinds == {
        "": "plate",
        "A/1": "well",
        "A/1/0": "image",
        "A/1/0/labels": "labels",
        "A/1/0/labels/cells": "label image",
    }


INCONSISTENT = [
    (
        "axes",
        {"0": _level([1, 2, 8, 8]), "1": _level([1, 2, 4, 4])},
        _image(),
        "has 4 dimensions where its axes are 3 (c, y, x)",
    ),
    (
        "a missing level",
        {"0": _level([2, 8, 8])},
        _image(),
        "its dataset '1' is no array of the store",
    ),
    (
        "levels of two types",
        {"0": _level([2, 8, 8]), "1": _level([2, 4, 4], "float32")},
        _image(),
        "its levels differ in data type (float32, uint16)",
    ),
    (
        "a float label image",
        {"0": _level([2, 8, 8], "float32"), "1": _level([2, 4, 4], "float32")},
        {**_image(), "image-label": {"version": "0.4"}},
        "a label image of data type float32",
    ),
    (
        "version 0.3",
        {"0": _level([2, 8, 8]), "1": _level([2, 4, 4])},
        _image(version="0.3"),
        "it declares OME-Zarr version 0.3",
    ),
    (
        "versions mixed",
        {"0": _level([2, 8, 8]), "1": _level([2, 4, 4])},
        {**_image(), "image-label": {"version": "0.5"}},
        "it declares OME-Zarr version 0.4, 0.5",
    ),
    (
        "axes without names",
        {"0": _level([2, 8, 8]), "1": _level([2, 4, 4])},
        _image(axes=["c", "y", "x"]),
        "has no axes of distinct names",
    ),
    (
        "an ome key already",
        {"0": _level([2, 8, 8]), "1": _level([2, 4, 4])},
        {**_image(), "ome": {}},
        "an 'ome' attribute already",
    ),
]


@pytest.mark.parametrize(
    ("levels", "attributes", "reason"),
    [case[1:] for case in INCONSISTENT],
    ids=[case[0] for case in INCONSISTENT],
)
def test_an_inconsistent_image_stays_plain_zarr_v3_with_the_reason(
    levels: dict[str, dict[str, Any]], attributes: dict[str, Any], reason: str
) -> None:
    documents = {"": _group(attributes), **levels}
    made, problems = _made(documents)
    assert made == set()
    assert reason in problems[""] and "converted as plain Zarr v3" in problems[""], problems


def test_a_group_naming_one_that_stays_plain_stays_plain_too() -> None:
    """A plate whose one field is inconsistent: the field, its well and the plate stay plain; the
    other well and its field are made 0.5."""
    documents = {
        "": _group({"plate": {"version": "0.4", "wells": [{"path": "A/1"}, {"path": "A/2"}]}}),
        "A/1": _group({"well": {"version": "0.4", "images": [{"path": "0"}]}}),
        "A/2": _group({"well": {"version": "0.4", "images": [{"path": "0"}]}}),
        "A/1/0": _group(_image()),
        "A/1/0/0": _level([2, 8, 8]),
        "A/1/0/1": _level([2, 4, 4]),
        "A/2/0": _group(_image()),
        "A/2/0/0": _level([2, 8, 8]),  # its level 1 missing
    }
    made, problems = _made(documents)
    assert made == {"A/1", "A/1/0"}
    assert "its well 'A/2' is not made OME-Zarr 0.5 (see there)" in problems[""]
    assert "its field 'A/2/0' is not made" in problems["A/2"]
    assert "its dataset '1' is no array" in problems["A/2/0"]


def test_groups_not_convertible_are_left_and_a_0_5_group_counts_as_made() -> None:
    """A group whose v2 files a run removed is not rewritten; one that is 0.5 already satisfies the
    groups that name it."""
    documents = {
        "": _group({"labels": ["cells"]}),
        "cells": {
            "node_type": "group",
            "attributes": {"ome": {"version": "0.5", "multiscales": []}},
        },
    }
    made, problems = ome_05(documents, {""})
    assert set(made) == {""} and problems == {}
    assert ome_05(documents, set())[0] == {}


NOT_OME = st.text(min_size=1, max_size=8).filter(lambda key: key not in (*OME_KEYS, "ome"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.dictionaries(NOT_OME, JSON, max_size=4),
    st.lists(
        st.dictionaries(st.sampled_from(["name", "axes", "datasets", "version", "type"]), JSON),
        min_size=1,
        max_size=2,
    ),
    st.dictionaries(st.sampled_from(["images", "version"]), JSON),
    st.dictionaries(st.sampled_from(["wells", "version", "name"]), JSON),
    st.sets(st.sampled_from(["multiscales", "well", "plate", "omero", "labels"]), min_size=1),
)
def test_the_0_5_attributes_hold_every_key_once_and_versions_only_where_0_5_has_them(
    rest: dict[str, Any],
    multiscales: list[dict[str, Any]],
    well: dict[str, Any],
    plate: dict[str, Any],
    present: set[str],
) -> None:
    values = {
        "multiscales": multiscales,
        "well": well,
        "plate": plate,
        "omero": {"id": 1},
        "labels": ["a"],
    }
    attributes = {**rest, **{key: values[key] for key in present}}
    made = attributes_05(attributes)
    assert {key: value for key, value in made.items() if key != "ome"} == rest
    ome = made["ome"]
    assert ome["version"] == "0.5" and set(ome) == {"version", *present}
    for key in present - {"multiscales", "well", "plate"}:
        assert ome[key] == attributes[key]
    if "multiscales" in present:
        assert ome["multiscales"] == [
            {k: v for k, v in m.items() if k != "version"} for m in multiscales
        ]
    if "well" in present:
        assert ome["well"] == {k: v for k, v in well.items() if k != "version"}
    if "plate" in present:
        assert ome["plate"] == {**plate, "version": "0.5"}
    assert attributes == {**rest, **{key: values[key] for key in present}}  # the input untouched


# -- stores --------------------------------------------------------------------------------------

zarr: Any = pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
from support.ome_samples import GROUPS, METADATA_XML, STORES, mixed_store  # noqa: E402
from support.zarr_read import read_in_a_fresh_process as zarr_reads  # noqa: E402

from numcodecs_bytes.cli import main  # noqa: E402


def ome_verdicts(store: Path, version: str, groups: dict[str, str]) -> dict[str, str]:
    """ome-zarr-models' verdict on each group, in a fresh process (`support.fresh`); skipped where
    it is not installed (the interop extra has it)."""
    pytest.importorskip(
        "ome_zarr_models", reason="ome-zarr-models is the OME oracle (interop extra)"
    )
    from support.fresh import in_a_fresh_process
    from support.ome_check import verdicts

    return in_a_fresh_process(verdicts, str(store), version, groups)


def all_valid(verdicts: dict[str, str]) -> bool:
    return bool(verdicts) and set(verdicts.values()) == {"valid"}


def document(store: Path, path: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((store / path / "zarr.json").read_text())
    return found


def level_arrays(store: Path, groups: dict[str, str]) -> dict[str, list[str]]:
    """Each level array of the store's OME images: the axes names of its multiscale."""
    names = {}
    for path, kind in groups.items():
        if kind in ("image", "label image"):
            attributes = json.loads((store / path / ".zattrs").read_text())
            (multiscale,) = attributes["multiscales"]
            axes = [axis["name"] for axis in multiscale["axes"]]
            for dataset in multiscale["datasets"]:
                names[f"{path}/{dataset['path']}".lstrip("/")] = axes
    return names


def files_of(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("sample", sorted(STORES))
def test_the_samples_are_valid_ome_zarr_0_4(tmp_path: Path, sample: str) -> None:
    store = STORES[sample](tmp_path / "s.zarr")
    verdicts = ome_verdicts(store, "0.4", GROUPS[sample])
    assert all_valid(verdicts), verdicts


MODES = {
    "metadata only": [],
    "metadata, v2 removed": ["--remove-v2-metadata"],
    "sharded": ["--shard-size", "4KiB"],
    "sharded, v2 removed": ["--shard-size", "4KiB", "--remove-v2-metadata"],
}


CASES = [
    *(("image", mode) for mode in MODES),
    *(
        (sample, mode)
        for sample in ("plate", "collection")
        for mode in ("metadata only", "sharded, v2 removed")
    ),
]
"""Every mode on an image with labels; the plate and the collection metadata only and sharded with
their v2 files removed (the other modes differ from these in nothing OME)."""


@pytest.mark.parametrize(("sample", "mode"), CASES)
def test_ome_zarr_0_4_becomes_valid_0_5_with_every_value_and_file_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sample: str, mode: str
) -> None:
    store = STORES[sample](tmp_path / "s.zarr")
    groups = GROUPS[sample]
    levels = level_arrays(store, groups)
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store), *MODES[mode]]) == 0
    out, err = capsys.readouterr()
    counted = {
        kind: list(groups.values()).count(kind)
        for kind in ("image", "label image", "plate", "collection")
    }
    for kind, number in counted.items():
        if number:
            assert f"{number} {kind}{'s' if number > 1 else ''}" in out, out
    assert "OME-Zarr 0.4 made 0.5" in out and "not made 0.5" not in err, (out, err)
    assert zarr_reads(store, 3) == before
    for path, kind in groups.items():
        found = document(store, path)
        assert kind_of(found) == kind, (path, found["attributes"])
        assert not set(found["attributes"]) & set(OME_KEYS), path
    for path, names in levels.items():
        array = document(store, path)
        assert array["dimension_names"] == names, path
        sharded = array["codecs"][0]["name"] == "sharding_indexed"
        assert sharded == ("--shard-size" in MODES[mode]), path
        encoding = array["chunk_key_encoding"]["name"]
        assert encoding == ("default" if sharded else "v2"), path
    if sample == "collection":
        assert (store / "OME" / "METADATA.ome.xml").read_bytes() == METADATA_XML
    verdicts = ome_verdicts(store, "0.5", groups)
    assert all_valid(verdicts), verdicts
    # a rerun: nothing to do, nothing to tell
    assert main(["to-v3", str(store), *MODES[mode]]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("nothing to do") and "differ" not in err and "OME" not in err, (out, err)


def test_a_mixed_store_converts_its_plain_and_xarray_arrays_as_ever(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = mixed_store(tmp_path / "s.zarr")
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store)]) == 0
    out = capsys.readouterr().out
    assert "OME-Zarr 0.4 made 0.5: 1 image, 1 label image" in out, out
    assert zarr_reads(store, 3) == before
    assert document(store, "")["attributes"] == {"description": "not OME"}
    assert (
        document(store, "plain")["attributes"] == {}
        and document(store, "plain").get("dimension_names") is None
    )
    assert document(store, "table")["dimension_names"] == ["row", "column"]
    assert kind_of(document(store, "image")) == "image"
    verdicts = ome_verdicts(store, "0.5", {"image": "image", "image/labels/cells": "label image"})
    assert all_valid(verdicts), verdicts


def test_an_inconsistent_image_in_a_store_is_noted_and_converted_plain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plate whose one field's axes do not match its levels: that field, its well and the plate
    stay plain Zarr v3 (their 0.4 attributes as they are), with the reason; the other well and its
    field are 0.5; every value reads as before."""
    store = STORES["plate"](tmp_path / "s.zarr")
    field = zarr.open_group(str(store / "A/2/0"), mode="r+", zarr_format=2)
    attributes = field.attrs.asdict()
    attributes["multiscales"][0]["axes"] = attributes["multiscales"][0]["axes"][1:]
    field.attrs.put(attributes)
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store), "--shard-size", "4KiB", "-v"]) == 0
    err = capsys.readouterr().err
    assert zarr_reads(store, 3) == before
    reason = "its dataset '0' has 4 dimensions where its axes are 3 (z, y, x)"
    assert f"A/2/0: OME-Zarr 0.4 not made 0.5: {reason}" in err, err
    assert "A/2: OME-Zarr 0.4 not made 0.5: its field 'A/2/0' is not made OME-Zarr 0.5" in err
    for path in ("", "A/2", "A/2/0"):
        assert kind_of(document(store, path)) is None and document(store, path)[
            "attributes"
        ] == json.loads((store / path / ".zattrs").read_text())
    assert (
        kind_of(document(store, "A/1")) == "well" and kind_of(document(store, "A/1/0")) == "image"
    )
    verdicts = ome_verdicts(
        store, "0.5", {"A/1": "well", "A/1/0": "image", "A/1/0/labels/cells": "label image"}
    )
    assert all_valid(verdicts), verdicts


def migrated_by_zarr(array: Path) -> None:
    """A zarr.json beside an array's v2 metadata as ``zarr migrate v3`` writes it (no dimension
    names)."""
    from zarr.metadata.migrate_v3 import migrate_to_v3
    from zarr.storage import LocalStore, StorePath

    migrate_to_v3(
        zarr.open_array(str(array), mode="r", zarr_format=2), StorePath(LocalStore(array))
    )
    assert document(array, "").get("dimension_names") is None


def test_a_level_another_converter_wrote_without_dimension_names_gets_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Level 0 of the image has a zarr.json from ``zarr migrate v3`` (its v2 metadata converted, no
    dimension_names, which 0.5 requires; issue 68 found the image called 0.5 and invalid): it is
    brought up to date with its axes, and the image is valid 0.5."""
    store = STORES["image"](tmp_path / "s.zarr")
    migrated_by_zarr(store / "0")
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr 0.4 made 0.5: 1 image, 1 label image" in out, out
    assert "0: its zarr.json (written by another converter) names no dimensions" in err, err
    assert document(store, "0")["dimension_names"] == ["c", "z", "y", "x"]
    assert zarr_reads(store, 3) == before
    verdicts = ome_verdicts(store, "0.5", GROUPS["image"])
    assert all_valid(verdicts), verdicts


def test_a_level_whose_zarr_json_says_more_than_its_v2_metadata_keeps_the_image_0_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Level 0's zarr.json, written through Zarr v3 after its v2 metadata, with no dimension names:
    it is kept (the newer side), so the image cannot be 0.5 and stays plain Zarr v3 with the
    reason; its labels, which do not hold it, are 0.5."""
    store = STORES["image"](tmp_path / "s.zarr")
    migrated_by_zarr(store / "0")
    level = zarr.open_array(str(store / "0"), mode="r+", zarr_format=3)
    level.attrs["written"] = "through Zarr v3"
    assert main(["to-v3", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr 0.4 made 0.5: 1 label image" in out and "1 image" not in out, out
    assert ": OME-Zarr 0.4 not made 0.5: its dataset '0' names its dimensions None" in err, err
    assert kind_of(document(store, "")) is None
    verdicts = ome_verdicts(store, "0.5", {"labels/cells": "label image", "labels": "labels"})
    assert all_valid(verdicts), verdicts


@pytest.mark.parametrize("label", ["float32 labels", "a label image of version 0.3"])
def test_an_image_whose_labels_cannot_be_0_5_stays_0_4_as_plain_zarr_v3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    """An image whose label image cannot be made 0.5 (issue 68 found the image made 0.5 around a
    labels group left 0.4, and counted): the label image, its labels group and the image all stay
    plain Zarr v3 with their 0.4 attributes, each with the reason; nothing is counted 0.5."""
    store = tmp_path / "s.zarr"
    root = zarr.open_group(str(store), mode="w", zarr_format=2)
    from support.ome_samples import image_with_labels

    image_with_labels(root)
    cells = zarr.open_group(str(store / "labels/cells"), mode="r+", zarr_format=2)
    attributes = cells.attrs.asdict()
    if label == "float32 labels":
        for level in ("0", "1", "2"):
            values = zarr.open_array(str(store / "labels/cells" / level), mode="r")[...]
            del cells[level]
            cells.create_array(level, data=values.astype("float32"), chunks=values.shape)
    else:
        attributes["multiscales"][0]["version"] = "0.3"
        attributes["image-label"]["version"] = "0.3"
    cells.attrs.put(attributes)
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr" not in out, out
    assert ": OME-Zarr 0.4 not made 0.5: the OME group 'labels' it holds is not made" in err, err
    for path in ("", "labels", "labels/cells"):
        assert kind_of(document(store, path)) is None, path
        assert document(store, path)["attributes"] == json.loads(
            (store / path / ".zattrs").read_text()
        )
    assert zarr_reads(store, 3) == before


def test_an_image_ome_zarr_models_rejects_is_not_made_0_5_and_its_reason_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An image whose datasets have no coordinateTransformations (a MUST of 0.4 and 0.5 that the
    conversion's rules do not look at): ome-zarr-models rejects it as 0.5 before it is written, so
    it stays plain Zarr v3 with the validator's reason (issue 68 found it written and counted as
    0.5); its labels, valid, are made 0.5."""
    pytest.importorskip("ome_zarr_models", reason="the validator (interop extra)")
    store = STORES["image"](tmp_path / "s.zarr")
    image = zarr.open_group(str(store), mode="r+", zarr_format=2)
    attributes = image.attrs.asdict()
    for dataset in attributes["multiscales"][0]["datasets"]:
        dataset.pop("coordinateTransformations", None)
    image.attrs.put(attributes)
    assert main(["to-v3", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr 0.4 made 0.5: 1 label image" in out and "1 image" not in out, out
    assert "note .: OME-Zarr 0.4 not made 0.5: ome-zarr-models rejects it as 0.5 (" in err, err
    assert "coordinateTransformations" in err, err
    assert kind_of(document(store, "")) is None
    verdicts = ome_verdicts(store, "0.5", {"labels": "labels", "labels/cells": "label image"})
    assert all_valid(verdicts), verdicts


def test_in_a_plate_the_deepest_group_ome_zarr_models_rejects_is_named_and_the_rest_converts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plate whose one label image ome-zarr-models rejects (a color without ``rgba``, which it
    requires): that label image is named with the validator's reason; its labels group, its
    image, its well and the plate stay plain by the rules; the other well, image and label image
    are made 0.5 and validate (the plate, checked first, fails; then each group below it)."""
    pytest.importorskip("ome_zarr_models", reason="the validator (interop extra)")
    store = STORES["plate"](tmp_path / "s.zarr")
    cells = store / "A/2/0/labels/cells/.zattrs"
    attributes = json.loads(cells.read_text())
    attributes["image-label"]["colors"] = [{"label-value": 1}]
    cells.write_text(json.dumps(attributes))
    assert main(["to-v3", str(store), "-v"]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr 0.4 made 0.5: 1 image, 1 label image" in out, out
    assert "A/2/0/labels/cells: OME-Zarr 0.4 not made 0.5: ome-zarr-models rejects it" in err, err
    assert "rgba" in err
    for path in ("", "A/2", "A/2/0", "A/2/0/labels", "A/2/0/labels/cells"):
        assert kind_of(document(store, path)) is None, path
    verdicts = ome_verdicts(
        store, "0.5", {"A/1": "well", "A/1/0": "image", "A/1/0/labels/cells": "label image"}
    )
    assert all_valid(verdicts), verdicts


def test_without_ome_zarr_models_the_run_says_once_that_it_did_not_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ome-zarr-models cannot be imported, the groups the rules pass are made 0.5 and the
    run says, once, that they were not validated and how to have them validated."""
    for name in [name for name in sys.modules if name.startswith("ome_zarr_models")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ome_zarr_models", None)  # as where it is not installed
    store = STORES["image"](tmp_path / "s.zarr")
    assert main(["to-v3", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "OME-Zarr 0.4 made 0.5: 1 image, 1 label image" in out, out
    assert err.count("OME-Zarr 0.5 not validated: ome-zarr-models is not installed") == 1, err


def test_a_dry_run_lists_the_ome_groups_and_changes_no_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = STORES["plate"](tmp_path / "s.zarr")
    files = files_of(store)
    assert (
        main(
            ["to-v3", str(store), "--dry-run", "-v", "--shard-size", "4KiB", "--remove-v2-metadata"]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert files_of(store) == files
    assert "would write zarr.json (group, OME-Zarr 0.5 plate)" in err + out
    assert "would write A/1/0/labels/cells/zarr.json (group, OME-Zarr 0.5 label image)" in err + out
    assert "OME-Zarr 0.4 to make 0.5: 2 images, 2 label images, 1 plate" in out, out


def test_a_run_killed_mid_way_then_rerun_leaves_valid_0_5(tmp_path: Path) -> None:
    """SIGKILL once the first level arrays have their zarr.json and before the root has its own:
    the rerun finishes, and the plate is valid 0.5 with every value as before."""
    from support.slowed_tool import slowed_tool

    store = STORES["plate"](tmp_path / "s.zarr")
    before = zarr_reads(store, 2)
    code = slowed_tool(0.02, "link", "replace", "rename")
    command = [sys.executable, "-c", code, "to-v3", str(store), "--remove-v2-metadata"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any(store.rglob("*/zarr.json")):
        assert process.poll() is None and time.monotonic() < deadline, "finished before the kill"
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (store / "zarr.json").exists()
    assert zarr_reads(store, 2) == before  # v2 readers lose nothing
    assert main(["to-v3", str(store), "--remove-v2-metadata"]) == 0
    assert zarr_reads(store, 3) == before
    verdicts = ome_verdicts(store, "0.5", GROUPS["plate"])
    assert all_valid(verdicts), verdicts


# -- ome-zarr-py's own stores (Python 3.12 and later) ----------------------------------------------


def _ome_zarr_py() -> Any:
    return pytest.importorskip("ome_zarr", reason="ome-zarr-py needs Python 3.12 (interop extra)")


def test_ome_zarr_py_0_4_image_and_plate_become_0_5_that_it_reads_as_0_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ome-zarr-py's 0.4 writer's image (a pyramid, labels) and plate, sharded with the v2 files
    removed: ome-zarr-models calls them valid 0.5; ome-zarr-py's reader calls them 0.5 and reads
    every level's values as they were (each in a fresh interpreter). An image its 0.5 writer made:
    nothing to do."""
    _ome_zarr_py()
    command = [sys.executable, str(SUPPORT / "ome_zarr_py.py")]
    written = subprocess.run(
        [*command, "write", str(tmp_path)], capture_output=True, text=True, check=False, timeout=300
    )
    assert written.returncode == 0, written.stderr
    groups = json.loads(written.stdout)
    for name in ("image.zarr", "plate.zarr"):
        store = tmp_path / name
        read_04 = subprocess.run(
            [*command, "read", str(store)], capture_output=True, text=True, check=False, timeout=300
        )
        assert read_04.returncode == 0, read_04.stderr
        assert main(["to-v3", str(store), "--shard-size", "64KiB", "--remove-v2-metadata"]) == 0
        assert "OME-Zarr 0.4 made 0.5" in capsys.readouterr().out
        assert not list(store.rglob(".z*"))
        read_05 = subprocess.run(
            [*command, "read", str(store)], capture_output=True, text=True, check=False, timeout=300
        )
        assert read_05.returncode == 0, read_05.stderr
        was, now = json.loads(read_04.stdout), json.loads(read_05.stdout)
        assert {node["version"] for node in was} == {"0.4"} and {
            node["version"] for node in now
        } == {"0.5"}
        assert [node["levels"] for node in now] == [node["levels"] for node in was]
        verdicts = ome_verdicts(store, "0.5", groups[name])
        assert all_valid(verdicts), verdicts
    # a store ome-zarr-py wrote as 0.5: nothing to do, no byte changed
    store = tmp_path / "image05.zarr"
    files = files_of(store)
    assert main(["to-v3", str(store), "--shard-size", "64KiB", "--remove-v2-metadata"]) == 0
    assert capsys.readouterr().out.startswith("nothing to do")
    assert files_of(store) == files


def test_tensorstore_reads_a_converted_sharded_level_as_zarr_did(tmp_path: Path) -> None:
    tensorstore = pytest.importorskip("tensorstore", reason="an independent reader (interop extra)")
    store = STORES["image"](tmp_path / "s.zarr")
    expected = {
        path: zarr.open_array(str(store / path), mode="r", zarr_format=2)[...]
        for path in ("0", "labels/cells/1")
    }
    assert main(["to-v3", str(store), "--shard-size", "4KiB", "--remove-v2-metadata"]) == 0
    for path, values in expected.items():
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store / path)}}
        read = tensorstore.open(spec, read=True).result().read().result()
        assert hashlib.sha256(read.tobytes()).digest() == hashlib.sha256(values.tobytes()).digest()


def test_a_consolidated_plate_is_consolidated_as_0_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plate with a consolidated .zmetadata, sharded with its v2 files removed: the root's
    consolidated metadata holds every node as 0.5 (OME attributes, level dimension names)."""
    store = STORES["plate"](tmp_path / "s.zarr")
    zarr.consolidate_metadata(str(store), zarr_format=2)
    levels = level_arrays(store, GROUPS["plate"])
    before = zarr_reads(store, 2)
    assert main(["to-v3", str(store), "--shard-size", "4KiB", "--remove-v2-metadata"]) == 0
    assert "consolidated" in capsys.readouterr().out
    assert zarr_reads(store, 3) == before
    listed = document(store, "")["consolidated_metadata"]["metadata"]
    for path, kind in GROUPS["plate"].items():
        if path:
            assert kind_of(listed[path]) == kind, path
    for path, names in levels.items():
        assert listed[path]["dimension_names"] == names, path
    verdicts = ome_verdicts(store, "0.5", GROUPS["plate"])
    assert all_valid(verdicts), verdicts


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An empty bucket "ome" on moto's server (skipped without the interop extra)."""
    from support.s3 import empty_bucket

    yield from empty_bucket(endpoint, monkeypatch, "ome")


def test_a_plate_on_s3_becomes_0_5_in_shards(
    tmp_path: Path, s3: Any, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plate on S3 (moto): its groups 0.5, its levels named and sharded, every value as before;
    the groups above the arrays read through the store."""
    local = STORES["plate"](tmp_path / "s.zarr")
    levels = level_arrays(local, GROUPS["plate"])
    s3.put(str(local), "ome/plate.zarr", recursive=True)
    s3.invalidate_cache()
    url = "s3://ome/plate.zarr"
    before = zarr_reads(url, 2, endpoint)
    options = ["--storage-option", f"endpoint_url={endpoint}"]
    assert main(["to-v3", url, *options, "--shard-size", "4KiB", "--remove-v2-metadata"]) == 0
    assert "OME-Zarr 0.4 made 0.5: 2 images, 2 label images, 1 plate" in capsys.readouterr().out
    assert zarr_reads(url, 3, endpoint) == before
    s3.invalidate_cache()
    for path, kind in GROUPS["plate"].items():
        found = json.loads(s3.cat_file(f"ome/plate.zarr/{path}/zarr.json".replace("//", "/")))
        assert kind_of(found) == kind, path
    for path, names in levels.items():
        found = json.loads(s3.cat_file(f"ome/plate.zarr/{path}/zarr.json"))
        assert found["dimension_names"] == names
        assert found["codecs"][0]["name"] == "sharding_indexed", path
