"""Shards assembled inside S3 (multipart uploads of ``UploadPartCopy`` parts) on moto's server,
behind the fault-injecting proxy.

The store: an array of four 11 MiB chunks (two random, two of ones that zstd
makes small), so that its shards hold every kind of part (`s3_parts`): a chunk
copied whole, a small chunk sent up with the first bytes of the next one and
the rest of that one copied, a small chunk sent up with the index; and an
array of small chunks beside it, packed through the client. The oracles: the
same store packed through the client (``--no-server-copy``), byte for byte;
zarr-python in a fresh process and tensorstore, against the values written.
"""

from __future__ import annotations

import os
import signal
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
from support.s3 import CREDENTIALS, Fault, FaultProxy, empty_bucket
from support.zarr_read import fingerprint
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes.cli import main

# shards S3 assembles (multipart uploads, UploadPartCopy): botocore's and moto's, the same versions
# on the main and newest stacks: run once, on the main stack (.ci/run)
pytestmark = pytest.mark.same_on_every_stack

zarr: Any = pytest.importorskip("zarr")
numcodecs: Any = pytest.importorskip("numcodecs")

BUCKET = "server-copy"
MiB = 2**20
CHUNK = 11 * MiB
SHARD = f"{2 * CHUNK}B"  # two chunks a shard


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from empty_bucket(endpoint, monkeypatch, BUCKET)


def values() -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    big = np.ones(4 * CHUNK, dtype="u1")  # not the fill value: every chunk is written
    big[CHUNK : 3 * CHUNK] = rng.integers(0, 256, 2 * CHUNK, dtype="u1")  # chunks 1 and 2
    return {"big": big, "small": np.arange(4096, dtype="<i4")}


@pytest.fixture(scope="module")
def v2_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The v2 store, written once for the module's tests (zstd over 44 MiB takes a while)."""
    local = tmp_path_factory.mktemp("server-copy") / "v2.zarr"
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    for name, data in values().items():
        chunks = (CHUNK,) if name == "big" else (256,)
        array = group.create_array(
            name,
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            compressors=numcodecs.Zstd(level=1),
        )
        array[...] = data
    return local


def upload(s3: Any, local: Path, prefix: str) -> None:
    s3.put(str(local), f"{BUCKET}/{prefix}", recursive=True)
    s3.invalidate_cache()


def arguments(
    proxy: FaultProxy, prefix: str, *options: str, command: str = "to-v3", size: str = SHARD
) -> list[str]:
    """The command line of a store tool on the store at ``prefix``, through the proxy."""
    return [
        command,
        f"s3://{BUCKET}/{prefix}",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--shard-size",
        size,
        *options,
    ]


def convert(
    proxy: FaultProxy, capsys: pytest.CaptureFixture[str], prefix: str, *options: str
) -> tuple[int, str, str]:
    """to-v3 through the proxy."""
    code = main(arguments(proxy, prefix, *options))
    out, err = capsys.readouterr()
    return code, out, err


def assert_whole(s3: Any, endpoint: str, prefix: str) -> None:
    """No upload left, and zarr in a fresh process reads the values written."""
    assert uploads(s3) == []
    assert zarr_reads(f"s3://{BUCKET}/{prefix}", 3, endpoint) == expected_reads()


def shards(s3: Any, prefix: str) -> dict[str, bytes]:
    s3.invalidate_cache()
    found = [p for p in s3.find(f"{BUCKET}/{prefix}") if "/c/" in p or "/c." in p]
    return {path.removeprefix(f"{BUCKET}/{prefix}/"): s3.cat_file(path) for path in found}


def uploads(s3: Any) -> list[str]:
    answer = s3.call_s3("list_multipart_uploads", Bucket=BUCKET)
    return [upload["Key"] for upload in answer.get("Uploads", [])]


def expected_reads() -> dict[str, Any]:
    return {name: fingerprint(data) for name, data in values().items()}


def test_shards_assembled_inside_s3_are_the_client_packed_ones_byte_for_byte(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "client")
    code, out, err = convert(proxy, capsys, "client", "--no-server-copy")
    assert code == 0, err
    through_client = proxy.sent
    upload(s3, v2_store, "server")
    proxy.sent = 0
    proxy.requests.clear()
    code, out, err = convert(proxy, capsys, "server")
    assert code == 0, err
    assert "2 arrays sharded" in out and "copied inside S3" in out, out
    packed, assembled = shards(s3, "client"), shards(s3, "server")
    assert sorted(assembled) == ["big/c/0", "big/c/1", "small/c/0"]
    assert assembled == packed
    # what went up: the small array's shard, the zeros' chunks and 5 MiB of a random one, indexes
    assert through_client > 2 * CHUNK > 5 * MiB + 2**20 > proxy.sent, (through_client, proxy.sent)
    copies = [key for method, key in proxy.requests if method == "PUT" and "partNumber" in key]
    # big/c/0: the ones' chunk and 5 MiB of the next one up, the rest copied, the index up;
    # big/c/1: a chunk copied, the ones' chunk up with the index; small/c/0: one PUT
    assert sorted(key.split("&")[0].split("/", 2)[-1] for key in copies) == [
        "big/c/0?partNumber=1",
        "big/c/0?partNumber=2",
        "big/c/0?partNumber=3",
        "big/c/1?partNumber=1",
        "big/c/1?partNumber=2",
    ]
    # small/0 read twice: by the check before zarr.json is written, and to pack it; the check of
    # the shards reads it from its shard only, its MD5 being the chunk object's ETag
    assert proxy.requests.count(("GET", f"{BUCKET}/server/small/0")) == 2, proxy.requests
    assert_whole(s3, endpoint, "server")
    if pytest.importorskip("tensorstore", reason="tensorstore is in the interop extra"):
        from support.v2_stores import tensorstore_reads

        local = tmp_path / "back"
        s3.get(f"{BUCKET}/server", str(local), recursive=True)
        assert tensorstore_reads(local, values()) == 2


def small_chunks_store(tmp_path: Path) -> tuple[np.ndarray[Any, Any], Path]:
    """A v2 store of one array ``a`` of six random chunks of 3 MiB, stored as they are: its values
    and its folder."""
    data = np.random.default_rng(3).integers(0, 256, 6 * 3 * MiB, dtype="u1")
    local = tmp_path / "v2.zarr"
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    group.create_array("a", shape=data.shape, chunks=(3 * MiB,), dtype="u1", compressors=None)
    group["a"][...] = data
    return data, local


def test_a_large_shard_of_small_chunks_goes_up_in_parts_a_few_at_a_time(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shard of more than `object_packing.WHOLE_SHARD_BYTES` of which S3 copies nothing (its
    chunks are under 5 MiB) goes up as a multipart upload of its chunks' bytes, one part at a time
    here (`s3_copy.UPLOADED_PARTS_AT_ONCE`): the last chunks are read only once the first part is
    up, so the client never holds the shard whole. The shard is byte for byte the one a single PUT
    makes, is not read back (S3's ETag of its parts says what it holds), and zarr reads it."""
    from numcodecs_bytes.store import object_packing, s3_copy

    data, local = small_chunks_store(tmp_path)
    whole_shard = f"{data.nbytes}B"  # the six chunks in one shard
    for prefix in ("whole", "parts"):
        upload(s3, local, prefix)
    assert main(arguments(proxy, "whole", size=whole_shard)) == 0, capsys.readouterr()
    monkeypatch.setattr(object_packing, "WHOLE_SHARD_BYTES", MiB)
    monkeypatch.setattr(s3_copy, "UPLOADED_PARTS_AT_ONCE", 1)
    proxy.requests.clear()
    assert main(arguments(proxy, "parts", size=whole_shard)) == 0, capsys.readouterr()
    assert shards(s3, "parts") == shards(s3, "whole")
    # three parts of two chunks, then the index
    assert s3.info(f"{BUCKET}/parts/a/c/0")["ETag"].endswith('-4"')
    assert not s3.info(f"{BUCKET}/whole/a/c/0")["ETag"].endswith('-1"')
    asked = proxy.requests
    first_part = next(
        at
        for at, (method, key) in enumerate(asked)
        if method == "PUT" and "/a/c/0?partNumber=1&" in key
    )
    last_reads = [
        at
        for at, (method, key) in enumerate(asked)
        if method == "GET" and key.rsplit("/", 1)[-1] in ("4", "5")
    ]
    assert last_reads and min(last_reads) > first_part, asked
    # S3's ETag, the MD5 of its parts' MD5s, says the shard holds what went up: not read back
    # (a read-back starts with a HEAD of the shard)
    assert not [key for method, key in asked if method == "HEAD" and key.endswith("/a/c/0")]
    assert uploads(s3) == []
    assert zarr_reads(f"s3://{BUCKET}/parts", 3, endpoint)["a"] == fingerprint(data)


def test_a_run_paused_past_its_lease_mid_upload_overwrites_nothing_once_it_resumes(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path
) -> None:
    """Run B (a lease of 4 s) is stopped (SIGSTOP) at the completion of its shard's multipart
    upload for longer than 60% of its lease; run A takes the lock over, shards the array and
    removes the v2 files; B, resumed, completes nothing over A's shard (S3 completes only where no
    object is) and stops at its next write (exit 2): A's shard is the object it was, no upload is
    left, and zarr reads the values."""
    from support.s3 import tool_code
    from support.slowed_tool import paused_past_its_lease

    data, local = small_chunks_store(tmp_path)
    upload(s3, local, "s")
    lease, size = 4.0, f"{data.nbytes}B"  # one shard of 18 MiB: a multipart upload
    env = {**os.environ, **CREDENTIALS}

    def command(through: str, *more: str) -> list[str]:
        return [
            sys.executable,
            "-c",
            tool_code(lease=lease),
            "to-v3",
            f"s3://{BUCKET}/s",
            "--shard-size",
            size,
            "--storage-option",
            f"endpoint_url={through}",
            *more,
        ]

    run_b = subprocess.Popen(
        command(proxy.endpoint), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: list[Any] = []

    def run_a() -> tuple[Any, Any]:
        done = subprocess.run(
            command(endpoint, "--remove-v2-metadata"),
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        s3.invalidate_cache()
        return done, s3.info(f"{BUCKET}/s/a/c/0")

    pause_b = paused_past_its_lease(run_b.pid, lease, run_a, seen)
    proxy.add(Fault("before", "POST", r"s/a/c/0\?uploadId=", hook=pause_b))
    try:
        _, err = run_b.communicate(timeout=120)
    finally:
        run_b.kill()
    [(a_done, shard_after_a)] = seen
    assert a_done.returncode == 0, a_done.stderr
    assert run_b.returncode == 2, err
    assert "stopped, nothing more written; run again to finish" in err, err
    s3.invalidate_cache()
    shard_now = s3.info(f"{BUCKET}/s/a/c/0")
    assert (shard_now["ETag"], shard_now["LastModified"]) == (
        shard_after_a["ETag"],
        shard_after_a["LastModified"],
    )
    assert uploads(s3) == []
    assert zarr_reads(f"s3://{BUCKET}/s", 3, endpoint)["a"] == fingerprint(data)


def test_a_server_that_refuses_multipart_uploads_fails_a_large_shard_with_one_line(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the server answers a multipart upload's start with 501 (not AWS S3), a shard too large
    for one PUT is not made: its array is left as it was, one line says why, and no upload is left
    (a smaller --shard-size makes shards that go up whole)."""
    from numcodecs_bytes.store import object_packing

    data, local = small_chunks_store(tmp_path)
    upload(s3, local, "s")
    monkeypatch.setattr(object_packing, "WHOLE_SHARD_BYTES", MiB)
    proxy.add(Fault("error", "POST", r"a/c/0\?uploads", times=100, status=501))
    code = main(arguments(proxy, "s", size=f"{data.nbytes}B"))
    err = capsys.readouterr().err
    assert code == 1, err
    [line] = [line for line in err.splitlines() if line.startswith("failed")]
    assert line.startswith("failed a: ") and "NotImplemented" in line, err
    assert proxy.faults[0].hits >= 1
    assert not s3.exists(f"{BUCKET}/s/a/c/0")
    assert uploads(s3) == []
    assert zarr_reads(f"s3://{BUCKET}/s", 3, endpoint)["a"] == fingerprint(data)


def test_copy_parts_that_fail_are_retried_and_the_shard_is_whole(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "s")
    proxy.add(
        Fault("error", "PUT", r"big/c/0\?partNumber=2", times=2, status=503),
        Fault("reset", "PUT", r"big/c/1\?partNumber=1"),
        Fault("lost", "PUT", r"big/c/1\?partNumber=2"),  # copied; the answer lost, copied again
        Fault("error", "POST", r"big/c/0\?uploadId", status=503),  # the completion
        Fault("lost", "POST", r"big/c/1\?uploadId"),  # completed; the retry finds no upload
    )
    code, _, err = convert(proxy, capsys, "s", "--remove-v2-metadata")
    assert code == 0, err
    assert all(fault.hits == fault.times for fault in proxy.faults), [
        (f.key, f.hits) for f in proxy.faults
    ]
    assert_whole(s3, endpoint, "s")


def test_a_chunk_changed_after_its_listing_is_not_copied_and_its_array_stays(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "s")
    changed = values()["big"][2 * CHUNK : 3 * CHUNK][::-1].copy()

    def writer() -> None:  # another writer rewrites chunk 2 just before S3 copies it
        s3.pipe_file(f"{BUCKET}/s/big/2", numcodecs.Zstd(level=1).encode(changed))

    proxy.add(Fault("before", "PUT", r"big/c/1\?partNumber=1", hook=writer))
    code, out, err = convert(proxy, capsys, "s")
    assert proxy.faults[0].hits == 1
    assert code == 1, (out, err)
    assert "big" in err and "2: changed after it was listed" in err, err
    assert "1 array sharded (" in out, out
    expected = expected_reads()
    big = values()["big"]
    big[2 * CHUNK : 3 * CHUNK] = changed
    # the small array sharded, the big one as v2 as it is now
    assert zarr_reads(f"s3://{BUCKET}/s", 2, endpoint)["big"] == fingerprint(big)
    assert zarr_reads(f"s3://{BUCKET}/s", 3, endpoint)["small"] == expected["small"]
    assert "big/c/1" not in shards(s3, "s") and uploads(s3) == []


def test_a_run_killed_mid_upload_leaves_no_shard_and_its_rerun_aborts_the_upload(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "s")
    proxy.add(Fault("hang", "POST", r"big/c/0\?uploadId=", times=10))
    command = [sys.executable, "-m", "numcodecs_bytes", *arguments(proxy, "s")]
    run = subprocess.Popen(
        command, env=os.environ | CREDENTIALS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while not any(
            method == "POST" and "big/c/0?uploadId=" in key for method, key in proxy.requests
        ):
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert "big/c/0" not in shards(s3, "s")
    assert "s/big/c/0" in uploads(s3)
    proxy.clear()
    code, _, err = convert(proxy, capsys, "s")
    assert code == 0, err
    assert_whole(s3, endpoint, "s")


def test_a_server_that_refuses_to_copy_parts_is_said_once_and_the_shards_go_through_the_client(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "s")
    proxy.add(Fault("error", "PUT", r"\?partNumber=", times=100, status=501))
    code, out, err = convert(proxy, capsys, "s")
    assert code == 0, err
    assert "copied inside S3" not in out, out
    assert err.count("refused to copy parts") == 1, err
    assert "(--no-server-copy skips the attempt)" in err, err
    assert_whole(s3, endpoint, "s")


def test_resharding_on_s3_copies_each_inner_chunk_inside_s3_by_its_range(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    v2_store: Path,
) -> None:
    upload(s3, v2_store, "s")
    code, _, err = convert(proxy, capsys, "s", "--remove-v2-metadata")
    assert code == 0, err
    proxy.sent = 0
    code = main(arguments(proxy, "s", command="reshard", size=f"{4 * CHUNK}B"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 array resharded" in out and "copied inside S3" in out, out
    assert sorted(shards(s3, "s")) == ["big/c.0", "small/c/0"]  # under the other separator
    # the two random chunks copied by their ranges of the old shards: what went up is the ones'
    # chunks and 5 MiB of a random one, the index and the documents
    assert proxy.sent < 5 * MiB + 2**20, proxy.sent
    assert_whole(s3, endpoint, "s")
