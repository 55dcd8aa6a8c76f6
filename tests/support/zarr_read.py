"""Every array zarr-python reaches from a store's root, and its values, read in a fresh process.

`read_in_a_fresh_process` opens a store (a folder or an ``s3://`` URL, with its
S3 server's endpoint) as users open it, with zarr-python's own codec classes:
``2`` as Zarr v2 through its consolidated metadata where it has ``.zmetadata``
(as xarray and ``open_consolidated`` do), ``3`` as Zarr v3 (through its
consolidated metadata where it has one): each array's path -> [dtype, shape,
SHA-256 of its values] (Python values for strings and objects, native bytes
otherwise), or {"error": ...} where the root does not open.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import zarr

with suppress(ImportError):  # where installed, imported once by the fork server, not each read
    import s3fs  # noqa: F401


def fingerprint(values: np.ndarray[Any, Any]) -> list[Any]:
    if values.dtype.kind in "OT":
        data = json.dumps(
            values.tolist(), default=lambda v: v.hex() if isinstance(v, bytes) else str(v)
        ).encode()
        dtype = "str"
    else:
        data = np.ascontiguousarray(values, values.dtype.newbyteorder("=")).tobytes()
        dtype = values.dtype.newbyteorder("<").str
    return [dtype, list(values.shape), hashlib.sha256(data).hexdigest()]


def read_all(store: str, zarr_format: Literal[2, 3], endpoint: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"storage_options": {"endpoint_url": endpoint}} if endpoint else {}
    assert zarr.config.get("codecs.bytes") == "zarr.codecs.bytes.BytesCodec"
    try:
        if zarr_format == 2:
            try:
                root = zarr.open_consolidated(store, mode="r", zarr_format=2, **options)
            except Exception:  # no .zmetadata: the hierarchy as its files say
                root = zarr.open_group(store, mode="r", zarr_format=2, **options)
        else:
            root = zarr.open_group(store, mode="r", zarr_format=3, **options)
    except Exception as exc:
        try:
            array = zarr.open_array(store, mode="r", zarr_format=zarr_format, **options)
        except Exception:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"": fingerprint(np.asarray(array[...]))}
    arrays: dict[str, Any] = {}
    for path, node in root.members(max_depth=None):
        if isinstance(node, zarr.Array):
            try:
                arrays[path] = fingerprint(np.asarray(node[...]))
            except Exception as exc:
                arrays[path] = {"error": f"{type(exc).__name__}: {exc}"}
    return arrays


def read_in_a_fresh_process(
    store: Path | str, zarr_format: int, endpoint: str | None = None
) -> dict[str, Any]:
    """`read_all` in a new process that nothing but imports ran in (`support.fresh`); fails where
    the root does not open."""
    from support.fresh import in_a_fresh_process

    read = in_a_fresh_process(read_all, str(store), cast(Literal[2, 3], zarr_format), endpoint)
    assert "error" not in read, read
    return read


def read_with_tensorstore(path: str) -> list[Any]:
    """The `fingerprint` of the Zarr v3 array in a local folder as tensorstore reads it."""
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
    return fingerprint(np.asarray(ts.open(spec, open=True).result().read().result()))


def tensorstore_reads(path: Path | str) -> list[Any]:
    """`read_with_tensorstore` in a new process that nothing but imports ran in."""
    from support.fresh import in_a_fresh_process

    return in_a_fresh_process(read_with_tensorstore, str(path))
