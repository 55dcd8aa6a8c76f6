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
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from .._zarr_api import zarr_api
from .documents import depth, encoded

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
    ome-zarr-models is not installed.

    Shallow groups first: a group that passes has every group it read on the way passed too (a
    plate reads and checks its wells, their images, their labels), which are not checked again;
    below one that fails, each is checked on its own, so that the deepest that fail are known.
    """
    try:
        classes = {
            kind: getattr(importlib.import_module(f"ome_zarr_models.v05.{module}"), name)
            for kind, (module, name) in CLASSES.items()
        }
    except ImportError:
        return None
    api = zarr_api()
    read: set[str] = set()  # the documents the validator read, since it was last cleared

    class Recording(api.memory_store):  # type: ignore[name-defined]
        async def get(self, key: str, *args: Any, **kwargs: Any) -> Any:
            read.add(key)
            return await super().get(key, *args, **kwargs)

    store = Recording(
        {
            _key(path): api.prototype.buffer.from_bytes(encoded(document))
            for path, document in documents.items()
        }
    )
    found: dict[str, str] = {}
    passed: set[str] = set()  # the documents read by validations that passed
    for path in sorted(groups, key=lambda path: (depth(path), path)):
        kind = groups[path]
        if kind not in classes or _key(path) in passed:
            continue
        read.clear()
        opened = partial(api.open_group, store, path=path, mode="r", zarr_format=3)
        why = _verdict(opened, classes[kind])
        if why is None:
            passed |= read
        else:
            found[path] = why
    return found


def _key(path: str) -> str:
    return f"{path}/zarr.json".lstrip("/")


def _verdict(opened: Callable[[], Any], model: Any) -> str | None:
    """ome-zarr-models' verdict on one group (``opened`` opens it): None where it takes it; else
    why not, in a line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.from_zarr(opened())
        except Exception as exc:  # pydantic's ValidationError, zarr's, a KeyError: all say no
            return _one_line(f"{type(exc).__name__}: {exc}")
    own = [w for w in caught if "ome_zarr_models" in (w.filename or "")]
    return _one_line(f"{own[0].category.__name__}: {own[0].message}") if own else None


def _one_line(text: str) -> str:
    """A validator's message as one line of reasonable length (pydantic's span several, with a
    link)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith("For further information")]
    joined = "; ".join(kept)
    return joined if len(joined) <= 300 else joined[:297] + "..."
