"""Zarr v3 arrays: the codec through zarr-any-numcodecs, and reading stores written by zarr-
python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.data_types import needs_endian

pytest.importorskip("zarr", minversion="3", reason="Zarr v3 arrays need zarr 3")
from support.stack import ZARR_SWAPS_STRUCT_FIELDS, has_module
from zarr.codecs import BytesCodec as ZarrBytesCodec

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

needs_any_numcodecs = pytest.mark.skipif(
    not has_module("zarr_any_numcodecs"),
    reason="zarr-any-numcodecs is not installed (the interop extra has it on Python 3.11: it needs "
    "numcodecs < 0.17)",
)

# zarr-any-numcodecs passes out= to decode, so a codec without dtype works there; its config warns
# all the same (the warning is for Zarr v2 filters, which get no out).
pytestmark = pytest.mark.filterwarnings("ignore:BytesCodec.*has no dtype:UserWarning")

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
NUMERIC += ["float16", "float32", "float64", "complex64", "complex128", "bool"]
SHAPE, CHUNKS = (5, 7), (2, 3)  # edge chunks on both axes


def values(dtype: str) -> np.ndarray[Any, Any]:
    base: np.ndarray[Any, Any] = (
        np.arange(np.prod(SHAPE)).reshape(SHAPE) * 2_654_435_761 % 100_003 - 50_000
    )
    if dtype == "bool":
        return np.asarray(base % 3 == 0)
    if dtype.startswith("complex"):
        return np.asarray(base + 1j / (base + 0.5), dtype=dtype)
    if dtype.startswith("float"):
        return (base / 7).astype(dtype)
    info = np.iinfo(dtype)
    return (
        (base % min(int(info.max) + 1, 1 << 62)).astype(dtype)
        if dtype.startswith("uint")
        else base.astype(dtype)
    )


def chunk_files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


@needs_any_numcodecs
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("with_dtype", [False, True], ids=["dtype from zarr", "dtype configured"])
def test_adapter_chunks_are_byte_identical_to_zarr_native(
    tmp_path: Path, dtype: str, endian: str, with_dtype: bool
) -> None:
    import zarr_any_numcodecs as any_numcodecs

    data = values(dtype)
    ours = BytesCodec(endian=endian, dtype=data.dtype if with_dtype else None)  # type: ignore[arg-type]
    common: dict[str, Any] = dict(
        shape=SHAPE, chunks=CHUNKS, dtype=data.dtype, compressors=None, fill_value=0
    )
    common["config"] = {"write_empty_chunks": True}  # compare all 9 chunks, fill-valued ones too
    adapted = zarr.create_array(
        store=str(tmp_path / "ours.zarr"),
        serializer=any_numcodecs.AnyNumcodecsArrayBytesCodec(ours),
        **common,
    )
    native = zarr.create_array(
        store=str(tmp_path / "native.zarr"), serializer=ZarrBytesCodec(endian=endian), **common
    )
    adapted[...] = data
    native[...] = data

    reopened = zarr.open_array(str(tmp_path / "ours.zarr"), mode="r")
    assert np.array_equal(reopened[...], data)
    assert np.array_equal(reopened[1:4, 2:6], data[1:4, 2:6])
    ours_files, native_files = (
        chunk_files(tmp_path / "ours.zarr"),
        chunk_files(tmp_path / "native.zarr"),
    )
    assert ours_files.keys() == native_files.keys() and len(ours_files) == 9
    assert ours_files == native_files
    codecs = json.loads((tmp_path / "ours.zarr" / "zarr.json").read_text())["codecs"]
    assert codecs[0] == {"name": "any-numcodecs.array-bytes", "configuration": ours.get_config()}


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_from_v3_decodes_a_store_written_by_zarr_python(
    tmp_path: Path, dtype: str, endian: str
) -> None:
    data = values(dtype)
    store = tmp_path / "native.zarr"
    z = zarr.create_array(
        store=str(store),
        shape=SHAPE,
        chunks=CHUNKS,
        dtype=data.dtype,
        compressors=None,
        serializer=ZarrBytesCodec(endian=endian),
        fill_value=0,
        config={"write_empty_chunks": True},
    )
    z[...] = data
    metadata = json.loads((store / "zarr.json").read_text())
    (entry,) = [
        c for c in metadata["codecs"] if (c if isinstance(c, str) else c["name"]) == "bytes"
    ]
    codec = BytesCodec.from_v3(entry, dtype=metadata["data_type"])

    expected = zarr.open_array(str(store), mode="r")[...]
    for i in range(0, SHAPE[0], CHUNKS[0]):
        for j in range(0, SHAPE[1], CHUNKS[1]):
            raw = (store / "c" / str(i // CHUNKS[0]) / str(j // CHUNKS[1])).read_bytes()
            chunk = np.empty(CHUNKS, dtype=data.dtype)  # stored chunks are full size, edge or not
            codec.decode(raw, out=chunk)
            block = expected[i : i + CHUNKS[0], j : j + CHUNKS[1]]
            assert np.array_equal(chunk[: block.shape[0], : block.shape[1]], block)


FAMILY_SAMPLES = {
    "<M8[ns]": np.array(["2024-01-01T00:00:00.5", "NaT", "1969-07-20T20:17"], dtype="<M8[ns]"),
    "<m8[10s]": np.array([0, -3, 7], dtype="<m8[10s]"),
    "<U3": np.array(["a", "\u00e9t\u00e9", "xyz"], dtype="<U3"),
    "S5": np.array([b"", b"abcde", b"\x00\x01"], dtype="S5"),
    "V3": np.frombuffer(bytes(range(9)), dtype="V3"),
    "struct": np.array(
        [(1, 1.5, b"ab"), (2, -0.0, b""), (65535, np.inf, b"z")],
        [("a", "<u2"), ("b", "<f4"), ("c", "S2")],
    ),
}


@pytest.mark.parametrize("name", list(FAMILY_SAMPLES))
def test_from_v3_takes_the_data_type_object_of_zarr_json(tmp_path: Path, name: str) -> None:
    data = FAMILY_SAMPLES[name]
    endian = "big"
    store = tmp_path / "a.zarr"
    z = zarr.create_array(
        store=str(store),
        shape=data.shape,
        chunks=data.shape,
        dtype=data.dtype,
        compressors=None,
        serializer=ZarrBytesCodec(endian=endian),
        config={"write_empty_chunks": True},
    )
    z[...] = data
    metadata = json.loads((store / "zarr.json").read_text())
    assert isinstance(metadata["data_type"], dict)  # the object form, not a name
    entry = metadata["codecs"][0]
    if name == "struct" and not ZARR_SWAPS_STRUCT_FIELDS:
        # zarr-python before 3.3 (fixed by PR #4142) drops the endian a multi-byte struct requires:
        # refused
        assert entry == {"name": "bytes"}
        with pytest.raises(ValueError, match="endian is required for data type struct"):
            BytesCodec.from_v3(entry, dtype=metadata["data_type"])
        entry = {"name": "bytes", "configuration": {"endian": "little"}}  # what it actually wrote
    elif needs_endian(data.dtype):
        assert entry == {"name": "bytes", "configuration": {"endian": "big"}}
    else:  # zarr-python drops endian where it orders nothing
        assert entry == {"name": "bytes"}
    codec = BytesCodec.from_v3(entry, dtype=metadata["data_type"])
    assert codec.dtype == data.dtype
    decoded = codec.decode((store / "c" / "0").read_bytes())
    assert (
        decoded.tobytes() == zarr.open_array(str(store), mode="r")[...].tobytes() == data.tobytes()
    )


@needs_any_numcodecs
def test_adapter_scrambles_arrays_in_f_order_so_the_readme_steers_to_the_native_codec() -> None:
    """zarr-any-numcodecs 0.1.3 encodes a chunk in its memory order but decodes into a C-order
    array.

    The README documents C order as the only safe configuration of the adapter;
    if this starts to pass through unchanged data, the adapter was fixed.
    """
    import zarr_any_numcodecs as any_numcodecs

    data = np.arange(24, dtype="<i4").reshape(4, 6)
    for order, intact in (("C", True), ("F", False)):
        z = zarr.create_array(
            store={},
            shape=data.shape,
            chunks=(2, 3),
            dtype=data.dtype,
            compressors=None,
            serializer=any_numcodecs.AnyNumcodecsArrayBytesCodec(BytesCodec(endian="big")),
            config={"order": order},
        )
        z[...] = data
        assert np.array_equal(z[...], data) == intact, order
