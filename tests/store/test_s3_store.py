"""migrate on an S3 API server (moto in server mode on a loopback port), through s3fs, as users'
object stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="these stores are written with zarr 3")
pytest.importorskip("s3fs", reason="object stores need s3fs (the interop extra)")
import fsspec
from support.s3 import empty_bucket, operations, tool_code
from support.stack import benchmark
from zarr.codecs import BytesCodec as ZarrBytesCodec

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.store import Replacement, Store, StoreOptions, open_store
from numcodecs_bytes.store.layout import chunk_folders
from numcodecs_bytes.store.s3_objects import S3Objects

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

BUCKET = "legacy"


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An empty bucket; fsspec's s3 settings point at the local server, credentials from the
    environment."""
    yield from empty_bucket(endpoint, monkeypatch, BUCKET)


VALUES = {
    "v3/a": np.arange(24, dtype="<i2").reshape(4, 6),
    "v3/sharded": np.arange(64, dtype="<f8").reshape(8, 8),
    "v2/c": np.arange(10, dtype="<i8"),
}


def upload_legacy_stores(fs: Any, local: Path) -> None:
    """A v3 group (an array, a sharded array, consolidated metadata) and a v2 group, renamed to
    endian."""
    group = zarr.open_group(str(local / "v3"), mode="w")
    group.create_array(
        "a",
        data=VALUES["v3/a"],
        chunks=(2, 3),
        serializer=ZarrBytesCodec(endian="big"),
        compressors=None,
    )
    group.create_array(
        "sharded",
        data=VALUES["v3/sharded"],
        chunks=(2, 2),
        shards=(4, 4),
        serializer=ZarrBytesCodec(endian="big"),
        compressors=None,
    )
    zarr.consolidate_metadata(str(local / "v3"))
    v2 = zarr.open_group(str(local / "v2"), mode="w", zarr_format=2)
    v2.create_array(
        "c",
        data=VALUES["v2/c"],
        chunks=(4,),
        filters=[BytesCodec(endian="big", dtype="<i8")],
        compressors=None,
    )
    zarr.consolidate_metadata(str(local / "v2"))
    for path in local.rglob("*"):
        if path.name in ("zarr.json", ".zarray", ".zmetadata"):
            text = (
                path.read_text()
                .replace('"name": "bytes"', '"name": "endian"')
                .replace('"id": "bytes"', '"id": "endian"')
            )
            path.write_text(text)
    for store in ("v3", "v2"):
        fs.put(str(local / store), f"{BUCKET}/{store}", recursive=True)
    fs.invalidate_cache()


def objects(fs: Any) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {path: fs.cat_file(path) for path in sorted(fs.find(BUCKET))}


def read_with_zarrs_own_codec(url: str, endpoint: str) -> dict[str, np.ndarray[Any, Any]]:
    """Open through the same URL, with zarr-python's own codec for the legacy name (which refuses
    it)."""
    options = {"endpoint_url": endpoint}
    with zarr.config.set({"codecs.endian": "zarr.codecs.bytes.BytesCodec"}):
        v3 = zarr.open_group(f"{url}/v3", mode="r", storage_options=options)
        v2 = zarr.open_group(f"{url}/v2", mode="r", storage_options=options, zarr_format=2)
        return {"v3/a": v3["a"][...], "v3/sharded": v3["sharded"][...], "v2/c": v2["c"][...]}


def test_migrate_on_an_object_store(
    s3: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_legacy_stores(s3, tmp_path)
    url = f"s3://{BUCKET}"
    before = objects(s3)
    with pytest.raises(ValueError, match="Expected 'bytes'"):
        read_with_zarrs_own_codec(url, endpoint)

    assert main(["migrate", f"{url}/v3", "--dry-run"]) == 0
    assert "dry run: 3 files would change" in capsys.readouterr().out
    assert objects(s3) == before, "a dry run changed an object"

    assert main(["migrate", f"{url}/v3", "--backup"]) == 0
    out = capsys.readouterr().out
    assert "3 files changed" in out  # zarr.json (consolidated), a/zarr.json, sharded/zarr.json
    assert main(["migrate", f"{url}/v2"]) == 0
    capsys.readouterr()
    after = objects(s3)
    for path, data in before.items():
        if path.endswith(("zarr.json", ".zarray", ".zmetadata")) and b'"endian"' in data:
            assert after[path] != data and after[path].replace(
                b'"bytes"', b'"endian"'
            ) == data.replace(b'"bytes"', b'"endian"'), path
        else:
            assert after[path] == data, f"{path} changed"
        if (
            path.startswith(f"{BUCKET}/v3/")
            and path.endswith("zarr.json")
            and b'"name": "endian"' in data
        ):
            assert after[path + ".bak"] == data
    read = read_with_zarrs_own_codec(url, endpoint)
    for name, expected in VALUES.items():
        assert np.array_equal(read[name], expected), name

    assert main(["migrate", f"{url}/v3"]) == 0
    assert "nothing to do: no legacy codec in" in capsys.readouterr().out


def test_a_broken_object_is_reported_and_the_rest_migrated(
    s3: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_legacy_stores(s3, tmp_path)
    s3.pipe_file(f"{BUCKET}/v3/a/zarr.json", b'{"zarr_format": 3, "codecs": [{"name": "endian"')
    assert main(["migrate", f"s3://{BUCKET}/v3"]) == 1
    out, err = capsys.readouterr()
    assert "failed a/zarr.json: not valid JSON" in err and "Traceback" not in err
    assert "2 files changed" in out
    assert (
        json.loads(s3.cat_file(f"{BUCKET}/v3/sharded/zarr.json"))["codecs"][0]["configuration"][
            "codecs"
        ][0]["name"]
        == "bytes"
    )


def test_no_such_bucket_is_a_usage_error(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "s3://no-such-bucket/store"]) == 2
    assert capsys.readouterr().err.startswith("numcodecs-bytes migrate: error:")


def test_credentials_and_endpoint_come_from_the_environment(
    endpoint: str, s3: Any, tmp_path: Path
) -> None:
    """As documented: AWS_* credentials and FSSPEC_S3_ENDPOINT_URL, in a fresh process."""
    upload_legacy_stores(s3, tmp_path)
    env = {**os.environ, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    result = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", "migrate", f"s3://{BUCKET}/v2", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "dry run: 2 files would change" in result.stdout


def test_to_v3_on_an_object_store(
    s3: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A consolidated v2 group with the legacy filter on S3 becomes a v3 group read by zarr's own
    codec."""
    upload_legacy_stores(s3, tmp_path)
    url = f"s3://{BUCKET}/v2"
    before = objects(s3)
    assert main(["to-v3", url, "--dry-run"]) == 0
    assert objects(s3) == before, "a dry run changed an object"
    assert main(["to-v3", url]) == 0
    assert "2 zarr.json written (1 bytes filter folded)" in capsys.readouterr().out
    after = objects(s3)
    # nothing rewritten
    assert {path: data for path, data in after.items() if path in before} == before
    assert sorted(set(after) - set(before)) == [
        f"{BUCKET}/v2/c/zarr.json",
        f"{BUCKET}/v2/zarr.json",
    ]
    v3 = zarr.open_consolidated(url, zarr_format=3, storage_options={"endpoint_url": endpoint})
    assert type(v3["c"].metadata.codecs[0]).__module__ == "zarr.codecs.bytes"
    assert np.array_equal(v3["c"][...], VALUES["v2/c"])
    assert main(["to-v3", url]) == 0  # a second run: the same documents, kept


def test_to_v3_on_an_object_store_keeps_every_node_through_a_subgroup_first_and_a_failure(
    s3: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subgroup converted first with its v2 files removed is in the root's consolidation; a node
    that fails keeps the root v2 until it is fixed (707 of 1,010 entries were consolidated on S3
    before)."""
    local = tmp_path / "v2"
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    written: dict[str, np.ndarray[Any, Any]] = {}
    for path in ("g/a", "g/b", "h/c"):
        values = np.arange(3, dtype="<i4") + len(written)
        group.create_array(
            path,
            data=values,
            chunks=(2,),
            filters=[BytesCodec(endian="big", dtype="<i4")],
            compressors=None,
        )
        written[path] = values
    zarr.consolidate_metadata(str(local))
    good = (local / "h" / "c" / ".zarray").read_text()
    (local / "h" / "c" / ".zarray").write_text("{")
    s3.put(str(local), f"{BUCKET}/v2", recursive=True)
    s3.invalidate_cache()
    url = f"s3://{BUCKET}/v2"
    assert main(["to-v3", f"{url}/g", "--remove-v2-metadata"]) == 2  # below a v2 group: refused
    assert "lies below the Zarr v2 group" in capsys.readouterr().err
    assert main(["to-v3", f"{url}/g"]) == 0
    assert main(["to-v3", url]) == 1
    assert "failed .: left as Zarr v2" in capsys.readouterr().err
    s3.invalidate_cache()
    assert not s3.exists(f"{BUCKET}/v2/zarr.json")
    s3.pipe_file(f"{BUCKET}/v2/h/c/.zarray", good.encode())
    assert main(["to-v3", url, "--remove-v2-metadata"]) == 0
    v3 = zarr.open_consolidated(url, zarr_format=3, storage_options={"endpoint_url": endpoint})
    root = json.loads(s3.cat_file(f"{BUCKET}/v2/zarr.json"))
    assert set(root["consolidated_metadata"]["metadata"]) == {"g", "h", *written}
    for path, values in written.items():
        assert np.array_equal(v3[path][...], values), path
    assert not [p for p in objects(s3) if p.rsplit("/", 1)[-1].startswith(".z")]


@pytest.mark.runs_a_benchmark
def test_the_store_tools_benchmark_runs() -> None:
    """benchmarks/store_tools.py (S3 behind a delaying proxy, then a kill and a rerun, then one
    folder's listing) keeps working: 3 arrays, 50 chunk objects."""
    script = Path(__file__).parents[2] / "benchmarks" / "store_tools.py"
    result = subprocess.run(
        [sys.executable, str(script), "--arrays", "3", "--rtt", "0.002", "--listing", "50"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "floor: list + concurrent cat" in result.stdout
    assert "the rerun exited 0" in result.stdout and "all 3 arrays read right" in result.stdout
    assert "one folder of 50 chunk objects" in result.stdout


# -- the walk: the whole store in one listing where that pays, folder by folder where not ----------


def local_tree(tmp_path: Path) -> Path:
    """A v2 hierarchy with the shapes a walk meets: groups, a folder without .zgroup, flat and
    nested chunk keys, a node in a v2 array's non-chunk folder, an empty folder."""
    root = tmp_path / "tree.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array("g/flat", data=np.arange(6, dtype="<i2"), chunks=(2,), compressors=None)
    group.create_array(
        "g/nested",
        data=np.arange(8, dtype="<i2").reshape(2, 4),
        chunks=(1, 2),
        compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    group.create_array("inner", data=np.arange(2, dtype="<i2"), chunks=(2,), compressors=None)
    (root / "inner").rename(root / "g" / "flat" / "inner")  # zarr writes no node inside an array
    zarr.create_array(
        str(root / "bare" / "x"), data=np.arange(3, dtype="<u1"), chunks=(3,), zarr_format=2
    )
    (root / "g" / "empty").mkdir()
    return root


def upload_tree(s3: Any, local: Path) -> None:
    s3.put(str(local), f"{BUCKET}/tree", recursive=True)
    s3.pipe_file(f"{BUCKET}/tree/g/empty/", b"")  # an empty folder, as S3 consoles make one


def walk_seen(
    store: Store, read: dict[str, Any] | None = None
) -> tuple[list[tuple[str, list[str], list[str]]], list[tuple[str, str]]]:
    """Each folder a walk yields (path in the store, the subfolders it enters, files), an array's
    digit folders left out as the tools leave them out; and the failures it met. With ``read``: each
    batch's metadata files read into it, as the tools do."""
    seen: list[tuple[str, list[str], list[str]]] = []
    failures: list[tuple[str, str]] = []
    walk = store.walk(dry_run=True)
    for batch in walk:
        failures += batch.problems
        for folder in batch.folders:
            left_out = (
                chunk_folders(folder.subfolders, folder.files, None)
                if ".zarray" in folder.files
                else []
            )
            walk.leave_out(folder, left_out)
            entered = [name for name in folder.subfolders if name not in left_out]
            seen.append((store.relative(folder.path), entered, list(folder.files)))
        if read is not None:
            paths = [
                f"{f.path}/{name}"
                for f in batch.folders
                for name in f.files
                if name.startswith(".z")
            ]
            read.update(
                (store.relative(path), data) for path, data in store.files.read(paths).items()
            )
    return seen, failures


def through(proxy: Any, **options: Any) -> StoreOptions:
    """Store options that reach the server through ``proxy`` (which records each request)."""
    return StoreOptions(storage_options={"endpoint_url": proxy.endpoint}, **options)


def test_a_store_of_small_nodes_is_walked_from_one_listing_as_a_local_walk_sees_it(
    s3: Any, proxy: Any, tmp_path: Path
) -> None:
    """Fewer than 1,000 keys: one request lists them all; the walk then yields what a walk of the
    same tree on a local disk yields (the oracle), and so do the reads, one GET each (a listing may
    be older than the file: no file is taken from its listed ETag)."""
    local = local_tree(tmp_path)
    upload_tree(s3, local)
    store = open_store(f"s3://{BUCKET}/tree", through(proxy))
    proxy.requests.clear()
    read: dict[str, Any] = {}
    seen, failures = walk_seen(store, read)
    local_read: dict[str, Any] = {}
    expected, _ = walk_seen(open_store(local), local_read)
    assert seen == expected and failures == []
    assert read == local_read
    # One listing; one GET per file (no HEAD before it: the listing gave each file's version).
    assert operations(proxy.requests) == {"ListObjectsV2": 1, "GetObject": len(read)}


def test_a_key_no_path_reaches_is_reported_and_the_rest_walked(s3: Any, tmp_path: Path) -> None:
    """A key with an empty folder name ("odd//a/.zarray": no Zarr path names it, and obstore refuses
    to list it) makes its folder fail with one line; the rest is walked as a local walk sees it."""
    local = local_tree(tmp_path)
    upload_tree(s3, local)
    s3.pipe_file(f"{BUCKET}/tree/odd//a/.zarray", b"{}")
    store = open_store(f"s3://{BUCKET}/tree")
    read: dict[str, Any] = {}
    seen, failures = walk_seen(store, read)
    local_read: dict[str, Any] = {}
    expected, _ = walk_seen(open_store(local), local_read)
    root, *rest = seen
    assert [(root[0], [name for name in root[1] if name != "odd"], root[2]), *rest] == expected
    [(where, problem)] = failures
    assert where == "odd" and problem.startswith("folder not read: "), failures
    assert "empty path segment" in problem and "\n" not in problem, problem
    assert read == local_read


@pytest.mark.parametrize("limit", ["nodes per page", "keys in all"])
def test_where_one_listing_does_not_pay_the_walk_lists_folder_by_folder(
    s3: Any, proxy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """A window of the listing (BATCH keys, 10 here) with fewer nodes than requests may be in flight
    (2), or a listing beyond LISTING_LIMIT keys: the walk lists each folder on its own instead, and
    sees the same."""
    from numcodecs_bytes.store import files, listing

    monkeypatch.setattr(files, "BATCH", 10)
    monkeypatch.setattr(listing, "BATCH", 10)
    local = local_tree(tmp_path)
    if limit == "nodes per page":  # an array of many chunks
        zarr.create_array(
            str(local / "g" / "many"), data=np.arange(30, dtype="<u1"), chunks=(1,), zarr_format=2
        )
    else:
        monkeypatch.setattr(listing, "LISTING_LIMIT", 20)
    upload_tree(s3, local)
    store = open_store(f"s3://{BUCKET}/tree", through(proxy, jobs=2))
    proxy.requests.clear()
    seen, failures = walk_seen(store)
    expected, _ = walk_seen(open_store(local))
    assert seen == expected and failures == []
    # a page of the whole listing, then folder by folder
    requests = operations(proxy.requests)
    assert requests["ListObjectsV2"] >= len(seen), requests


# -- concurrency: batches in flight, two runs at once, a kill mid-batch ----------------------------


@pytest.fixture(scope="module")
def slow_endpoint(endpoint: str) -> Iterator[str]:
    """The server behind a proxy that adds a 20 ms round trip: batches take long enough to overlap
    and be killed."""
    with benchmark("store_tools").delaying_proxy(int(endpoint.rsplit(":", 1)[1]), 0.02) as url:
        yield url


def tool(args: list[str], endpoint: str, lock: bool = True) -> subprocess.Popen[str]:
    """A store tool in its own process, as a user runs it, on the server at ``endpoint``
    (``lock=False``: with no lock on S3)."""
    env = {
        **os.environ,
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    command = ["-m", "numcodecs_bytes"] if lock else ["-c", tool_code(lock=False)]
    return subprocess.Popen(
        [sys.executable, *command, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def upload_v2_store(s3: Any, tmp_path: Path, arrays: int, legacy: bool = False) -> dict[str, Any]:
    """A consolidated v2 group of ``arrays`` arrays with the bytes filter (its legacy id if asked)
    on S3."""
    bench = benchmark("store_tools")
    local = tmp_path / "store.zarr"
    written: dict[str, Any] = bench.write_v2_store(local, arrays)
    if legacy:
        bench.legacy_copy(local, tmp_path / "legacy.zarr")
        local = tmp_path / "legacy.zarr"
    s3.put(str(local), f"{BUCKET}/s", recursive=True)
    s3.invalidate_cache()
    return written


def assert_converted(url: str, endpoint: str, written: dict[str, Any]) -> None:
    """Every array reads its values through the consolidated v3 root, with zarr's own codec."""
    group: Any = zarr.open_consolidated(
        url, zarr_format=3, storage_options={"endpoint_url": endpoint}
    )
    assert set(group.metadata.consolidated_metadata.metadata) == set(written)
    for name, values in written.items():
        assert np.array_equal(group[name][...], values), name


def test_two_to_v3_runs_at_once_without_a_lock_never_overwrite_each_other(
    s3: Any, endpoint: str, slow_endpoint: str, tmp_path: Path
) -> None:
    """Where no lock can be had: a zarr.json is created only where none exists (If-None-Match), so
    of two runs at once each file is written by one; what the other finds written is reported, and a
    rerun finishes."""
    written = upload_v2_store(s3, tmp_path, 40)
    url = f"s3://{BUCKET}/s"
    runs = [tool(["to-v3", url, "--jobs", "8"], slow_endpoint, lock=False) for _ in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode in (0, 1) and "Traceback" not in err, err
        for line in err.splitlines():  # all a run may meet: files the other run wrote
            assert (
                "zarr.json exists already: not overwritten" in line
                or "left as Zarr v2" in line
                or (line.startswith("note: v2 metadata kept"))
            ), line
    rerun = tool(["to-v3", url], endpoint)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert_converted(url, endpoint, written)


def test_two_migrate_runs_at_once_without_a_lock_change_each_file_once(
    s3: Any, endpoint: str, slow_endpoint: str, tmp_path: Path
) -> None:
    """Where no lock can be had: a file is replaced only while it is the version listed (If-Match),
    so the slower run leaves it."""
    upload_v2_store(s3, tmp_path, 40, legacy=True)
    url = f"s3://{BUCKET}/s"
    runs = [tool(["migrate", url, "--jobs", "8"], slow_endpoint, lock=False) for _ in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode in (0, 1) and "Traceback" not in err, err
        for line in err.splitlines():
            assert "changed by someone else meanwhile: left as it is" in line, line
    s3.invalidate_cache()
    for path in s3.find(f"{BUCKET}/s"):
        if path.endswith((".zarray", ".zmetadata")):
            text = s3.cat_file(path).decode()
            json.loads(text)
            assert '"endian"' not in text.replace('"endian": "big"', ""), path
    rerun = tool(["migrate", url], endpoint)
    out, _ = rerun.communicate(timeout=120)
    assert rerun.returncode == 0 and out.startswith("nothing to do: no legacy codec in 41 nodes"), (
        out
    )


def test_to_v3_killed_mid_batch_on_s3_then_rerun_finishes(
    s3: Any, endpoint: str, slow_endpoint: str, tmp_path: Path
) -> None:
    written = upload_v2_store(s3, tmp_path, 60)
    url = f"s3://{BUCKET}/s"
    run = tool(["to-v3", url, "--remove-v2-metadata", "--jobs", "4"], slow_endpoint)
    deadline = time.monotonic() + 120
    while True:  # killed once its batch of creates has begun
        s3.invalidate_cache()
        created = [p for p in s3.find(f"{BUCKET}/s") if p.endswith("/zarr.json")]
        if created:
            break
        assert run.poll() is None and time.monotonic() < deadline, (
            "the run ended before it could be killed"
        )
        time.sleep(0.02)
    run.kill()
    run.communicate()
    s3.invalidate_cache()
    objects_now = s3.find(f"{BUCKET}/s")
    assert 0 < sum(p.endswith("/zarr.json") for p in objects_now) < 61, "not killed mid-batch"
    # v2 readers lose nothing
    assert all(f"{BUCKET}/s/{name}/.zarray" in objects_now for name in written)
    rerun = tool(["to-v3", url, "--remove-v2-metadata"], endpoint)  # no delay needed now
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert_converted(url, endpoint, written)
    s3.invalidate_cache()
    assert not [p for p in s3.find(f"{BUCKET}/s") if p.rsplit("/", 1)[-1].startswith(".z")]


def test_object_store_writes_are_conditional(s3: Any, tmp_path: Path) -> None:
    """On S3 a create never replaces an object (If-None-Match), and a replace holds only while the
    object is the version the walk listed (If-Match), even where its bytes are what the caller
    expects."""
    upload_v2_store(s3, tmp_path, 1)
    store = open_store(f"s3://{BUCKET}/s")
    files = store.files
    zarray = f"{store.root}/a00000/.zarray"
    before = s3.cat_file(zarray)
    assert isinstance(files.create({zarray: b"{}"})[zarray], FileExistsError)
    assert s3.cat_file(zarray) == before
    for _ in store.walk(dry_run=True):  # the listing: the versions a replace must find
        pass
    s3.pipe_file(zarray, before + b" ")  # another writer
    failures = files.replace([Replacement(zarray, b"{}", before + b" ")])
    assert "changed by someone else" in str(failures[zarray])
    assert s3.cat_file(zarray) == before + b" "


def test_files_and_versions_from_one_listing_are_files_below_and_versions(
    s3: Any, proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3's one listing per folder says what `files_below` and `versions` say: nested keys, a key a
    tool made as a folder (an empty object, listed by obstore without its "/"), a path below none
    of the folders, a missing one, a folder that is not there. With ranges of three names, the
    folder is listed range by range, the ranges at once, and says the same."""
    chunks = [f"a/{i}" for i in range(12)]
    for key in (*chunks, "a/c/0/1", "a/.zarray", "b/x", "lone"):
        s3.pipe_file(f"{BUCKET}/s/{key}", key.encode())
    s3.pipe_file(f"{BUCKET}/s/a/made-as-a-folder/", b"")
    s3.pipe_file(f"{BUCKET}/s/.zgroup", b'{"zarr_format": 2}')
    store = open_store(f"s3://{BUCKET}/s")
    files = store.files
    assert isinstance(files, S3Objects)
    folders = [f"{BUCKET}/s/a", f"{BUCKET}/s/none"]
    paths = [f"{BUCKET}/s/{key}" for key in (*chunks, "a/c/0/1", "a/gone", "b/x", "lone")]
    everything = sorted(["c/0/1", ".zarray", "made-as-a-folder", *(c[2:] for c in chunks)])
    truth = files.versions(paths)
    assert truth[f"{BUCKET}/s/a/gone"] is None
    assert truth[f"{BUCKET}/s/lone"] == s3.info(f"{BUCKET}/s/lone")["ETag"]
    assert files.files_below(folders) == {f"{BUCKET}/s/a": everything, f"{BUCKET}/s/none": []}
    listed, versions = store.packing.files_and_versions(folders, paths)
    assert versions == truth
    assert listed == {f"{BUCKET}/s/a": everything, f"{BUCKET}/s/none": []}

    from numcodecs_bytes.store import s3_objects

    monkeypatch.setattr(s3_objects, "LIST_PAGE", 3)
    packing = open_store(f"s3://{BUCKET}/s", through(proxy)).packing
    proxy.requests.clear()
    listed, versions = packing.files_and_versions(folders, paths)
    assert versions == truth
    assert listed == {f"{BUCKET}/s/a": everything, f"{BUCKET}/s/none": []}
    # folder a's 14 names wanted (its 13 objects' and a missing one's) in 7 ranges of 2, each
    # bounded by a name wanted; folder "none" in one
    starts = [key for method, key in proxy.requests if "list-type" in key and "s/a/" in key]
    assert len(starts) == 7 and len([k for k in starts if "start-after" in k]) == 6, starts


def test_chunk_objects_a_listing_page_does_not_reach_are_asked_of_by_one_head_each(
    s3: Any, proxy: Any
) -> None:
    """What a pack copies from (`s3_copy`): a range of chunk names listed, at most a page per
    hundred names, and the names the page did not reach asked of by one HEAD each (a missing one
    too), with the answers S3 gives each object."""
    from numcodecs_bytes.store import s3_copy

    s3.pipe_file(f"{BUCKET}/s/.zgroup", b'{"zarr_format": 2}')
    names = [*(str(i) for i in range(6)), "gone"]
    s3.pipe({f"{BUCKET}/s/a/{name}": name.encode() * (1 + int(name)) for name in names[:-1]})
    # 1,100 keys between "1" and "2": the one page listed (1,000 keys) stops before "2"
    s3.pipe({f"{BUCKET}/s/a/1x{i:04}": b"x" for i in range(1100)})
    files = open_store(f"s3://{BUCKET}/s", through(proxy)).files
    assert isinstance(files, S3Objects)
    proxy.requests.clear()
    found = files.run({"": s3_copy._listed(files, f"{BUCKET}/s/a", names)})[""]
    truth = {name: (s3.info(f"{BUCKET}/s/a/{name}")["ETag"], 1 + int(name)) for name in names[:-1]}
    assert found == {**truth, "gone": None}
    asked = proxy.requests
    heads = sorted(key for method, key in asked if method == "HEAD")
    assert heads == sorted(f"{BUCKET}/s/a/{name}" for name in names[2:]), asked
    assert operations(asked) == {"ListObjectsV2": 1, "HeadObject": 5}, asked


def test_opening_a_store_asks_of_each_node_file_above_it_once(
    s3: Any, proxy: Any, tmp_path: Path
) -> None:
    """Whether the folder above a store is a Zarr node (where runs lock it) is one HEAD per node
    file: no listing of each name as a folder after a HEAD that found nothing. A node above is found
    the same way. The store's own folder is listed once."""
    from numcodecs_bytes.store.layout import NODE_FILES

    upload_v2_store(s3, tmp_path, 1)
    options = StoreOptions(storage_options={"endpoint_url": proxy.endpoint})
    assert open_store(f"s3://{BUCKET}/s", options).top == f"{BUCKET}/s"
    asked = proxy.requests
    heads = sorted(key for method, key in asked if method == "HEAD")
    assert heads == sorted(f"{BUCKET}/{name}" for name in NODE_FILES), asked
    assert not [key for _, key in asked if "max-keys=1" in key], asked
    # the store's folder listed once: whether it is one, and the names in it
    assert len([key for _, key in asked if "delimiter=/" in key]) == 1, asked
    s3.pipe_file(f"{BUCKET}/.zgroup", b'{"zarr_format": 2}')
    assert open_store(f"s3://{BUCKET}/s", options).top == BUCKET


def test_storage_options_and_jobs_from_the_command_line(
    s3: Any,
    endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    upload_v2_store(s3, tmp_path, 3, legacy=True)
    monkeypatch.setitem(fsspec.config.conf, "s3", {})  # the endpoint comes from the option alone
    monkeypatch.delenv("FSSPEC_S3_ENDPOINT_URL", raising=False)
    url = f"s3://{BUCKET}/s"
    assert (
        main(["migrate", url, "--jobs", "1", "--storage-option", f"endpoint_url={endpoint}"]) == 0
    )
    assert capsys.readouterr().out.startswith("4 files changed (6 codecs) in 4 nodes")
    with pytest.raises(SystemExit) as usage:
        main(["migrate", url, "--storage-option", "endpoint_url"])
    assert (
        usage.value.code == 2 and "must be KEY=VALUE, got 'endpoint_url'" in capsys.readouterr().err
    )


@pytest.mark.parametrize("left", [None, "another object"])
def test_a_shard_through_the_client_in_parts_is_copied_into_place_where_none_is(
    s3: Any, monkeypatch: pytest.MonkeyPatch, left: str | None
) -> None:
    """The client's way of packing a shard too large for one PUT (S3 takes it where a chunk's
    listing failed): a multipart upload to a temporary object, which S3 copies into place only
    where no object is (a multipart copy completed with ``If-None-Match``, obstore's
    ``copy_if_not_exists``); an interrupted run's object there replaced while it is the version
    found (``If-Match`` on its removal). Packed again, the shard is left as it is; no temporary
    object stays."""
    from numcodecs_bytes.store import object_packing
    from numcodecs_bytes.store.files import TEMP_SUFFIX
    from numcodecs_bytes.store.object_packing import ObjectPacking
    from numcodecs_bytes.store.shard_format import Packed, Shard, shard_index

    monkeypatch.setattr(object_packing, "WHOLE_SHARD_BYTES", 1000)
    monkeypatch.setattr(object_packing, "PART_BYTES", 5 * 2**20)  # S3's smallest part
    chunks = {f"{BUCKET}/s/a/{i}": bytes([i]) * (2 * 2**20 + i) for i in range(4)}
    s3.pipe_file(f"{BUCKET}/s/.zgroup", b'{"zarr_format": 2}')
    s3.pipe(chunks)
    target = f"{BUCKET}/s/a/c/0"
    if left is not None:
        s3.pipe_file(target, b"left by an interrupted run")
    files = open_store(f"s3://{BUCKET}/s").files
    assert isinstance(files, S3Objects)
    shard = Shard(target, tuple(chunks))
    [first] = ObjectPacking(files).pack([shard]).values()
    s3.invalidate_cache()
    placed = s3.info(target)
    [again] = ObjectPacking(files).pack([shard]).values()
    assert isinstance(first, Packed) and isinstance(again, Packed), (first, again)
    assert first.written and not again.written
    sizes = tuple(len(data) for data in chunks.values())
    assert s3.cat_file(target) == b"".join(chunks.values()) + shard_index(sizes)
    s3.invalidate_cache()
    assert s3.info(target)["ETag"] == placed["ETag"]
    assert not [key for key in s3.find(f"{BUCKET}/s") if key.endswith(TEMP_SUFFIX)]
