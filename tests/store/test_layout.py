"""The Zarr layout facts (numcodecs_bytes.store.layout): which folders hold chunks, which chunks are
stored."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numcodecs_bytes.store.layout import (
    Location,
    chunk_folders,
    chunk_indices,
    chunk_key,
    chunk_region,
    nested_layout,
)


@pytest.mark.parametrize(
    ("subfolders", "files", "zarray", "expected"),
    [
        (["0", "1", "g"], [".zarray"], {"shape": [4, 4], "dimension_separator": "/"}, ["0", "1"]),
        # a digit folder: a node
        (["0", "g"], [".zarray"], {"shape": [4, 4], "dimension_separator": "."}, []),
        (["0", "g"], [".zarray"], {"shape": [4]}, []),  # one axis: chunk "0" is a file
        # no separator said: the store shows nested
        (["0", "g"], [".zarray"], {"shape": [4, 4]}, ["0"]),
        (["g"], [".zarray", "0.0"], {"shape": [4, 4]}, []),  # ... or flat
        # both: no digit folder holds a node zarr reads
        (["0", "g"], [".zarray", "0.0"], {"shape": [4, 4]}, ["0"]),
        (["0", "g"], [".zarray"], None, ["0"]),  # no array metadata: likewise
        (["0", "g"], [".zarray"], {"shape": "4"}, ["0"]),
    ],
)
def test_the_folders_a_walk_does_not_enter(
    subfolders: list[str], files: list[str], zarray: Any, expected: list[str]
) -> None:
    assert chunk_folders(subfolders, files, zarray) == expected


def test_both_layouts_in_one_folder_are_named() -> None:
    with pytest.raises(ValueError, match=r"both layouts \('0.0' files and '0/0' folders\)"):
        nested_layout(["0"], ["0.0"], 2)
    assert nested_layout(["0"], [], 1) is False  # one axis: never nested


@given(
    st.lists(st.integers(0, 5), min_size=0, max_size=3).flatmap(
        lambda shape: st.tuples(st.just(shape), st.tuples(*(st.integers(1, 3) for _ in shape)))
    ),
    st.sampled_from([".", "/"]),
    st.data(),
)
def test_stored_chunks_are_those_listed_chunk_0_first_then_in_c_order(
    shape_and_chunks: tuple[list[int], tuple[int, ...]], separator: str, data: st.DataObject
) -> None:
    """The oracle: every index of the grid, filtered by the listing where chunks are files there."""
    shape, chunks = shape_and_chunks
    zarray = {"shape": shape, "chunks": list(chunks), "dimension_separator": separator}
    grid = [-(-extent // size) for extent, size in zip(shape, chunks, strict=True)]
    every = list(product(*map(range, grid))) if all(shape) else []
    stored = data.draw(st.lists(st.sampled_from(every), unique=True)) if every else []
    names = [chunk_key(zarray, index) for index in stored] + [".zarray", "9" * 3, "x.0"]
    listed = list(chunk_indices(zarray, names))
    if not every:
        assert listed == []
        return
    origin = tuple(0 for _ in shape)
    in_folders = separator == "/" and len(shape) > 1
    expected = (
        every if in_folders else [origin, *sorted(index for index in stored if index != origin)]
    )
    assert listed == expected
    assert list(chunk_indices(zarray, None)) == every  # not listed: the whole grid
    for index in listed:
        region = chunk_region(zarray, index)
        assert all(
            0 <= part.start < part.stop <= extent
            for part, extent in zip(region, shape, strict=True)
        )


def test_chunk_keys_as_zarr_2_writes_them() -> None:
    assert chunk_key({"shape": [4, 4]}, (1, 2)) == "1.2"
    assert chunk_key({"shape": [4, 4], "dimension_separator": "/"}, (1, 2)) == "1/2"
    assert chunk_key({"shape": []}, ()) == "0"


_NAMES = st.text(st.characters(blacklist_characters="/", blacklist_categories=["Cs"]), min_size=1)


@given(
    root=st.sampled_from(["/tmp/store.zarr", "bucket/prefix/store", "bucket"]),
    names=st.lists(_NAMES, max_size=4),
    name=_NAMES,
    other=_NAMES,
)
def test_a_location_joins_and_parts_as_a_path_of_names_does(
    root: str, names: list[str], name: str, other: str
) -> None:
    """A node's location, built a name at a time, is the root and the names joined by ``/``; a
    file's key there parts back into its name; a key that lies elsewhere is refused."""
    at = Location(root)
    for each in names:
        at = at / each
    assert at.path == "/".join(names)
    assert at.key == "/".join([root, *names])
    assert at.file(name) == (at / name).key == f"{at.key}/{name}"
    assert at.below(at.file(name)) == name
    assert at.below((at / name).file(other)) == f"{name}/{other}"
    sibling = f"{at.key}{name}/{other}"  # a folder whose name begins as this one's: not below it
    with pytest.raises(ValueError, match="does not lie below"):
        at.below(sibling)
