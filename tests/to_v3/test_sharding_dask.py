"""to-v3 --shard-size on a dask cluster: a `LocalCluster` of two worker processes packs the shards,
on a local folder (which the workers see at the same path) and on S3 (moto); the run's caller checks
and switches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
pytest.importorskip("distributed", reason="dask clusters need distributed (the interop extra)")
from support.s3 import CREDENTIALS
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes.cli import main
from numcodecs_bytes.to_v3 import convert_store

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do
distributed: Any = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two worker processes, one thread each; they take moto's credentials from the environment they
    start in."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in CREDENTIALS.items():
            patch.setenv(key, value)
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as running:
            yield running


def write_store(root: Path | str, **options: Any) -> dict[str, np.ndarray[Any, Any]]:
    group = zarr.open_group(str(root), mode="w", zarr_format=2, **options)
    expected = {}
    for i in range(3):
        data = np.arange(600, dtype="<f8").reshape(20, 30) * (i + 1)
        group.create_array(f"a{i}", shape=data.shape, chunks=(4, 5), dtype="<f8")[...] = data
        expected[f"a{i}"] = data
    return expected


def test_a_cluster_packs_the_shards_of_a_local_store(cluster: Any, tmp_path: Path) -> None:
    root = tmp_path / "s.zarr"
    expected = write_store(root)
    before = zarr_reads(root, 2)
    with distributed.Client(cluster) as client, distributed.get_task_stream(client) as tasks:
        report = convert_store(
            root, shard_size=4 * 5 * 8 * 6, client=client, remove_v2_metadata=True
        )
    assert report.failures == [] and sorted(report.sharded) == ["a0", "a1", "a2"]
    assert report.shards == 3 * 5 * 1 and report.chunks_packed == 3 * 30  # 5x6 chunks, 6 per shard
    packed_there = [task for task in tasks.data if "_pack_task" in str(task["key"])]
    assert len(packed_there) == 4  # the three arrays' 15 shards in one round, four shards a task
    assert zarr_reads(root, 3) == before
    assert sorted(p.name for p in (root / "a0").iterdir()) == ["c", "zarr.json"]
    for name, data in expected.items():
        assert (
            zarr.open_array(str(root / name), mode="r", zarr_format=3)[...].tolist()
            == data.tolist()
        )


def test_the_command_line_packs_on_a_scheduler_for_an_object_store(
    cluster: Any,
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("s3fs", reason="object stores need s3fs (the interop extra)")
    from support.s3 import empty_bucket

    s3 = next(empty_bucket(endpoint, monkeypatch, "dask"))
    local = tmp_path / "s.zarr"
    write_store(local)
    s3.put(str(local), "dask/s", recursive=True)
    url = "s3://dask/s"
    before = zarr_reads(url, 2, endpoint)
    code = main(
        [
            "to-v3",
            url,
            "--storage-option",
            f"endpoint_url={endpoint}",
            "--shard-size",
            "1KiB",
            "--scheduler",
            cluster.scheduler_address,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "3 arrays sharded (15 shards, 90 chunks" in out, out
    assert zarr_reads(url, 3, endpoint) == before


@pytest.mark.same_on_every_stack
def test_the_command_line_packs_on_a_scheduler_for_azure(
    cluster: Any,
    azurite: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Azure through obstore on the cluster: each worker opens the store from the URL and the
    options given (the connection string travels with them: the workers' environment has none)."""
    from support.azure import connection_string, empty_container, upload, zarr_store

    container = empty_container(azurite, "dask", monkeypatch)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    local = tmp_path / "s.zarr"
    expected = write_store(local)
    upload(container, local, "s")
    code = main(
        [
            "to-v3",
            "az://dask/s",
            "--storage-option",
            f"connection_string={connection_string(azurite)}",
            "--shard-size",
            "1KiB",
            "--remove-v2-metadata",
            "--scheduler",
            cluster.scheduler_address,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "3 arrays sharded (15 shards, 90 chunks" in out, out
    group = zarr.open_group(zarr_store(azurite, "dask", "s"), mode="r", zarr_format=3)
    for name, data in expected.items():
        assert group[name][...].tolist() == data.tolist()
