"""Zarr v2 stores as xarray writes them: the kinds of data xarray users keep in Zarr v2.

``write_stores(root)`` writes one store per kind with the installed xarray and
zarr (zarr 3 with ``zarr_format=2``, or zarr 2.18): CF-encoded integers with
scale, offset and ``_FillValue``, float fills, NaN, bool, times with NaT,
timedeltas, fixed-width and object strings and bytes, dask chunks, each
compressor, numcodecs filters and this package's, appends, region writes,
DataTree groups, zero-size and 0-d variables, consolidated or not. It returns
each store's path and how it opens (``"dataset"`` or ``"tree"``). The tests
convert each and compare with the v2 open (tests/integration/test_to_v3_xarray.py);
tests/make_xarray_zarr218_fixtures.py runs it under zarr 2.18.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pandas as pd
import xarray as xr
import zarr

from numcodecs_bytes import BytesCodec

ZARR2 = zarr.__version__.startswith("2.")


def compressed(codec: Any) -> dict[str, Any]:
    """An encoding's compressor, as the installed zarr spells it."""
    if ZARR2:
        return {"compressor": codec}
    return {"compressors": None if codec is None else [codec]}


def base(n: int = 6) -> xr.Dataset:
    """A small dataset with the coordinates xarray users have: times, an integer axis, string
    labels."""
    time = pd.date_range("2000-01-01", periods=n, freq="D")
    return xr.Dataset(
        {
            "temp": (("time", "x"), np.linspace(260.0, 300.0, n * 4).reshape(n, 4), {"units": "K"}),
            "count": (("time",), np.arange(n, dtype="int32")),
        },
        coords={
            "time": time,
            "x": np.arange(4, dtype="int64"),
            "name": ("x", ["a", "bb", "ccc", "dd"]),
        },
        attrs={"title": "corpus", "history": "written by xarray"},
    )


def masked(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    ds["temp"] = ds.temp.where(ds.temp < 290)  # NaN where masked
    return ds


def kinds() -> dict[str, Callable[[Path], str]]:
    """Each kind of store: a function writing it at a path, returning how it opens."""

    def dataset(make: Callable[[], xr.Dataset], **to_zarr: Any) -> Callable[[Path], str]:
        def write(path: Path) -> str:
            make().to_zarr(path, zarr_format=2, **to_zarr)
            return "dataset"

        return write

    def appended(path: Path) -> str:
        ds = base()
        ds.isel(time=slice(0, 3)).to_zarr(path, zarr_format=2, mode="w")
        ds.isel(time=slice(3, 6)).to_zarr(path, zarr_format=2, append_dim="time")
        return "dataset"

    def region(path: Path) -> str:
        ds = masked(base()).chunk({"time": 2})
        ds.to_zarr(path, zarr_format=2, compute=False, encoding={"temp": {"_FillValue": -999.0}})
        for start in (0, 2):  # the last chunk is never written: it reads as the fill value, masked
            part = ds.isel(time=slice(start, start + 2)).drop_vars(["x", "name"])
            part.to_zarr(path, zarr_format=2, region={"time": slice(start, start + 2)})
        return "dataset"

    def tree(path: Path) -> str:
        child = xr.Dataset(
            {"v": (("y",), np.arange(3.0))}, coords={"y": [10, 20, 30]}, attrs={"level": 1}
        )
        grandchild = xr.Dataset(
            {"w": (("z",), np.array([1, -1], dtype="int16"))}, coords={"z": [0, 1]}
        )
        xr.DataTree.from_dict({"/": base(), "/child": child, "/child/deeper": grandchild}).to_zarr(
            path, zarr_format=2
        )
        return "tree"

    def cf_int16() -> xr.Dataset:
        return masked(base())

    def with_vars(**variables: Any) -> Callable[[], xr.Dataset]:
        def make() -> xr.Dataset:
            return base().assign(**variables)

        return make

    times_with_nat = pd.to_datetime(
        ["2000-01-01", None, "2000-01-03", None, "2000-01-05", "2000-01-06"]
    )
    object_strings = np.array(["x", "yy", "", "zzz", "w", "v"], dtype=object)
    object_bytes = np.array([b"x", b"yy", b"", b"zzz", b"w", b"v"], dtype=object)
    gzip, zstd = numcodecs.GZip(level=1), numcodecs.Zstd(level=1)
    return {
        "plain": dataset(base),
        "unconsolidated": dataset(base, consolidated=False),
        "nan": dataset(lambda: masked(base())),
        "float_fill": dataset(lambda: masked(base()), encoding={"temp": {"_FillValue": -1e20}}),
        "float32_fill": dataset(
            lambda: masked(base()),
            encoding={"temp": {"dtype": "float32", "_FillValue": np.float32(-999.5)}},
        ),
        "cf_int16": dataset(
            cf_int16,
            encoding={
                "temp": {
                    "dtype": "int16",
                    "scale_factor": 0.01,
                    "add_offset": 280.0,
                    "_FillValue": -9999,
                }
            },
        ),
        "int_fill": dataset(base, encoding={"count": {"_FillValue": -1}}),
        "bool": dataset(
            with_vars(flag=("time", np.array([True, False, False, True, True, False])))
        ),
        "times_nat": dataset(with_vars(when=("time", times_with_nat))),
        "timedelta": dataset(with_vars(lag=("time", pd.to_timedelta(np.arange(6), "h")))),
        "bytes_fixed": dataset(with_vars(code=("x", np.array([b"a", b"bb", b"c", b""])))),
        "unicode_fixed": dataset(
            with_vars(label=("x", np.array(["a", "bb", "c", ""], dtype="<U2"))),
            encoding={"label": {"dtype": "<U2"}},
        ),
        "object_strings": dataset(with_vars(note=("time", object_strings))),
        "object_bytes": dataset(with_vars(blob=("time", object_bytes))),
        "complex": dataset(
            with_vars(wave=("x", np.array([1 + 2j, -1j, 0, 3.5]))), encoding={"wave": {}}
        ),
        "scalar": dataset(
            with_vars(crs=((), np.int32(4326), {"grid_mapping_name": "latitude_longitude"}))
        ),
        "zero_size": dataset(
            with_vars(
                nothing=(("empty",), np.zeros(0, "float64")),
                nothing2d=(("empty", "x"), np.zeros((0, 4))),
            )
        ),
        "dask": dataset(lambda: masked(base()).chunk({"time": 2, "x": 2})),
        "gzip": dataset(base, encoding={"temp": compressed(gzip), "count": compressed(gzip)}),
        "zstd": dataset(base, encoding={"temp": compressed(zstd), "count": compressed(zstd)}),
        "uncompressed": dataset(
            base, encoding={"temp": compressed(None), "count": compressed(None)}
        ),
        "delta": dataset(base, encoding={"count": {"filters": [numcodecs.Delta(dtype="<i4")]}}),
        "scale_offset": dataset(
            base,
            encoding={
                "temp": {
                    "filters": [
                        numcodecs.FixedScaleOffset(offset=280, scale=10, dtype="<f8", astype="<i4")
                    ]
                }
            },
        ),
        "quantize": dataset(
            lambda: masked(base()), encoding={"temp": {"filters": [numcodecs.Quantize(3, "<f8")]}}
        ),
        "bytes_filter": dataset(
            lambda: masked(base()),
            encoding={"temp": {"filters": [BytesCodec(endian="big", dtype="<f8")]}},
        ),
        "delta_then_bytes_filter": dataset(
            base,
            encoding={
                "count": {
                    "filters": [numcodecs.Delta(dtype="<i4"), BytesCodec(endian="big", dtype="<i4")]
                }
            },
        ),
        "appended": appended,
        "region": region,
        "tree": tree,
    }


def by_hand(path: Path, attributes: dict[str, dict[str, Any]]) -> None:
    """Attributes set on a store's arrays by hand, as netCDF users copy theirs
    (``z.attrs.update(ncvar.__dict__)``), and the store consolidated again."""
    group = zarr.open_group(str(path), mode="r+", zarr_format=2)
    for name, attrs in attributes.items():
        group[name].attrs.update(attrs)
    zarr.consolidate_metadata(str(path), zarr_format=2)


def other_writers() -> dict[str, Callable[[Path], str]]:
    """Stores xarray reads that other writers made: attributes set by hand, zarr's own fill values,
    NCZarr.

    Only for the installed zarr 3 (they are written at test time). NCZarr's stores are committed, as
    netCDF-C wrote them (tests/make_nczarr_fixtures.py).
    """

    def netcdf_attributes(path: Path) -> str:
        ds = base().assign(
            level=("time", np.array([0, -32768, 3, 4, 5, 6], dtype="int16")),
            pressure=(
                "time",
                np.array([1000.0, -9999.0, 990.0, 980.0, 970.0, 960.0], dtype="float32"),
            ),
        )
        ds.to_zarr(
            path,
            zarr_format=2,
            encoding={"level": {"_FillValue": 0}, "pressure": {"_FillValue": None}},
        )
        by_hand(
            path,
            {
                # beside zarr's fill value 0, which xarray masks with on v2
                "level": {"_FillValue": -32768},
                # a number; the fill value is null: xarray masks with it
                "pressure": {"_FillValue": -9999},
                "temp": {"_FillValue": -1.0},  # beside the fill value NaN
                "count": {"_FillValue": None},  # null: masks nothing
            },
        )
        return "dataset"

    def fixed_strings_zarr_fill(path: Path) -> str:
        base().to_zarr(path, zarr_format=2)
        group = zarr.open_group(str(path), mode="r+", zarr_format=2)
        for name, dtype in (("label", "<U5"), ("code", "|S5")):  # zarr's default fill value: ""
            array = group.create_array(name, shape=(4,), dtype=dtype, chunks=(4,))
            array[:] = np.array(["ab", "c", "def", "g"], dtype=dtype)
            array.attrs["_ARRAY_DIMENSIONS"] = ["x"]
        zarr.consolidate_metadata(str(path), zarr_format=2)
        return "dataset"

    def attributes_only_in_zmetadata(path: Path) -> str:
        base().to_zarr(path, zarr_format=2)
        # deleted, or never uploaded: xarray reads .zmetadata's copy
        (path / "temp" / ".zattrs").unlink()
        return "dataset"

    def fixture(name: str) -> Callable[[Path], str]:
        def copy(path: Path) -> str:
            shutil.copytree(
                Path(__file__).parents[1] / "fixtures" / "nczarr" / f"{name}.zarr", path
            )
            return "dataset"

        return copy

    return {
        "netcdf_attributes": netcdf_attributes,
        "fixed_strings_zarr_fill": fixed_strings_zarr_fill,
        "nczarr": fixture("nczarr"),
        "nczarr_v1": fixture("nczarr_v1"),
        "attributes_only_in_zmetadata": attributes_only_in_zmetadata,
    }


NEEDS = {"delta_then_bytes_filter": (3, 4)}
"""The zarr-python release from which a kind converts: before it, zarr reads it wrong and to-v3
refuses it."""


Kinds = Callable[[], dict[str, Callable[[Path], str]]]


def write_stores(root: Path, which: Kinds = kinds) -> dict[str, tuple[Path, str]]:
    """Every kind (of ``which``) as a store under ``root``: name -> (path, "dataset" or "tree")."""
    written = {}
    root.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # zarr's and xarray's own warnings about v2 and unstable data types
        warnings.simplefilter("ignore")
        for name, write in which().items():
            path = root / f"{name}.zarr"
            shutil.rmtree(path, ignore_errors=True)
            written[name] = (path, write(path))
    return written


def open_store(path: Path, how: str, **options: Any) -> Any:
    """A store opened as xarray users open it, loaded, without its encodings (what `identical`
    compares)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "tree":
            return (
                xr.open_datatree(path, engine="zarr", **options)
                .load()
                .map_over_datasets(lambda ds: ds.drop_encoding())
            )
        return xr.open_zarr(path, **options).load().drop_encoding()
