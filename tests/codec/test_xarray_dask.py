"""The codec under xarray, and under dask on a real multi-process cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

from numcodecs_bytes import BytesCodec

pytest.importorskip("zarr", minversion="3", reason="these tests use the zarr 3 API")

from numcodecs_bytes.to_v3 import UnconvertibleError, v3_encoding

# -- xarray ----------------------------------------------------------------------------------------

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do


def write_v2_dataset(path: Path) -> Any:
    """A dataset written to a Zarr v2 store with the codec as filter (of every variable but x); the
    dataset."""
    xr = pytest.importorskip("xarray")
    time = np.arange("2024-01-01", "2024-01-11", dtype="datetime64[D]").astype("datetime64[ns]")
    ds = xr.Dataset(
        {
            "temperature": (("time", "x"), np.linspace(-5, 30, 40).reshape(10, 4)),
            "count": (("time", "x"), np.arange(40, dtype="<i4").reshape(10, 4) * 1000),
            "seen": ("time", time + np.timedelta64(90, "m")),
        },
        coords={"time": time, "x": [10, 20, 30, 40]},
    )
    # xarray stores datetimes CF-encoded, as int64 counts: the filter serves the stored dtype.
    encoding = {
        "temperature": {"filters": [BytesCodec(endian="big", dtype="<f8")], "chunks": (4, 4)},
        "count": {
            "filters": [BytesCodec(endian="big", dtype="<i4")],
            "chunks": (4, 2),
            "compressors": None,
        },
        "seen": {
            "filters": [numcodecs.Delta(dtype="<i8"), BytesCodec(endian="little", dtype="<i8")],
            "dtype": "int64",
            "compressors": [numcodecs.GZip(level=1)],
        },
    }
    ds.to_zarr(path, zarr_format=2, encoding=encoding, consolidated=True)
    return ds


def test_xarray_dataset_round_trips_with_the_codec_as_filter(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    ds = write_v2_dataset(tmp_path / "ds.zarr")
    back = xr.open_zarr(tmp_path / "ds.zarr", consolidated=True).load()
    xr.testing.assert_identical(back, ds)
    stored = json.loads((tmp_path / "ds.zarr" / "count" / ".zarray").read_text())
    assert stored["filters"] == [{"id": "bytes", "endian": "big", "dtype": "<i4"}]
    assert stored["compressor"] is None
    raw = (tmp_path / "ds.zarr" / "count" / "0.0").read_bytes()  # uncompressed: the spec's bytes
    assert raw == ds["count"].values[:4, :2].astype(">i4").tobytes()


# Delta
@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3 specification")
def test_a_dataset_from_a_v2_store_saves_as_v3_with_v3_encoding(tmp_path: Path) -> None:
    """xarray keeps the v2 codecs in the encoding, which zarr refuses for v3 (zarr-python #2964,
    xarray #10032)."""
    xr = pytest.importorskip("xarray")
    ds = write_v2_dataset(tmp_path / "v2.zarr")
    old = xr.open_zarr(tmp_path / "v2.zarr")
    with pytest.raises(TypeError, match=r"Expected an? (ArrayArrayCodec|BytesBytesCodec)"):
        old.to_zarr(tmp_path / "refused.zarr", zarr_format=3)

    encoding = {name: v3_encoding(variable.encoding) for name, variable in old.variables.items()}
    old.to_zarr(tmp_path / "v3.zarr", zarr_format=3, encoding=encoding)
    # Read with zarr's own codec classes: nothing of this package is needed to read the result.
    with zarr.config.set({"codecs.bytes": "zarr.codecs.bytes.BytesCodec"}):
        xr.testing.assert_identical(xr.open_zarr(tmp_path / "v3.zarr").load(), ds)
    codecs = {
        name: json.loads((tmp_path / "v3.zarr" / name / "zarr.json").read_text())["codecs"]
        for name in ("temperature", "count", "seen", "x")
    }
    assert codecs["temperature"][0] == {"name": "bytes", "configuration": {"endian": "big"}}
    assert codecs["temperature"][1]["name"] == "blosc"  # xarray's default, as v2 wrote it
    assert codecs["count"] == [{"name": "bytes", "configuration": {"endian": "big"}}]
    assert [c["name"] for c in codecs["seen"]] == ["numcodecs.delta", "bytes", "gzip"]
    assert codecs["seen"][1]["configuration"] == {"endian": "little"}
    # no filter: zarr's default
    assert codecs["x"][0] == {"name": "bytes", "configuration": {"endian": "little"}}


def test_v3_encoding_refuses_the_codec_before_another_filter() -> None:
    encoding = {
        "dtype": np.dtype("<i4"),
        "filters": (BytesCodec(endian="big", dtype="<i4"), numcodecs.Delta("<i4")),
    }
    with pytest.raises(
        UnconvertibleError, match=r"filters\[0\] is the bytes codec but not the last filter"
    ):
        v3_encoding(encoding)
    assert v3_encoding({"dtype": np.dtype("<i4"), "chunks": (2,)}) == {
        "dtype": np.dtype("<i4"),
        "chunks": (2,),
        "filters": None,
    }


# -- dask on a multi-process cluster ---------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    distributed = pytest.importorskip(
        "distributed", reason="distributed is not installed (the interop extra)"
    )
    with (
        distributed.LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_dask_store_and_compute_on_a_process_cluster(tmp_path: Path, client: Any) -> None:
    da = pytest.importorskip("dask.array")
    source = da.random.default_rng(42).standard_normal((400, 300), chunks=(100, 100)).astype("<f4")
    path = str(tmp_path / "big.zarr")
    target = zarr.create_array(
        store=path,
        shape=source.shape,
        chunks=(100, 100),
        dtype="<f4",
        zarr_format=2,
        filters=[BytesCodec(endian="big", dtype="<f4")],
        compressors=None,
    )
    # The zarr array, codec included, is pickled to the worker processes.
    da.store(source, target, lock=False)

    stored = da.from_zarr(path)  # workers open the array and resolve the codec by its id
    assert float((stored - source).__abs__().max().compute()) == 0.0
    assert np.isclose(float(stored.mean().compute()), float(source.mean().compute()))
    workers = client.run(lambda: __import__("sys").modules.get("numcodecs_bytes") is not None)
    assert len(workers) == 2 and all(workers.values()), "the codec did not run on every worker"
    raw = Path(path, "0.0").read_bytes()
    assert raw == source[:100, :100].compute().astype(">f4").tobytes()


def test_workers_unpickle_the_codec_and_resolve_both_ids(client: Any) -> None:
    codec = BytesCodec(endian="big", dtype="<i2")

    def on_worker(c: BytesCodec) -> tuple[bytes, bool, bool]:
        import numcodecs

        legacy = numcodecs.get_codec({"id": "endian", "endian": "big", "dtype": "<i2"})
        current = numcodecs.get_codec({"id": "bytes", "endian": "big", "dtype": "<i2"})
        return bytes(c.encode(np.array([1, 2], "<i2"))), legacy == c, current == c

    results = client.gather(
        [
            client.submit(on_worker, codec, pure=False, workers=[w])
            for w in client.scheduler_info()["workers"]
        ]
    )
    assert results == [(b"\x00\x01\x00\x02", True, True)] * 2
