"""The codec as a filter in Zarr v2 arrays, with the real zarr: 3.x (``zarr_format=2``) and 2.18.

CI runs this module twice: in the main environment (zarr 3) and in a second
one with zarr 2.18, since the two cannot be installed together.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

from numcodecs_bytes import BytesCodec

zarr = pytest.importorskip("zarr")
ZARR_MAJOR = int(zarr.__version__.split(".")[0])

# Every dtype family zarr's v2 format stores, with values that show their layout.
DTYPES = [
    "<i2",
    "<i4",
    "<i8",
    "<u2",
    "<u4",
    "<u8",
    "|i1",
    "|u1",
    "<f2",
    "<f4",
    "<f8",
    "<c8",
    "<c16",
    "|b1",
]
DTYPES += ["<M8[ns]", "<m8[s]", "|S4", "<U3"]


def values(dtype: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    count = int(np.prod(shape))
    base = np.arange(count, dtype=np.int64) * 37 - 500
    kind = np.dtype(dtype).kind
    data: np.ndarray[Any, Any]
    if kind == "b":
        data = (base % 3 == 0).astype(dtype)
    elif kind in "SU":
        data = np.array([f"{v % 1000:x}"[:3] for v in base], dtype=dtype)
    elif kind in "Mm":
        data = (base * 1_000_003).astype("<i8").view(dtype)
    elif kind == "c":
        data = (base + 1j * (base / 7)).astype(dtype)
    elif kind == "u":
        data = (base % 250).astype(dtype)
    else:
        data = (base / (4 if kind == "f" else 1)).astype(dtype)
    return data.reshape(shape)


def create_v2(
    path: Path,
    data: np.ndarray[Any, Any],
    chunks: tuple[int, ...],
    filters: list[Any],
    compressor: Any,
    order: str,
) -> Any:
    """A Zarr v2 array on disk holding ``data``, in whichever zarr is installed."""
    common = dict(
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        filters=filters,
        order=order,
        fill_value=None,
    )
    if ZARR_MAJOR >= 3:
        z = zarr.create(store=str(path), zarr_format=2, compressor=compressor, **common)
    else:
        z = zarr.create(store=str(path), compressor=compressor, **common)
    z[...] = data
    return z


def same(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


# Every data type in both byte orders and both memory orders; a compressor after the filter
# changes nothing of ours, so each data type meets zlib once.
DISK_CASES = [
    *(
        pytest.param(dtype, endian, order, False, id=f"raw-{order}-{endian}-{dtype}")
        for order in ("C", "F")
        for endian in ("little", "big")
        for dtype in DTYPES
    ),
    *(
        pytest.param(dtype, ("little", "big")[i % 2], "CF"[i // 2 % 2], True, id=f"zlib-{dtype}")
        for i, dtype in enumerate(DTYPES)
    ),
]


@pytest.mark.parametrize(("dtype", "endian", "order", "compressed"), DISK_CASES)
def test_filter_round_trips_through_disk(
    tmp_path: Path, dtype: str, endian: str, order: str, compressed: bool
) -> None:
    data = values(dtype, (7, 5))  # chunks (3, 2): edge chunks on both axes
    codec = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    compressor = numcodecs.Zlib(level=1) if compressed else None
    create_v2(tmp_path / "a.zarr", data, (3, 2), [codec], compressor, order)

    reopened = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert same(reopened[...], data)
    assert same(reopened[2:6, 1:4], data[2:6, 1:4])  # a read across chunks
    stored = json.loads((tmp_path / "a.zarr" / ".zarray").read_text())
    assert stored["filters"] == [{"id": "bytes", "endian": endian, "dtype": np.dtype(dtype).str}]
    assert stored["order"] == order


@pytest.mark.parametrize("dtype", ["<i4", "<f8", "<c16", "<U3", "|b1", "<M8[ns]"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_partial_writes_and_reads(tmp_path: Path, dtype: str, order: str) -> None:
    data = values(dtype, (9, 8))
    z = create_v2(
        tmp_path / "a.zarr",
        data,
        (4, 3),
        [BytesCodec(endian="big", dtype=dtype)],
        numcodecs.Zlib(level=1),
        order,
    )
    patch = values(dtype, (3, 4))[::-1]
    z[2:5, 3:7] = patch
    expected = data.copy()
    expected[2:5, 3:7] = patch
    reopened = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert same(reopened[...], expected)
    assert same(reopened[1:8:2, 5], expected[1:8:2, 5])


@pytest.mark.parametrize("dtype", ["<u2", "<i4", "<f8", "<c8", "<U3", "|b1"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("endian", ["little", "big"])
def test_uncompressed_chunk_file_holds_exactly_the_spec_bytes(
    tmp_path: Path, dtype: str, order: str, endian: str
) -> None:
    data = values(dtype, (4, 6))
    codec = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    create_v2(tmp_path / "a.zarr", data, (2, 3), [codec], None, order)
    chunk = data[2:4, 3:6]  # chunk (1, 1)
    wire = np.dtype(dtype).newbyteorder("<" if endian == "little" else ">")
    expected = chunk.astype(wire).tobytes(
        order="F" if order == "F" else "C"
    )  # the chunk's elements in the array's memory order
    assert (tmp_path / "a.zarr" / "1.1").read_bytes() == expected


@pytest.mark.parametrize("dtype", ["<i4", "<f8", "|b1"])
def test_legacy_endian_id_in_stored_metadata_opens_and_reads(tmp_path: Path, dtype: str) -> None:
    data = values(dtype, (6, 4))
    create_v2(
        tmp_path / "a.zarr",
        data,
        (4, 4),
        [BytesCodec(endian="big", dtype=dtype)],
        numcodecs.Zlib(level=1),
        "C",
    )
    meta_path = tmp_path / "a.zarr" / ".zarray"
    meta = json.loads(meta_path.read_text())
    # as the draft wrote it
    meta["filters"] = [{"id": "endian", "endian": "big", "dtype": np.dtype(dtype).str}]
    meta_path.write_text(json.dumps(meta))

    reopened = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert same(reopened[...], data)
    assert isinstance(
        reopened.filters[0] if ZARR_MAJOR < 3 else reopened.metadata.filters[0], BytesCodec
    )


def test_filter_resolved_from_metadata_in_a_fresh_process(tmp_path: Path) -> None:
    """Reading needs only the package installed: numcodecs finds it by id."""
    import subprocess
    import sys

    data = values("<f8", (5, 5))
    create_v2(tmp_path / "a.zarr", data, (2, 5), [BytesCodec(endian="big", dtype="<f8")], None, "C")
    code = f"""
import sys, zarr, numpy as np
z = zarr.open_array({str(tmp_path / "a.zarr")!r}, mode="r")
assert "numcodecs_bytes" in sys.modules
print(float(z[...].sum()))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == float(data.sum())


# Every pairing of the array's byte order with the filter dtype's (issue: a `>i4` array with a
# `<i4` filter wrote the right bytes, then read back [16777216, ...]: zarr views what decode
# returns as the array's dtype).
@pytest.mark.parametrize("array_dtype", ["<i4", ">i4", "<f8", ">f8", "|u1", "<U2", ">U2"])
@pytest.mark.parametrize("filter_order", ["<", ">"])
@pytest.mark.parametrize("endian", ["little", "big"])
def test_every_pairing_of_array_and_filter_dtype_reads_back_or_fails_to_write(
    tmp_path: Path, array_dtype: str, filter_order: str, endian: str
) -> None:
    data = values(array_dtype, (6,))
    filter_dtype = np.dtype(array_dtype).newbyteorder(filter_order)  # type: ignore[arg-type]
    codec = BytesCodec(endian=endian, dtype=filter_dtype)  # type: ignore[arg-type]
    if filter_dtype == np.dtype(array_dtype):
        z = create_v2(tmp_path / "a.zarr", data, (4,), [codec], None, "C")
        assert same(z[...], data)
        return
    with pytest.raises(ValueError, match=r"in the other byte order: decode returns"):
        create_v2(tmp_path / "a.zarr", data, (4,), [codec], None, "C")


def test_a_filter_without_dtype_warns_when_its_config_is_taken_for_an_array(tmp_path: Path) -> None:
    """Without a dtype, decode needs out=, which zarr never passes to filters: such an array is
    write-only."""
    with pytest.warns(
        UserWarning, match=r"has no dtype: .*could be written but not read\); give dtype="
    ):
        create_v2(
            tmp_path / "a.zarr", values("<i4", (4,)), (4,), [BytesCodec(endian="big")], None, "C"
        )
