"""Run as a script in a fresh interpreter: how a store reads as Zarr v2 and as Zarr v3 after to-v3.

``python tests/store_check.py STORE...`` prints, per store, one JSON object: for every array
zarr reads as v2 (each folder with a ``.zarray``), whether the store as users
open it (``zarr.open_group(STORE)``: v3 where the root has a ``zarr.json``)
reaches it by its path with the same values, and whether its own folder has a
``zarr.json`` that reads the same. v3 is read with zarr-python's own codec
classes only (the ``codecs.bytes`` default); values are compared by the bytes
of each element.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import numpy as np
import zarr


def same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "OT" or b.dtype.kind in "OT":
        return bool(a.tolist() == b.tolist())
    if a.dtype.newbyteorder("<") != b.dtype.newbyteorder("<"):
        return False
    native = a.dtype.newbyteorder("=")
    return np.ascontiguousarray(a, native).tobytes() == np.ascontiguousarray(b, native).tobytes()


def check(root: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "arrays": {},
        "root_is_v3": os.path.exists(os.path.join(root, "zarr.json")),
    }
    warnings.simplefilter("ignore")
    assert zarr.config.get("codecs.bytes") == "zarr.codecs.bytes.BytesCodec"
    opened = None
    try:
        opened = zarr.open_group(root, mode="r")
    except Exception as exc:
        result["root_error"] = f"{type(exc).__name__}: {exc}"
    for folder, _, names in os.walk(root):
        if ".zarray" not in names:
            continue
        path = os.path.relpath(folder, root).replace(os.sep, "/")
        path = "" if path == "." else path
        try:
            v2 = zarr.open_array(folder, mode="r", zarr_format=2)[...]
        except Exception:  # not an array v2 readers read: nothing to keep
            continue
        entry: dict[str, Any] = {"has_zarr_json": "zarr.json" in names}
        if entry["has_zarr_json"]:
            v3_array = zarr.open_array(folder, mode="r", zarr_format=3)
            codecs = getattr(v3_array.metadata, "codecs", ())
            serializers = [c for c in codecs if type(c).__name__ == "BytesCodec"]
            entry["zarrs_own_codec"] = all(
                type(c).__module__ == "zarr.codecs.bytes" for c in serializers
            )
            entry["v3_same"] = same(v2, v3_array[...])
        try:
            node: Any = (
                opened[path] if (opened is not None and path) else zarr.open_array(root, mode="r")
            )
            entry["reached_same"] = same(v2, node[...])
        except Exception as exc:
            entry["reached_same"] = False
            entry["reach_error"] = f"{type(exc).__name__}: {exc}"
        result["arrays"][path] = entry
    return result


if __name__ == "__main__":
    print(json.dumps({root: check(root) for root in sys.argv[1:]}))
