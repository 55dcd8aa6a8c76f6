"""Zarr v2 stores of every data type, byte order, memory order, separator and compressor, with the
bytes filter; and how the tests read them as Zarr v3 in a fresh interpreter (zarr's own codec
classes, or the zarrs pipeline)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr

from support.samples import array_of

SHAPE, CHUNKS = (3, 5), (2, 3)  # edge chunks on both axes


DTYPES = [
    *["<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"],
    *["|b1", "|i1", "|u1", "<M8[ns]", "<m8[s]", "<U3", "|S5"],
]
COMPRESSORS: list[Any] = [
    None,
    numcodecs.GZip(level=1),
    numcodecs.Zstd(level=1),
    numcodecs.Blosc(cname="lz4", clevel=1, shuffle=1),
]


def write_v2_store(root: Path, codec_id: str = "bytes") -> dict[str, np.ndarray[Any, Any]]:
    """Every dtype x endian x order as arrays of one v2 group; separators and compressors cycle."""
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.attrs["title"] = "v2 store"
    written: dict[str, np.ndarray[Any, Any]] = {}
    case = 0
    for dtype_text in DTYPES:
        dtype = np.dtype(dtype_text)
        for endian in ("little", "big"):
            for order in ("C", "F"):
                name = (
                    f"{dtype.str.strip('<|').replace('[', '_').replace(']', '')}_{endian}_{order}"
                )
                data = array_of(dtype, SHAPE)
                config = {"id": codec_id, "endian": endian, "dtype": dtype.str}
                array = group.create_array(
                    name,
                    shape=SHAPE,
                    chunks=CHUNKS,
                    dtype=dtype,
                    order=order,
                    filters=[numcodecs.get_codec(config)],
                    compressors=COMPRESSORS[case % 4],
                    chunk_key_encoding={"name": "v2", "separator": "/."[case % 3 % 2]},
                    fill_value=np.zeros((), dtype)[()],
                )
                array[...] = data
                written[name] = data
                case += 1
    plain = group.create_group("nested", attributes={"level": 1}).create_array(
        "plain_big_f8", shape=(6,), chunks=(4,), dtype=">f8", compressors=numcodecs.Zstd(level=1)
    )
    plain[...] = written["nested/plain_big_f8"] = np.linspace(-1, 1, 6)
    return written


def files_of(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def v3_documents(root: Path) -> dict[str, bytes]:
    """Every zarr.json of a store: its path in the store to its bytes (what ``files_of`` leaves
    out)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("zarr.json"))}


def read_as_v3_read_in_a_fresh_process(
    root: Path, expected: dict[str, np.ndarray[Any, Any]], tmp: Path, zarrs: bool = False
) -> None:
    """Every array read as Zarr v3, with zarr-python's own codec classes (and its pipeline, or
    zarrs' where ``zarrs``), equals ``expected``."""
    arrays = {name.replace("/", "__"): data for name, data in expected.items()}
    np.savez(tmp / "expected.npz", **arrays)  # type: ignore[arg-type]
    code = f"""
import numpy as np, zarr
expected = np.load({str(tmp / "expected.npz")!r})
if {zarrs!r}:
    zarr.config.set({{"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}})
group = zarr.open_group({str(root)!r}, mode="r", zarr_format=3)
for key in expected.files:
    array = group[key.replace("__", "/")]
    codecs = array.metadata.codecs
    sharding = [c for c in codecs if type(c).__name__ == "ShardingCodec"]
    codecs = [*codecs, *(inner for c in sharding for inner in c.codecs)]
    serializer = [c for c in codecs if type(c).__name__ == "BytesCodec"]
    zarrs_own = serializer and type(serializer[0]).__module__ == "zarr.codecs.bytes"
    assert zarrs_own, array.metadata.codecs
    got = array[...]
    assert got.dtype == expected[key].dtype.newbyteorder("="), (key, got.dtype)
    assert got.tolist() == expected[key].tolist(), key
print(len(expected.files))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(expected)


def tensorstore_reads(root: Path, expected: dict[str, np.ndarray[Any, Any]]) -> int:
    """Every numeric array of ``expected`` (tensorstore's zarr3 driver reads those) read by
    tensorstore from the v3 store at ``root`` equals its values; how many were read."""
    import tensorstore as ts

    checked = 0
    for name, data in expected.items():
        if data.dtype.kind not in "biufc" or data.dtype.str.endswith("f2"):
            continue
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / name)}}
        assert ts.open(spec, open=True).result().read().result().tolist() == data.tolist(), name
        checked += 1
    return checked
