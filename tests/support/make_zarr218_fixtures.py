"""Write the committed zarr 2.18 store for the to-v3 tests: run once with zarr 2.18 installed.

``PYTHONPATH=tests python -m support.make_zarr218_fixtures`` writes ``tests/fixtures/zarr218/``: a
consolidated v2 group written by zarr 2.18 with the bytes filter (ids ``bytes``
and ``endian``) over integer, float, complex, bool, datetime, UTF-32 and bytes
arrays in C and F order, with both separators and several compressors, plus
the values in ``expected.npz``. zarr 2.18 and zarr 3 cannot share an
environment, so the tests read this store instead of writing it. Like every
fixture, it never changes once committed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numcodecs
import numpy as np
import zarr

from numcodecs_bytes import BytesCodec

OUT = Path(__file__).parents[1] / "fixtures" / "zarr218"
DTYPES = ["<i2", ">i4", "<u8", "<f4", ">f8", "<c16", "|b1", "<M8[ms]", "<U2", "|S3"]
COMPRESSORS = [
    None,
    numcodecs.Zstd(level=1),
    numcodecs.Blosc(cname="lz4", clevel=1, shuffle=1),
    numcodecs.GZip(1),
]


def main() -> None:
    assert zarr.__version__.startswith("2.18"), zarr.__version__
    shutil.rmtree(OUT, ignore_errors=True)
    store = zarr.DirectoryStore(str(OUT / "store.zarr"))
    group = zarr.group(store=store)
    group.attrs["written_by"] = f"zarr {zarr.__version__}"
    expected = {}
    for case, dtype_text in enumerate(DTYPES):
        dtype = np.dtype(dtype_text)
        endian, order, codec_id = ("big", "F", "endian") if case % 2 else ("little", "C", "bytes")
        base = np.arange(12, dtype=np.int64) * 7919 % 1000 - 500
        if dtype.kind == "b":
            data = base % 3 == 0
        elif dtype.kind in "Mm":
            data = base.view(dtype.newbyteorder("="))
        elif dtype.kind == "U":
            data = np.array([f"{v % 97:x}" for v in base], dtype)
        elif dtype.kind == "S":
            data = np.array([f"s{v % 97}".encode() for v in base], dtype)
        else:
            data = base.astype(dtype)
        data = data.reshape(3, 4)
        name = f"{dtype.str.strip('<>|').replace('[', '_').replace(']', '')}_{endian}_{order}"
        codec = BytesCodec.from_config({"id": codec_id, "endian": endian, "dtype": dtype.str})
        array = group.create(
            name,
            shape=data.shape,
            chunks=(2, 3),
            dtype=dtype,
            order=order,
            filters=[codec],
            compressor=COMPRESSORS[case % 4],
            fill_value=np.zeros((), dtype)[()],
            dimension_separator="/."[case % 3 % 2],
        )
        array[...] = data
        expected[name] = data
    zarr.consolidate_metadata(store)
    np.savez(OUT / "expected.npz", **expected)


if __name__ == "__main__":
    main()
