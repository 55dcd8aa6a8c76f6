"""Run as a script in a fresh interpreter with ome-zarr-py (Python 3.12 and later).

``python ome_zarr_py.py write FOLDER`` writes, with ome-zarr-py's own 0.4
writer, ``image.zarr`` (a 5-D uint16 pyramid and a label image) and
``plate.zarr`` (two wells of one field each), and prints each store's OME
groups by path (what to-v3 reports each as); and with its 0.5 writer
``image05.zarr``.

``python ome_zarr_py.py read STORE`` reads the store with ome-zarr-py's reader
and prints each image node it finds: the OME-Zarr version it detects, and each
level's shape, data type and SHA-256 of its values.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import zarr


def write(folder: Path) -> dict[str, dict[str, str]]:
    from ome_zarr.format import FormatV04
    from ome_zarr.writer import (
        write_image,
        write_labels,
        write_plate_metadata,
        write_well_metadata,
    )

    fmt = FormatV04()
    rng = np.random.default_rng(0)
    image = zarr.open_group(str(folder / "image.zarr"), mode="w", zarr_format=2)
    data = rng.integers(0, 4000, (1, 2, 4, 64, 64)).astype("uint16")
    write_image(data, image, axes="tczyx", fmt=fmt)
    write_labels((data[:, :1] % 7).astype("uint8"), image, name="cells", axes="tczyx", fmt=fmt)
    plate = zarr.open_group(str(folder / "plate.zarr"), mode="w", zarr_format=2)
    wells = ["A/1", "A/2"]
    write_plate_metadata(plate, ["A"], ["1", "2"], wells, fmt=fmt)
    for i, well in enumerate(wells):
        group = plate.require_group(well)
        write_well_metadata(group, [{"path": "0"}], fmt=fmt)
        field = rng.integers(0, 255, (2, 32, 32)).astype("uint8") + i
        write_image(field, group.require_group("0"), axes="cyx", fmt=fmt)
    # and an image its writer made 0.5 (Zarr v3)
    from ome_zarr.format import FormatV05

    made_05 = zarr.open_group(str(folder / "image05.zarr"), mode="w", zarr_format=3)
    write_image(data, made_05, axes="tczyx", fmt=FormatV05())
    return {
        "image.zarr": {"": "image", "labels": "labels", "labels/cells": "label image"},
        "plate.zarr": {
            "": "plate",
            "A/1": "well",
            "A/2": "well",
            "A/1/0": "image",
            "A/2/0": "image",
        },
    }


def read(store: str) -> list[dict[str, Any]]:
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader

    nodes = []
    for node in Reader(parse_url(store))():
        levels = []
        for level in node.data:
            values = np.asarray(level)
            digest = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()
            levels.append([list(values.shape), str(values.dtype), digest])
        if levels:
            nodes.append(
                {"path": str(node.zarr.path), "version": node.zarr.version, "levels": levels}
            )
    return sorted(nodes, key=lambda node: str(node["path"]))


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    verb, where = sys.argv[1:]
    print(json.dumps(write(Path(where)) if verb == "write" else read(where)))
