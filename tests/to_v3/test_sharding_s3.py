"""to-v3 --shard-size on S3 (moto on a loopback port) behind the fault-injecting proxy: errors,
resets, truncated bodies, answers lost after the server acted, a writer between a chunk's read and
the switch.

The oracle is zarr-python in a fresh interpreter: what it reads from the v2 store before, it reads
from the sharded v3 store after (or the run reports the array and it reads as before).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="these stores are written with zarr 3")
pytest.importorskip("s3fs", reason="object stores need s3fs (the interop extra)")
from support.s3 import Fault, FaultProxy, empty_bucket
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main

# S3's locks, leases and conditional writes around packing: s3fs's, aiobotocore's and moto's, the
# same versions on the main and newest stacks: run once, on the main stack (.ci/run)
pytestmark = pytest.mark.same_on_every_stack

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

BUCKET = "sharding"
URL = f"s3://{BUCKET}/s"
ARRAYS = 4
CHUNKS = 8  # per array, of 4 int32: shards of two chunks with --shard-size 32


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from empty_bucket(endpoint, monkeypatch, BUCKET)


def upload(s3: Any, tmp_path: Path, one_chunk: tuple[str, ...] = ()) -> None:
    """Four arrays of 8 chunks (one missing in a001), this package's big-endian filter, and the
    arrays of one chunk named, consolidated."""
    local = tmp_path / "store.zarr"
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    for i in range(ARRAYS):
        array = group.create_array(
            f"a{i:03d}",
            shape=(4 * CHUNKS,),
            chunks=(4,),
            dtype="<i4",
            fill_value=-1,
            filters=[BytesCodec(endian="big", dtype="<i4")],
        )
        array[...] = np.arange(4 * CHUNKS, dtype="<i4") + 256 * i
    (local / "a001" / "5").unlink()
    for name in one_chunk:
        group.create_array(name, data=np.arange(4, dtype="<i4"), chunks=(4,))
    zarr.consolidate_metadata(str(local))
    s3.put(str(local), f"{BUCKET}/s", recursive=True)
    s3.invalidate_cache()


def run(
    proxy: FaultProxy, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, str, str]:
    code = main(
        [
            "to-v3",
            URL,
            "--storage-option",
            f"endpoint_url={proxy.endpoint}",
            "--shard-size",
            "32B",
            *options,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def keys(s3: Any) -> list[str]:
    s3.invalidate_cache()
    return sorted(path.removeprefix(f"{BUCKET}/s/") for path in s3.find(f"{BUCKET}/s"))


def codec_of(s3: Any, array: str) -> str:
    return str(json.loads(s3.cat_file(f"{BUCKET}/s/{array}/zarr.json"))["codecs"][0]["name"])


@pytest.mark.parametrize("removing", [False, True], ids=["v2 kept", "v2 removed"])
def test_failing_requests_are_retried_and_every_array_is_sharded(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    removing: bool,
) -> None:
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    proxy.add(
        Fault("error", "GET", r"a000/3$", times=2, status=503),  # a chunk read for a shard
        Fault("reset", "GET", r"a001/6$"),
        Fault("truncate", "GET", r"a002/7$"),
        Fault("error", "PUT", r"a000/c/1$", status=503),  # a shard written
        Fault("reset", "PUT", r"a001/c/2$"),
        # the server wrote it; the retry is refused (If-None-Match), and fine
        Fault("lost", "PUT", r"a002/c/0$"),
        # removing: the server removed it; the retry finds nothing
        Fault("lost", "DELETE", r"a003/1$"),
    )
    code, out, err = run(proxy, capsys, *(["--remove-v2-metadata"] if removing else []))
    assert code == 0 and "failed" not in err, err
    assert f"{ARRAYS} arrays sharded ({4 * ARRAYS} shards, {CHUNKS * ARRAYS - 1} chunks" in out, out
    hit = [fault.hits == fault.times for fault in proxy.faults]
    assert all(hit[:-1]) and hit[-1] == removing, [(f.action, f.key, f.hits) for f in proxy.faults]
    assert zarr_reads(URL, 3, endpoint) == before
    for i in range(ARRAYS):
        assert codec_of(s3, f"a{i:03d}") == "sharding_indexed"
    root = json.loads(s3.cat_file(f"{BUCKET}/s/zarr.json"))
    assert (
        root["consolidated_metadata"]["metadata"]["a000"]["codecs"][0]["name"] == "sharding_indexed"
    )
    chunk_keys = [key for key in keys(s3) if key.rsplit("/", 1)[-1].isdigit() and "/c/" not in key]
    assert len(chunk_keys) == (0 if removing else CHUNKS * ARRAYS - 1)
    assert not [key for key in keys(s3) if "numcodecs-bytes" in key]
    if not removing:
        assert zarr_reads(URL, 2, endpoint) == before  # v2 readers keep theirs


def test_a_chunk_written_between_its_read_and_the_switch_keeps_its_array_unsharded(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A v2 writer rewrites a002's chunk 6 after it was packed (just before its shard is written):
    the ETag check before the switch sees it; a002 is reported, reads its chunk files as v3 and as
    v2, and keeps them."""
    upload(s3, tmp_path)

    def writer() -> None:
        array = zarr.open_array(
            f"{URL}/a002", mode="r+", zarr_format=2, storage_options={"endpoint_url": endpoint}
        )
        array[24] = 99

    proxy.add(Fault("before", "PUT", r"a002/c/3$", hook=writer))
    code, _out, err = run(proxy, capsys, "--remove-v2-metadata")
    assert code == 1 and proxy.faults[0].hits == 1
    assert (
        "failed a002: 6: written by someone else while its shards were made: left unsharded" in err
    ), err
    assert codec_of(s3, "a002") == "bytes" and codec_of(s3, "a001") == "sharding_indexed"
    expected = (np.arange(4 * CHUNKS) + 512).tolist()
    expected[24] = 99
    for zarr_format in (2, 3):
        array = zarr.open_array(
            f"{URL}/a002",
            mode="r",
            zarr_format=zarr_format,
            storage_options={"endpoint_url": endpoint},
        )
        assert array[...].tolist() == expected
    assert s3.exists(f"{BUCKET}/s/a002/6") and not s3.exists(f"{BUCKET}/s/a001/6")


def test_an_array_whose_folder_cannot_be_listed_again_after_packing_says_so(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a002's shards are written, its folder cannot be listed (access denied): the run cannot
    tell whether a chunk changed meanwhile. a002 is reported for that, not as written by someone
    else, and stays as it is; the other arrays are sharded."""
    upload(s3, tmp_path)

    def deny() -> None:
        proxy.add(Fault("error", "GET", r"list-type=2.*prefix=s/a002/", times=100, status=403))

    proxy.add(Fault("before", "PUT", r"a002/c/3$", hook=deny))
    before = zarr_reads(URL, 2, endpoint)
    code, _out, err = run(proxy, capsys)
    assert code == 1 and proxy.faults[0].hits == 1
    assert "failed a002: its files could not be listed again: " in err, err
    assert "written by someone else" not in err, err
    assert codec_of(s3, "a002") == "bytes" and codec_of(s3, "a001") == "sharding_indexed"
    assert zarr_reads(URL, 3, endpoint) == before


# -- two runs at once (issue 55, item 3) -----------------------------------------------------------


def other_run(endpoint: str, *options: str, lock: bool = True, lease: float | None = None) -> Any:
    """Another run of the command line, in its own process, on the server at ``endpoint``: to its
    end."""
    import os
    import subprocess
    import sys

    from support.s3 import CREDENTIALS, tool_code

    command = [
        sys.executable,
        "-c",
        tool_code(lock, lease),
        "to-v3",
        URL,
        "--shard-size",
        "32B",
        *options,
    ]
    env = {**os.environ, **CREDENTIALS, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    return subprocess.run(
        command, env=env, capture_output=True, text=True, check=False, timeout=120
    )


def test_a_run_that_starts_while_another_packs_is_refused_by_the_lock(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run B is held at its first shard's PUT; run A, which would remove every v2 file, says the
    store is busy (exit 2) and writes nothing; B then finishes."""
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    seen: list[Any] = []
    proxy.add(
        Fault(
            "before",
            "PUT",
            r"/c/",
            hook=lambda: seen.append(other_run(endpoint, "--remove-v2-metadata")),
        )
    )
    code, _, err = run(proxy, capsys)
    assert code == 0, err
    [run_a] = seen
    assert (
        run_a.returncode == 2
        and "another numcodecs-bytes run is working on this store (pid " in run_a.stderr
    )
    assert zarr_reads(URL, 3, endpoint) == before and zarr_reads(URL, 2, endpoint) == before
    assert not [key for key in keys(s3) if "numcodecs-bytes" in key]


def test_a_run_paused_past_its_lease_writes_nothing_more_once_it_resumes(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path
) -> None:
    """Run B (a lease of 4 s) is stopped (SIGSTOP) at its first shard's PUT for longer than 60% of
    its lease; run A takes the lock over, shards everything and removes the v2 files; B, resumed,
    stops at its next write (exit 2): the store reads as A left it."""
    import os
    import subprocess
    import sys

    from support.s3 import CREDENTIALS, tool_code
    from support.slowed_tool import paused_past_its_lease

    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    lease = 4.0
    env = {**os.environ, **CREDENTIALS}
    command = [
        sys.executable,
        "-c",
        tool_code(lease=lease),
        "to-v3",
        URL,
        "--shard-size",
        "32B",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--jobs",
        "1",
    ]
    run_b = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: list[Any] = []

    def run_a() -> Any:
        return other_run(endpoint, "--remove-v2-metadata", lease=lease)

    pause_b = paused_past_its_lease(run_b.pid, lease, run_a, seen)
    proxy.add(Fault("before", "PUT", r"/c/", hook=pause_b))
    try:
        _, err = run_b.communicate(timeout=120)
    finally:
        run_b.kill()
    [a_done] = seen
    assert a_done.returncode == 0, a_done.stderr
    assert run_b.returncode == 2, err
    assert "stopped, nothing more written; run again to finish" in err and err.count("\n") == 1, err
    assert zarr_reads(URL, 3, endpoint) == before
    # A's removal
    assert not [key for key in keys(s3) if key.rsplit("/", 1)[-1].isdigit() and "/c/" not in key]
    assert not [key for key in keys(s3) if "numcodecs-bytes" in key]


def test_without_a_lock_a_run_that_finds_its_chunk_files_gone_removes_nothing(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no lock can be had: run B is held at its first shard's PUT while run A shards
    everything and removes the v2 files; B, resumed, finds chunk files gone that it listed, and
    shards A's zarr.json reads: it reports its arrays and replaces or removes nothing (the release
    before this one removed A's shards: all fill)."""
    from contextlib import nullcontext

    from numcodecs_bytes.store.s3_objects import S3Objects

    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    monkeypatch.setattr(S3Objects, "lock", lambda self, top: nullcontext())
    seen: list[Any] = []
    proxy.add(
        Fault(
            "before",
            "PUT",
            r"/c/",
            hook=lambda: seen.append(other_run(endpoint, "--remove-v2-metadata", lock=False)),
        )
    )
    code, _, err = run(proxy, capsys)
    assert zarr_reads(URL, 3, endpoint) == before
    [a_done] = seen
    assert a_done.returncode == 0, a_done.stderr
    assert code == 1 and "Traceback" not in err, err


def test_arrays_no_shard_can_be_made_for_are_not_read_again_nor_listed(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An array of one chunk (as coordinates and a pyramid's last levels are) is left unsharded from
    its document alone: the sharding pass neither reads its zarr.json again nor lists it (two
    requests an array), and the arrays beside it are sharded as ever."""
    upload(s3, tmp_path, one_chunk=("x", "y"))
    before = zarr_reads(URL, 2, endpoint)
    code, out, err = run(proxy, capsys)
    assert code == 0 and "failed" not in err, err
    assert f"{ARRAYS} arrays sharded" in out, out
    for name in ("x", "y"):
        asked = [
            (method, key)
            for method, key in proxy.requests
            if key.startswith(f"{BUCKET}/s/{name}/") or f"prefix=s/{name}/" in key
        ]
        # the metadata run: its v2 files read, its chunk (the check), its zarr.json written
        assert sorted(asked) == [
            ("GET", f"{BUCKET}/s/{name}/.zarray"),
            ("GET", f"{BUCKET}/s/{name}/.zattrs"),
            ("PUT", f"{BUCKET}/s/{name}/zarr.json"),
        ] or sorted(asked) == [
            ("GET", f"{BUCKET}/s/{name}/.zarray"),
            ("GET", f"{BUCKET}/s/{name}/.zattrs"),
            ("GET", f"{BUCKET}/s/{name}/0"),
            ("PUT", f"{BUCKET}/s/{name}/zarr.json"),
        ], asked
        assert codec_of(s3, name) == "bytes"
    assert zarr_reads(URL, 3, endpoint) == before


def test_after_packing_each_array_folder_is_listed_once_for_its_files_and_their_versions(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the switch, what each array was packed from is asked again: its chunk objects' ETags
    and whether a chunk object came meanwhile. One listing of its folder tells both (an array of a
    million chunks: a thousand pages in sequence, not two thousand)."""
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    code, out, err = run(proxy, capsys)
    assert code == 0 and "failed" not in err, err
    assert f"{ARRAYS} arrays sharded" in out, out
    requests = proxy.requests
    for i in range(ARRAYS):
        folder = f"s/a{i:03d}/"
        shards_written = max(
            n
            for n, (method, key) in enumerate(requests)
            if method in ("PUT", "POST") and key.startswith(f"{BUCKET}/{folder}c/")
        )
        listings = [
            key
            for method, key in requests[shards_written:]
            if method == "GET" and "list-type=2" in key and f"prefix={folder}" in key
        ]
        assert len(listings) == 1, listings
    assert zarr_reads(URL, 3, endpoint) == before
