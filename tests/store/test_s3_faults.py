"""The store tools on S3 when the server fails: errors, resets, truncated bodies, answers lost after
the server acted, listings that omit keys, writers between a listing and a read, requests never
answered.

moto's S3 server runs on a loopback port behind a fault-injecting proxy
(tests/s3_faults.py); the tools talk to the proxy, the tests set up and look
through moto directly. The oracle is zarr in a fresh process
(support/zarr_read.py): what it reads from the v2 store before, it reads from
the v3 store after, or the run reports why not.
"""

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
from support.s3 import CREDENTIALS, Fault, FaultProxy, empty_bucket
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.cli.reports import V2_METADATA_KEPT

# the store tools' answers to a failing S3 server: s3fs's, aiobotocore's and moto's, the same
# versions on the main and newest stacks: run once, on the main stack (.ci/run)
pytestmark = pytest.mark.same_on_every_stack

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

BUCKET = "faults"
URL = f"s3://{BUCKET}/s"


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An empty bucket on moto, seen directly (not through the proxy)."""
    yield from empty_bucket(endpoint, monkeypatch, BUCKET)


def upload(
    s3: Any, tmp_path: Path, arrays: int = 6, consolidated: bool = True, legacy: bool = False
) -> None:
    local = tmp_path / "store.zarr"
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    for i in range(arrays):
        array = group.create_array(
            f"a{i:03d}",
            shape=(4,),
            chunks=(4,),
            dtype="<i4",
            filters=[BytesCodec(endian="big", dtype="<i4")],
        )
        array[...] = np.arange(4, dtype="<i4") + 256 * i
        (local / f"a{i:03d}" / ".zattrs").write_text("{}")
    if consolidated:
        zarr.consolidate_metadata(str(local))
    if legacy:
        for path in local.rglob(".z*"):
            path.write_text(path.read_text().replace('"id": "bytes"', '"id": "endian"'))
    s3.put(str(local), f"{BUCKET}/s", recursive=True)
    s3.invalidate_cache()


def run(
    tool: str, proxy: FaultProxy, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, str, str]:
    code = main([tool, URL, "--storage-option", f"endpoint_url={proxy.endpoint}", *options])
    out, err = capsys.readouterr()
    return code, out, err


def test_failing_requests_are_retried_and_the_store_converts(
    s3: Any, proxy: FaultProxy, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    proxy.add(
        Fault("error", "GET", r"\.zarray$", times=2, status=503),
        Fault("error", "GET", r"list-type=2", times=1, status=500),
        Fault("reset", "GET", r"a000/0$"),  # chunk 0 of the first array: the check reads it
        Fault("truncate", "GET", r"a002/\.zattrs$"),
        Fault("reset", "PUT", r"a003/zarr\.json$"),
        Fault("error", "PUT", r"a004/zarr\.json$", status=503),
    )
    code, _out, err = run("to-v3", proxy, capsys, "--remove-v2-metadata")
    assert code == 0 and err == "", err
    assert all(fault.hits == fault.times for fault in proxy.faults), [
        (f.action, f.key, f.hits) for f in proxy.faults
    ]
    assert zarr_reads(URL, 3, endpoint) == before


@pytest.mark.parametrize("what", ["zarr.json", ".zattrs"])
def test_an_answer_lost_after_the_server_acted_is_no_conflict(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    what: str,
) -> None:
    """Item 10: the server created the zarr.json (or removed the .zattrs), then the answer was lost;
    the retry is refused (412) or finds nothing to remove: the file is read back, and it holds what
    was written."""
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    method = "PUT" if what == "zarr.json" else "DELETE"
    proxy.add(Fault("lost", method, rf"a00[0-2]/{what}$".replace(".", r"\."), times=3))
    code, _out, err = run("to-v3", proxy, capsys, "--remove-v2-metadata")
    assert code == 0 and err == "", err
    assert proxy.faults[0].hits == 3
    assert zarr_reads(URL, 3, endpoint) == before


def test_an_answer_lost_after_a_replace_is_no_conflict(
    s3: Any, proxy: FaultProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 10, migrate: the server replaced the .zarray (and wrote its .bak), then the answers were
    lost."""
    upload(s3, tmp_path, arrays=3, consolidated=False, legacy=True)
    proxy.add(Fault("lost", "PUT", r"a000/\.zarray$"), Fault("lost", "PUT", r"a001/\.zarray\.bak$"))
    code, out, err = run("migrate", proxy, capsys, "--backup")
    assert code == 0 and err == "" and out.startswith("3 files changed (3 codecs)"), (out, err)
    assert all(fault.hits == 1 for fault in proxy.faults)
    assert b'"id": "endian"' in s3.cat_file(f"{BUCKET}/s/a001/.zarray.bak")
    assert b'"id": "bytes"' in s3.cat_file(f"{BUCKET}/s/a000/.zarray")


@pytest.mark.parametrize("remove", [False, True])
def test_a_listing_that_omits_a_node_loses_it_nowhere(
    s3: Any,
    proxy: FaultProxy,
    endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    remove: bool,
) -> None:
    """Item 3: every listing omits a003's keys; .zmetadata names it: it is read from its own files,
    converted, and in the v3 root's consolidated metadata."""
    upload(s3, tmp_path)
    before = zarr_reads(URL, 2, endpoint)
    proxy.add(Fault("omit", "GET", r"list-type=2|delimiter", times=1000, omit=r"/a003/"))
    code, _out, err = run("to-v3", proxy, capsys, *(["--remove-v2-metadata"] if remove else []))
    assert code == 0 and err == ("" if remove else f"{V2_METADATA_KEPT}\n"), err
    assert zarr_reads(URL, 3, endpoint) == before
    s3.invalidate_cache()
    root = json.loads(s3.cat_file(f"{BUCKET}/s/zarr.json"))
    assert "a003" in root["consolidated_metadata"]["metadata"]


def test_a_file_changed_after_the_listing_is_read_as_it_is_now(
    s3: Any, proxy: FaultProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 4: a002/.zattrs is listed holding {} (its ETag the MD5 of those bytes); a writer sets an
    attribute before it is read: zarr.json gets the attribute."""
    upload(s3, tmp_path, consolidated=False)

    def writer() -> None:
        s3.pipe_file(f"{BUCKET}/s/a002/.zattrs", b'{"units": "K"}')

    proxy.add(Fault("before", "GET", r"a002/\.zattrs$", hook=writer))
    code, _out, err = run("to-v3", proxy, capsys)
    assert code == 0 and proxy.faults[0].hits == 1, err
    s3.invalidate_cache()
    assert json.loads(s3.cat_file(f"{BUCKET}/s/a002/zarr.json"))["attributes"] == {"units": "K"}


def test_a_removal_holds_only_while_the_file_holds_what_was_read(
    s3: Any, proxy: FaultProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 2 on S3: a writer changes a000/.zattrs after it was read; its DELETE holds on the
    version read (If-Match), is refused, and the writer's file stays."""
    upload(s3, tmp_path)

    def writer() -> None:
        s3.pipe_file(f"{BUCKET}/s/a000/.zattrs", b'{"late": true}')

    proxy.add(Fault("before", "DELETE", r"a000/\.zattrs$", hook=writer))
    code, _out, err = run("to-v3", proxy, capsys, "--remove-v2-metadata")
    assert (
        code == 1
        and "failed a000/.zattrs: changed by someone else since it was read: not removed" in err
    ), err
    s3.invalidate_cache()
    assert s3.cat_file(f"{BUCKET}/s/a000/.zattrs") == b'{"late": true}'
    assert not s3.exists(f"{BUCKET}/s/a001/.zattrs")


def tool(args: list[str], endpoint: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **CREDENTIALS}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "numcodecs_bytes",
            *args,
            "--storage-option",
            f"endpoint_url={endpoint}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_request_the_server_never_answers_fails_its_node_in_the_time_given(
    s3: Any, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Item 8: a GET of a001/.zarray is never answered; with --request-timeout 2 the node fails with
    one line and the rest converts (without it, s3fs's and botocore's retries wait 15 s each, for
    minutes)."""
    upload(s3, tmp_path, consolidated=False)
    proxy.add(Fault("hang", "GET", r"a001/\.zarray$", times=100))
    started = time.monotonic()
    result = tool(["to-v3", URL, "--request-timeout", "2"], proxy.endpoint)
    assert time.monotonic() - started < 60
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert "failed a001: no answer within 2 s (--request-timeout)" in lines, lines
    assert "Traceback" not in result.stderr
    assert s3.exists(f"{BUCKET}/s/a002/zarr.json") and not s3.exists(f"{BUCKET}/s/zarr.json")


def test_a_run_stops_at_its_time_limit_with_one_line(
    s3: Any, proxy: FaultProxy, tmp_path: Path
) -> None:
    upload(s3, tmp_path, consolidated=False)
    proxy.add(Fault("hang", "GET", r"\.zarray$", times=100))
    started = time.monotonic()
    result = tool(["to-v3", URL, "--run-timeout", "3"], proxy.endpoint)
    assert time.monotonic() - started < 60
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "stopped at the run's time limit (--run-timeout): "
    )


@pytest.mark.parametrize("hanging", ["the store's opening", "the lock"])
def test_a_time_limit_reached_before_the_walk_stops_the_run_with_exit_code_1(
    s3: Any, proxy: FaultProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str], hanging: str
) -> None:
    """Issue 56, item 5: the time limit reached while the store is opened, or while its lock is
    taken, is the time limit (exit code 1, as --help's table says), not a store that cannot be
    reached (exit code 2)."""
    upload(s3, tmp_path, consolidated=False)
    if hanging == "the store's opening":
        proxy.add(Fault("hang", None, "", times=1000))
    else:
        proxy.add(Fault("hang", "PUT", r"numcodecs-bytes-lock$", times=1000))
    code, out, err = run("to-v3", proxy, capsys, "--run-timeout", "2")
    assert code == 1 and out == "", (out, err)
    assert (
        err.startswith("stopped at the run's time limit (--run-timeout): ") and err.count("\n") == 1
    ), err


def test_on_s3_the_side_written_after_a_conversion_is_kept(
    s3: Any, proxy: FaultProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43, item 5, on S3: the objects' LastModified tell which side a writer changed after the
    conversion."""
    upload(s3, tmp_path, arrays=2, consolidated=False)
    assert run("to-v3", proxy, capsys)[0] == 0
    time.sleep(1.1)  # LastModified counts whole seconds
    zarray = json.loads(s3.cat(f"{BUCKET}/s/a000/.zarray"))
    # a v2 writer resized it
    s3.pipe(f"{BUCKET}/s/a000/.zarray", json.dumps({**zarray, "shape": [2]}).encode())
    v3 = json.loads(s3.cat(f"{BUCKET}/s/a001/zarr.json"))
    # a v3 writer
    s3.pipe(f"{BUCKET}/s/a001/zarr.json", json.dumps({**v3, "attributes": {"units": "K"}}).encode())
    code, _, err = run("to-v3", proxy, capsys, "--remove-v2-metadata")
    assert code == 0, err
    assert (
        "note a000: zarr.json and its .zarray, .zattrs differ (shape [4] in zarr.json, [2] in v2)"
        in err
    )
    assert (
        "note a001: zarr.json and its .zarray, .zattrs differ (attributes): zarr.json was written "
        "after" in err
    )
    assert json.loads(s3.cat(f"{BUCKET}/s/a000/zarr.json"))["shape"] == [2]
    assert json.loads(s3.cat(f"{BUCKET}/s/a001/zarr.json"))["attributes"] == {"units": "K"}
    assert not s3.exists(f"{BUCKET}/s/a001/.zarray")
