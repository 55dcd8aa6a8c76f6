"""ome-zarr-models' verdict on OME groups of a store, for the tests to run in a fresh process
(`support.fresh`).

`verdicts` opens each group (version ``0.4``: as Zarr v2, ``0.5``: as Zarr v3)
with ome-zarr-models' class for its kind (``image``, ``label image``,
``labels``, ``plate``, ``well``, ``collection``), warnings as errors (its
warnings say where a store departs from the specification): each path ->
``"valid"`` or the error. Kinds without a class of their own (a collection's
``OME`` group) are left out.
"""

from __future__ import annotations

import importlib
import warnings
from contextlib import suppress

import zarr

with suppress(ImportError):  # where installed, imported once by the tests' fork server
    for _version in ("v04", "v05"):
        for _module in ("image", "image_label", "labels", "hcs", "well", "bioformats2raw"):
            importlib.import_module(f"ome_zarr_models.{_version}.{_module}")

CLASSES = {
    "image": ("image", "Image"),
    "label image": ("image_label", "ImageLabel"),
    "labels": ("labels", "Labels"),
    "plate": ("hcs", "HCS"),
    "well": ("well", "Well"),
    "collection": ("bioformats2raw", "BioFormats2Raw"),
}


def verdicts(store: str, version: str, groups: dict[str, str]) -> dict[str, str]:
    package = {"0.4": "v04", "0.5": "v05"}[version]
    found = {}
    for path, kind in groups.items():
        if kind not in CLASSES:
            continue
        module, name = CLASSES[kind]
        model = getattr(importlib.import_module(f"ome_zarr_models.{package}.{module}"), name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                # zarr's, where the v2 metadata was kept beside zarr.json (to-v3's default)
                warnings.filterwarnings("ignore", "Both zarr.json")
                warnings.filterwarnings("ignore", "Object at .zmetadata")
                group = zarr.open_group(
                    f"{store}/{path}".rstrip("/"),
                    mode="r",
                    zarr_format=2 if version == "0.4" else 3,
                )
                model.from_zarr(group)
            found[path] = "valid"
        except Exception as exc:
            found[path] = f"{type(exc).__name__}: {exc}"[:2000]
    return found
