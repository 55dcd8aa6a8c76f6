"""Run as a script in a fresh interpreter: how xarray users open converted stores, with no
numcodecs-bytes.

``python tests/xarray_check.py EXPECTED STORES`` opens each store of the JSON
file STORES (name -> [path, "dataset" or "tree"]) as a user without this package
would: plain ``xarray.open_zarr(path)`` (``open_datatree`` for trees), and again
with ``zarr_format=3``. Each is compared with the v2 open pickled in EXPECTED
(name -> dataset or tree, loaded, encodings dropped): ``identical``, and every
variable of the same dtype. Prints, per store and per way of opening, "identical"
or what differs.

This package does not exist here: its modules cannot be imported and its
entry points are not seen (zarr and numcodecs look codecs up by entry point).
"""

from __future__ import annotations

import importlib.metadata
import sys
from typing import Any


class _NoSuchPackage:
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "numcodecs_bytes" or name.startswith("numcodecs_bytes."):
            raise ImportError(f"{name}: not installed here")


def _without_its_entry_points(module: Any) -> None:
    original = module.entry_points

    def entry_points(**select: Any) -> Any:
        found = original(**select)

        def kept(entries: Any) -> list[Any]:
            return [entry for entry in entries if not entry.value.startswith("numcodecs_bytes")]

        if isinstance(found, dict):  # Python 3.11's selectable groups
            return type(found)({group: tuple(kept(entries)) for group, entries in found.items()})
        return module.EntryPoints(kept(found))

    module.entry_points = entry_points


sys.meta_path.insert(0, _NoSuchPackage())
_without_its_entry_points(importlib.metadata)
try:
    import importlib_metadata  # zarr's and numcodecs' registries may use the backport

    _without_its_entry_points(importlib_metadata)
except ImportError:
    pass

import json  # noqa: E402  (after the hook above: this package must stay hidden from what follows)
import pickle  # noqa: E402
import warnings  # noqa: E402

import xarray as xr  # noqa: E402


def datasets(opened: Any) -> dict[str, xr.Dataset]:
    """A dataset, or each node's dataset of a tree, by path."""
    if isinstance(opened, xr.DataTree):
        return {node.path: node.to_dataset() for node in opened.subtree}
    return {"/": opened}


def difference(got: Any, expected: Any) -> str | None:
    if not got.identical(expected):
        details = []
        for path, ds in datasets(got).items():
            other = datasets(expected).get(path)
            if other is None:
                details.append(f"{path}: not in the v2 open")
                continue
            for name in sorted(set(ds.variables) | set(other.variables), key=str):
                if name not in ds.variables or name not in other.variables:
                    details.append(
                        f"{path}{name}: only in {'v2' if name in other.variables else 'v3'}"
                    )
                elif not ds[name].identical(other[name]):
                    details.append(
                        f"{path}{name}: v3 {ds[name].dtype} {ds[name].attrs} "
                        f"{ds[name].values.ravel()[:4]!r}, v2 {other[name].dtype} "
                        f"{other[name].attrs} {other[name].values.ravel()[:4]!r}"
                    )
            if ds.attrs != other.attrs:
                details.append(f"{path}: attrs {ds.attrs} in v3, {other.attrs} in v2")
        return "; ".join(details) or "not identical"
    for path, ds in datasets(got).items():
        for name, variable in ds.variables.items():
            if variable.dtype != datasets(expected)[path][name].dtype:
                return (
                    f"{path}{name}: dtype {variable.dtype} in v3, "
                    f"{datasets(expected)[path][name].dtype} in v2"
                )
    return None


def opened(path: str, how: str, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "tree":
            return xr.open_datatree(path, engine="zarr", **options).load()
        return xr.open_zarr(path, **options).load()


def main() -> None:
    with open(sys.argv[1], "rb") as handle:
        expected = pickle.load(handle)
    with open(sys.argv[2]) as handle:
        stores = json.load(handle)
    results: dict[str, dict[str, str]] = {}
    for name, (path, how) in stores.items():
        results[name] = {}
        for way, options in (("plain", {}), ("zarr_format=3", {"zarr_format": 3})):
            try:
                found = difference(opened(path, how, **options), expected[name])
            except Exception as exc:
                found = f"{type(exc).__name__}: {exc}"
            results[name][way] = found or "identical"
    print(json.dumps(results))


if __name__ == "__main__":
    main()
