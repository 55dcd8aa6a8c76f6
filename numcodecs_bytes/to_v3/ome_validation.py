"""OME-Zarr 0.5 groups checked by ome-zarr-models (the OME community's validator) before their
``zarr.json`` is written.

The documents a run is about to write are held in memory as a Zarr v3
store, metadata only (ome-zarr-models reads no chunk), and each group is
opened with its kind's class, as a user validates a store. A group it rejects
is not made 0.5 (`to_v3.run`). Where ome-zarr-models is not installed there
is no verdict (`rejected` returns None): the run says the result was not
validated.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

from ._zarr_api import zarr_api
from .documents import encoded

__all__ = ["CLASSES", "rejected"]

CLASSES = {
    "image": ("image", "Image"),
    "label image": ("image_label", "ImageLabel"),
    "labels": ("labels", "Labels"),
    "plate": ("hcs", "HCS"),
    "well": ("well", "Well"),
    "collection": ("bioformats2raw", "BioFormats2Raw"),
}
"""The ome-zarr-models class of each kind of group (`ome.kind_of`), by module of ``v05``; a kind
without one (a collection's ``OME`` group, holding its series) is not checked on its own."""


def rejected(
    documents: Mapping[str, dict[str, Any]], groups: Mapping[str, str]
) -> dict[str, str] | None:
    """Of ``groups`` (path -> kind), those ome-zarr-models rejects, with its reason in one line,
    given every node's document as the run is about to write it (``documents``, by path; "" the
    root); a warning of its counts (a departure from the specification). None where
    ome-zarr-models is not installed."""
    try:
        classes = {
            kind: getattr(importlib.import_module(f"ome_zarr_models.v05.{module}"), name)
            for kind, (module, name) in CLASSES.items()
        }
    except ImportError:
        return None
    api = zarr_api()
    store = api.memory_store(
        {
            f"{path}/zarr.json".lstrip("/"): api.prototype.buffer.from_bytes(encoded(document))
            for path, document in documents.items()
        }
    )
    found = {}
    for path, kind in groups.items():
        if kind not in classes:
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                group = api.open_group(store, path=path, mode="r", zarr_format=3)
                classes[kind].from_zarr(group)
            except Exception as exc:  # pydantic's ValidationError, zarr's, a KeyError: all say no
                found[path] = _one_line(f"{type(exc).__name__}: {exc}")
                continue
        own = [w for w in caught if "ome_zarr_models" in (w.filename or "")]
        if own:
            found[path] = _one_line(f"{own[0].category.__name__}: {own[0].message}")
    return found


def _one_line(text: str) -> str:
    """A validator's message as one line of reasonable length (pydantic's span several, with a
    link)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith("For further information")]
    joined = "; ".join(kept)
    return joined if len(joined) <= 300 else joined[:297] + "..."
