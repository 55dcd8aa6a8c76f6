"""OME-Zarr 0.4 stores written by hand as the 0.4 specification's examples lay them out
(zarr-python, Zarr v2): an image with a pyramid and labels, an HCS plate, a bioformats2raw
collection.

ome-zarr-py's own 0.4 writer makes such stores too, on Python 3.12 and later
(`support.ome_zarr_py`); these run everywhere, and
ome-zarr-models' 0.4 classes say that they are valid 0.4 (the tests check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr

AXES = {
    "t": "time",
    "c": "channel",
    "z": "space",
    "y": "space",
    "x": "space",
}

METADATA_XML = b'<?xml version="1.0" encoding="UTF-8"?>\n<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06"/>\n'


def _axes(names: str) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "type": AXES[name],
            **({"unit": "micrometer"} if AXES[name] == "space" else {}),
        }
        for name in names
    ]


def image(
    group: Any,
    axes: str = "czyx",
    shape: tuple[int, ...] = (2, 4, 32, 32),
    dtype: str = "uint16",
    levels: int = 3,
    label: bool = False,
    seed: int = 0,
) -> None:
    """A 0.4 multiscale image in ``group`` (a zarr v2 group): ``levels`` arrays ``0``, ``1``, ...
    halving y and x, chunked so that each has several chunk files; ``label``: a label image
    (``image-label``, integer values)."""
    rng = np.random.default_rng(seed)
    datasets = []
    for level in range(levels):
        factor = 2**level
        level_shape = tuple(
            size // factor if name in "yx" else size for name, size in zip(axes, shape, strict=True)
        )
        data = rng.integers(0, 6 if label else 4000, level_shape).astype(dtype)
        chunks = tuple(
            max(1, size // 2) if name in "yx" else 1
            for name, size in zip(axes, level_shape, strict=True)
        )
        group.create_array(str(level), data=data, chunks=chunks)
        scale = [float(factor) if name in "yx" else 1.0 for name in axes]
        datasets.append(
            {"path": str(level), "coordinateTransformations": [{"type": "scale", "scale": scale}]}
        )
    attributes: dict[str, Any] = {
        "multiscales": [
            {
                "version": "0.4",
                "name": "sample",
                "axes": _axes(axes),
                "datasets": datasets,
                "type": "mean",
            }
        ]
    }
    if label:
        attributes["image-label"] = {
            "version": "0.4",
            "colors": [{"label-value": 1, "rgba": [255, 0, 0, 255]}],
            "source": {"image": "../../"},
        }
    elif "c" in axes:
        channels = shape[axes.index("c")]
        attributes["omero"] = {
            "version": "0.4",
            "channels": [
                {
                    "label": f"channel {i}",
                    "color": "FFFFFF",
                    "active": True,
                    "window": {"start": 0, "end": 4000, "min": 0, "max": 65535},
                }
                for i in range(channels)
            ],
            "rdefs": {"model": "greyscale"},
        }
    group.attrs.update(attributes)


def image_with_labels(group: Any, seed: int = 0, **options: Any) -> None:
    """An image and, under ``labels/cells``, a label image of one channel."""
    axes = options.get("axes", "czyx")
    shape = options.get("shape", (2, 4, 32, 32))
    image(group, seed=seed, **options)
    labels = group.create_group("labels")
    labels.attrs["labels"] = ["cells"]
    label_shape = tuple(1 if name == "c" else size for name, size in zip(axes, shape, strict=True))
    image(
        labels.create_group("cells"),
        axes=axes,
        shape=label_shape,
        dtype="uint8",
        label=True,
        seed=seed + 1,
        levels=options.get("levels", 3),
    )


def image_store(path: Path) -> Path:
    """A store whose root is an image with labels."""
    image_with_labels(zarr.open_group(str(path), mode="w", zarr_format=2))
    return path


def plate_store(path: Path) -> Path:
    """An HCS plate: row A, columns 1 and 2, one field each (an image with labels)."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    wells: list[dict[str, Any]] = [
        {"path": f"A/{column}", "rowIndex": 0, "columnIndex": i} for i, column in enumerate("12")
    ]
    root.attrs["plate"] = {
        "version": "0.4",
        "name": "sample plate",
        "rows": [{"name": "A"}],
        "columns": [{"name": "1"}, {"name": "2"}],
        "wells": wells,
        "field_count": 1,
        "acquisitions": [{"id": 0, "name": "first"}],
    }
    for i, well in enumerate(wells):
        group = root.require_group(well["path"])
        group.attrs["well"] = {"version": "0.4", "images": [{"path": "0", "acquisition": 0}]}
        image_with_labels(group.create_group("0"), seed=10 * i, shape=(1, 2, 16, 16), levels=2)
    return path


def collection_store(path: Path) -> Path:
    """A bioformats2raw collection: two images (0 and 1), the OME group naming them as its series,
    and its METADATA.ome.xml."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    root.attrs["bioformats2raw.layout"] = 3
    for i in range(2):
        image(root.create_group(str(i)), axes="tczyx", shape=(1, 1, 2, 16, 16), levels=2, seed=i)
    ome = root.create_group("OME")
    ome.attrs["series"] = ["0", "1"]
    (path / "OME" / "METADATA.ome.xml").write_bytes(METADATA_XML)
    return path


def mixed_store(path: Path) -> Path:
    """An image with labels beside plain arrays and an xarray-style array with dimension names."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    image_with_labels(root.create_group("image"))
    root.create_array("plain", data=np.arange(12, dtype="<i4"), chunks=(4,))
    table = root.create_array("table", data=np.arange(6.0).reshape(2, 3), chunks=(1, 3))
    table.attrs["_ARRAY_DIMENSIONS"] = ["row", "column"]
    root.attrs["description"] = "not OME"
    return path


STORES = {"image": image_store, "plate": plate_store, "collection": collection_store}

GROUPS = {
    "image": {"": "image", "labels": "labels", "labels/cells": "label image"},
    "plate": {
        "": "plate",
        "A/1": "well",
        "A/2": "well",
        "A/1/0": "image",
        "A/2/0": "image",
        "A/1/0/labels": "labels",
        "A/2/0/labels": "labels",
        "A/1/0/labels/cells": "label image",
        "A/2/0/labels/cells": "label image",
    },
    "collection": {"": "collection", "0": "image", "1": "image", "OME": "series"},
}
"""The OME groups of each sample store, by path: what to-v3 reports each as."""
