"""The store tools on Azure Blob Storage through obstore, against Azurite (Microsoft's emulator,
started by the tests), with the credentials in the environment as Azure users have them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3.1", reason="these stores are read with zarr 3")
pytest.importorskip("obstore", reason="Azure needs obstore (the cloud extra)")
import obstore
import zarr
from support.azure import ACCOUNT, KEY, connection_string, objects, upload, zarr_store
from support.s3 import Fault, fault_proxy
from support.slowed_tool import stopped_tool

from numcodecs_bytes.cli import main
from numcodecs_bytes.store import StoreOptions, open_store
from numcodecs_bytes.store.files import TEMP_SUFFIX
from numcodecs_bytes.store.object_files import ObjectFiles
from numcodecs_bytes.store.shard_format import Packed

pytestmark = pytest.mark.same_on_every_stack

CONTAINER = "stores"
VALUES = {
    "a": np.arange(24, dtype="<i2").reshape(4, 6),
    "g/b": np.linspace(0, 1, 16, dtype="<f8"),
}


@pytest.fixture
def azure(azurite: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from support.azure import empty_container

    return empty_container(azurite, CONTAINER, monkeypatch)


def upload_v2_store(store: Any, local: Path, prefix: str = "data") -> None:
    """A Zarr v2 group of two arrays of several chunks each (one in a subgroup), at ``prefix``."""
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    group.create_array("a", data=VALUES["a"], chunks=(2, 3), compressors=None)
    group.create_group("g").create_array("b", data=VALUES["g/b"], chunks=(4,), compressors=None)
    upload(store, local, prefix)


def read_values(endpoint: str, prefix: str = "data") -> dict[str, Any]:
    group = zarr.open_group(zarr_store(endpoint, CONTAINER, prefix), mode="r", zarr_format=3)
    return {name: group[name][...] for name in VALUES}  # type: ignore[index]


def test_to_v3_converts_a_store_on_azure(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_v2_store(azure, tmp_path / "v2")
    before = objects(azure)
    assert main(["to-v3", f"az://{CONTAINER}/data", "--dry-run"]) == 0
    assert objects(azure) == before, "a dry run changed an object"

    assert main(["to-v3", f"az://{CONTAINER}/data", "--remove-v2-metadata"]) == 0, (
        capsys.readouterr()
    )
    after = objects(azure)
    assert not [key for key in after if key.rsplit("/", 1)[-1].startswith(".z")]
    assert {"data/zarr.json", "data/a/zarr.json", "data/g/zarr.json", "data/g/b/zarr.json"} <= set(
        after
    )
    assert ".numcodecs-bytes-lock" not in "".join(after), "the run's lock object was left"
    found = read_values(azurite)
    for name, expected in VALUES.items():
        np.testing.assert_array_equal(found[name], expected)


def test_to_v3_packs_shards_on_azure_and_a_rerun_has_nothing_to_do(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_v2_store(azure, tmp_path / "v2")
    url = f"az://{CONTAINER}/data"
    assert main(["to-v3", url, "--shard-size", "1MiB", "--remove-v2-metadata"]) == 0
    capsys.readouterr()
    after = objects(azure)
    # each array in one shard; the v2 chunk objects gone
    assert sorted(key for key in after if "/c/" in key) == ["data/a/c/0/0", "data/g/b/c/0"]
    assert not [key for key in after if key.rsplit("/", 1)[-1][0].isdigit() and "/c/" not in key]
    found = read_values(azurite)
    for name, expected in VALUES.items():
        np.testing.assert_array_equal(found[name], expected)
    assert main(["to-v3", url, "--shard-size", "1MiB", "--remove-v2-metadata"]) == 0
    assert objects(azure) == after


def test_a_killed_sharding_run_is_finished_by_a_rerun(
    azure: Any, azurite: str, tmp_path: Path
) -> None:
    """Stopped dead right after its shards were packed (before any zarr.json reads them), with its
    lock object left: the rerun takes the lock over (its process ended on this machine) and
    finishes."""
    upload_v2_store(azure, tmp_path / "v2")
    arguments = [f"az://{CONTAINER}/data", "--shard-size", "1MiB", "--remove-v2-metadata"]
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            stopped_tool("numcodecs_bytes.store.object_packing:ObjectPacking.pack"),
            "to-v3",
            *arguments,
        ],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert killed.returncode == 137, killed.stderr
    assert "data/.numcodecs-bytes-lock" in objects(azure)
    rerun = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", "to-v3", *arguments],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    after = objects(azure)
    assert "data/.numcodecs-bytes-lock" not in after
    assert sorted(key for key in after if "/c/" in key) == ["data/a/c/0/0", "data/g/b/c/0"]
    found = read_values(azurite)
    for name, expected in VALUES.items():
        np.testing.assert_array_equal(found[name], expected)


def test_a_run_is_refused_while_another_holds_the_lock(
    azure: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_v2_store(azure, tmp_path / "v2")
    holder = {"tool": "numcodecs-bytes", "lease_seconds": 60.0, "host": "elsewhere", "pid": 7}
    obstore.put(azure, "data/.numcodecs-bytes-lock", json.dumps(holder).encode())
    before = objects(azure)
    assert main(["to-v3", f"az://{CONTAINER}/data"]) == 2
    err = capsys.readouterr().err
    assert "another numcodecs-bytes run is working on this store (pid 7 on elsewhere)" in err
    assert objects(azure) == before


def test_a_writer_between_the_read_and_the_write_is_never_overwritten(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another writer makes an array's zarr.json just before the tool's own PUT of it: the server
    refuses the tool's (it is written only where none exists); the rest converts."""
    upload_v2_store(azure, tmp_path / "v2")
    theirs = b'{"zarr_format": 3, "node_type": "group"}'
    with fault_proxy(azurite) as proxy:
        proxy.add(
            Fault(
                "before",
                method="PUT",
                key=r"data/a/zarr\.json$",
                hook=lambda: obstore.put(azure, "data/a/zarr.json", theirs) and None,
            )
        )
        options = [
            "--storage-option",
            f"account_name={ACCOUNT}",
            "--storage-option",
            f"account_key={KEY}",
            "--storage-option",
            f"endpoint={proxy.endpoint}/{ACCOUNT}",
        ]
        code = main(["to-v3", f"az://{CONTAINER}/data", *options])
    out = capsys.readouterr()
    assert code == 1, out
    assert "a: zarr.json exists already: not overwritten" in out.err
    after = objects(azure)
    assert after["data/a/zarr.json"] == theirs
    assert json.loads(after["data/g/b/zarr.json"])["shape"] == [16]


def test_a_busy_server_is_retried_and_a_lost_answer_is_read_back(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """503s on reads and a PUT whose answer is lost after the server acted: the run converts all
    (obstore retries; the retry of the conditional create is refused, and the object holds what
    was written)."""
    upload_v2_store(azure, tmp_path / "v2")
    with fault_proxy(azurite) as proxy:
        proxy.add(
            Fault("error", method="GET", key=r"\.zarray$", times=3),
            Fault("lost", method="PUT", key=r"data/g/b/zarr\.json$"),
        )
        endpoint = f"endpoint={proxy.endpoint}/{ACCOUNT}"
        code = main(["to-v3", f"az://{CONTAINER}/data", "--storage-option", endpoint])
        assert [fault.hits for fault in proxy.faults] == [3, 1]
    assert code == 0, capsys.readouterr()
    found = read_values(azurite)
    for name, expected in VALUES.items():
        np.testing.assert_array_equal(found[name], expected)


def test_an_option_azure_does_not_take_is_one_line_before_any_request(
    azure: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["to-v3", f"az://{CONTAINER}/data", "--storage-option", "endpoint_url=http://x"])
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err.count("\n") == 1 and "storage option endpoint_url is not one an Azure URL takes" in err
    )


def test_the_store_is_opened_through_obstore_with_the_connection_string_of_the_environment(
    azure: Any, tmp_path: Path
) -> None:
    upload_v2_store(azure, tmp_path / "v2")
    store = open_store(f"abfs://{CONTAINER}/data/g", StoreOptions(jobs=4))
    assert isinstance(store.files, ObjectFiles)
    assert (store.root, store.top) == (f"{CONTAINER}/data/g", f"{CONTAINER}/data")


def test_a_connection_string_given_as_an_option(
    azure: Any, azurite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload_v2_store(azure, tmp_path / "v2")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    with pytest.raises(Exception, match="data"):  # no credentials at all: not reached
        open_store(f"az://{CONTAINER}/data", StoreOptions(request_timeout=5))
    options = StoreOptions(storage_options={"connection_string": connection_string(azurite)})
    assert isinstance(open_store(f"az://{CONTAINER}/data", options).files, ObjectFiles)


@pytest.mark.parametrize(
    ("option", "value", "config"),
    [
        ("account_name", "acc", {"account_name": "acc"}),
        ("account_key", "a2V5", {"account_key": "a2V5"}),
        ("sas_token", "sv=1&sig=x", {"sas_key": "sv=1&sig=x"}),
        ("tenant_id", "t", {"tenant_id": "t"}),
        ("client_id", "c", {"client_id": "c"}),
        ("client_secret", "s", {"client_secret": "s"}),
        ("anon", True, {"skip_signature": True}),
        ("anon", "false", {"skip_signature": False}),
        ("endpoint", "https://x.example", {"endpoint": "https://x.example"}),
        ("use_emulator", "true", {"use_emulator": True}),
        ("use_azure_cli", True, {"use_azure_cli": True}),
        (
            "connection_string",
            "AccountName=acc;AccountKey=a2V5;SharedAccessSignature=sv=1",
            {"account_name": "acc", "account_key": "a2V5", "sas_key": "sv=1"},
        ),
    ],
)
def test_each_storage_option_azure_takes(option: str, value: Any, config: dict[str, Any]) -> None:
    from numcodecs_bytes.store.cloud_options import AZURE_OPTIONS, azure_location

    assert (
        azure_location(
            "az://box/p", StoreOptions(storage_options={option: value}), environ={}
        ).config
        == config
    )
    assert option in AZURE_OPTIONS


@pytest.mark.parametrize(
    ("url", "options", "environ", "problem"),
    [
        ("az://box", {"anon": "maybe"}, {}, "anon must be true or false, got 'maybe'"),
        ("az://box", {"account_key": ""}, {}, "account_key must be a non-empty string"),
        ("az:///p", {}, {}, "an Azure URL names a container"),
        ("az://box", {"connection_string": "junk"}, {}, "needs AccountName"),
        ("az://box", {}, {"AZURE_STORAGE_CONNECTION_STRING": "x=1"}, "needs AccountName"),
    ],
)
def test_a_wrong_azure_option_is_a_value_error_naming_it(
    url: str, options: dict[str, Any], environ: dict[str, str], problem: str
) -> None:
    from numcodecs_bytes.store.cloud_options import azure_location

    with pytest.raises(ValueError, match=problem):
        azure_location(url, StoreOptions(storage_options=options), environ=environ)


def test_the_account_of_an_abfs_url_and_the_environment_connection_string() -> None:
    from numcodecs_bytes.store.cloud_options import azure_location

    found = azure_location("abfss://box@acc.dfs.core.windows.net/a/b", StoreOptions(), environ={})
    assert (found.container, found.path, found.config) == ("box", "a/b", {"account_name": "acc"})
    text = "AccountName=acc;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/acc"
    found = azure_location(
        "az://box", StoreOptions(), environ={"AZURE_STORAGE_CONNECTION_STRING": text}
    )
    assert found.config["endpoint"] == "http://127.0.0.1:1/acc"
    assert found.client_options == {"allow_http": True}
    # an account named by the caller: the environment's connection string is not read
    found = azure_location(
        "az://box",
        StoreOptions(storage_options={"account_name": "mine"}),
        environ={"AZURE_STORAGE_CONNECTION_STRING": text},
    )
    assert found.config == {"account_name": "mine"}
    found = azure_location(
        "az://box",
        StoreOptions(storage_options={"endpoint": "http://proxy"}),
        environ={"AZURE_STORAGE_CONNECTION_STRING": text},
    )
    assert found.config["endpoint"] == "http://proxy", "the environment won over an option given"
    # an emulator's endpoint named in obstore's environment: plain HTTP to it, not elsewhere
    environ = {"AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:1/acc"}
    assert azure_location("az://box", StoreOptions(), environ=environ).client_options
    assert not azure_location("az://box", StoreOptions(), environ={}).client_options


def upload_large_array(store: Any, local: Path) -> Any:
    """A v2 array of 64 chunks of 256 bytes (16 KiB), at ``data/big``."""
    values = np.arange(64 * 64, dtype="<i4").reshape(64, 64)
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    group.create_array("big", data=values, chunks=(8, 8), compressors=None)
    upload(store, local, "data")
    return values


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards of more than 1,000 bytes go up in parts of 4 KiB, reading 1 KiB ahead: the multipart
    path on shards a test can hold."""
    from numcodecs_bytes.store import object_packing

    monkeypatch.setattr(object_packing, "WHOLE_SHARD_BYTES", 1000)
    monkeypatch.setattr(object_packing, "PART_BYTES", 4096)
    monkeypatch.setattr(object_packing, "READ_AHEAD_BYTES", 1024)


def test_a_large_shard_goes_up_in_parts_as_its_chunks_are_read(
    azure: Any, azurite: str, tmp_path: Path, small_parts: None, capsys: pytest.CaptureFixture[str]
) -> None:
    values = upload_large_array(azure, tmp_path / "v2")
    with fault_proxy(azurite) as proxy:
        endpoint = f"endpoint={proxy.endpoint}/{ACCOUNT}"
        arguments = ["--shard-size", "1MiB", "--remove-v2-metadata", "--storage-option", endpoint]
        code = main(["to-v3", f"az://{CONTAINER}/data", *arguments])
        blocks = [key for method, key in proxy.requests if method == "PUT" and "comp=block" in key]
    assert code == 0, capsys.readouterr()
    # 16 KiB of chunks and a 1 KiB index: five parts of 4 KiB, and the list that makes them one blob
    assert len(blocks) == 6, blocks
    after = objects(azure)
    assert sorted(key for key in after if "/c/" in key) == ["data/big/c/0/0"]
    assert len(after["data/big/c/0/0"]) == 64 * 256 + 64 * 16 + 4
    group = zarr.open_group(zarr_store(azurite, CONTAINER, "data"), mode="r", zarr_format=3)
    np.testing.assert_array_equal(group["big"][...], values)  # type: ignore[index]


@pytest.mark.parametrize("left", ["another object", "blocks of no blob"])
def test_what_an_interrupted_run_left_where_a_large_shard_goes_is_replaced_or_kept(
    azure: Any, azurite: str, tmp_path: Path, small_parts: None, left: str
) -> None:
    """At the place of a shard that goes up in parts (through a temporary object copied into place
    where no blob is), an interrupted run left an object no zarr.json reads (replaced, while it is
    the version found), or an upload's uncommitted blocks, which Azurite refuses a create over
    (written over); beside it, its temporary objects (removed). Each time zarr reads the values."""
    from azure.storage.blob import BlobClient

    values = upload_large_array(azure, tmp_path / "v2")
    url, shard = f"az://{CONTAINER}/data", "data/big/c/0/0"
    options = ["--shard-size", "1MiB"]
    if left == "another object":
        obstore.put(azure, shard, b"x" * 17_000)
    else:
        blob = BlobClient.from_connection_string(connection_string(azurite), CONTAINER, shard)
        blob.stage_block("YmxvY2sx", b"x" * 100)
    temporaries = [
        f"data/big/c/0/.0.0123abcd{TEMP_SUFFIX}",
        f"data/big/c/0/.9.0123abcd{TEMP_SUFFIX}",
    ]
    for temporary in temporaries:
        obstore.put(azure, temporary, b"left by a killed run")
    assert main(["to-v3", url, *options, "--remove-v2-metadata"]) == 0
    after = objects(azure)
    assert not [key for key in after if key.endswith(TEMP_SUFFIX)]
    group = zarr.open_group(zarr_store(azurite, CONTAINER, "data"), mode="r", zarr_format=3)
    np.testing.assert_array_equal(group["big"][...], values)  # type: ignore[index]


def test_a_large_shard_packed_again_is_left_as_it_is(
    azure: Any, azurite: str, tmp_path: Path, small_parts: None
) -> None:
    """A shard that goes up in parts, packed again where it is already: the copy into place is
    refused, the shard found holds the same bytes, and it stays the blob it was (not written)."""
    from numcodecs_bytes.store.shard_format import Shard

    upload_large_array(azure, tmp_path / "v2")
    store = open_store(f"az://{CONTAINER}/data")
    names = [f"{row}.{column}" for row in range(8) for column in range(8)]
    shard = Shard(f"{CONTAINER}/data/big/c/0/0", tuple(f"{CONTAINER}/data/big/{n}" for n in names))
    [first] = store.packing.pack([shard]).values()
    placed = obstore.head(azure, "data/big/c/0/0")
    [again] = store.packing.pack([shard]).values()
    assert isinstance(first, Packed) and isinstance(again, Packed), (first, again)
    assert first.written and not again.written
    assert again.sizes == first.sizes == (256,) * 64
    now = obstore.head(azure, "data/big/c/0/0")
    assert (now["e_tag"], now["last_modified"]) == (placed["e_tag"], placed["last_modified"])
    assert not [key for key in objects(azure) if key.endswith(TEMP_SUFFIX)]


SMALL_PARTS = (
    "object_packing.WHOLE_SHARD_BYTES = 1000",
    "object_packing.PART_BYTES = 4096",
    "object_packing.READ_AHEAD_BYTES = 1024",
)
"""`small_parts` in a run of its own (`support.s3.tool_code`)."""


TEMPORARY_BLOCKS = r"data/big/c/0/\.0\.[0-9a-f]+\.numcodecs-bytes-tmp\?comp=block"
"""The requests of the large shard's upload, to its temporary object beside it: a part's
(``comp=block&``) and the completion's (``comp=blocklist``)."""


@pytest.mark.parametrize("paused_at", ["second part", "completion"])
def test_a_run_paused_past_its_lease_mid_upload_places_nothing_once_it_resumes(
    azure: Any, azurite: str, tmp_path: Path, paused_at: str
) -> None:
    """Run B (a lease of 4 s) is stopped (SIGSTOP) for longer than 60% of its lease, at its large
    shard's second part or at the completion of its upload; run A takes the lock over and shards
    the array (its chunk objects stay, so B could read on); B, resumed, places nothing (its upload
    goes to a temporary object, and its lock is checked before each piece and before the copy
    into place) and ends with exit 2, its temporary object gone: A's shard is the blob it was, and
    zarr reads the values. Before the upload went to a temporary object, B's completion, resumed,
    wrote over A's shard."""
    from support.s3 import tool_code
    from support.slowed_tool import paused_past_its_lease

    values = upload_large_array(azure, tmp_path / "v2")
    lease = 4.0
    url = f"az://{CONTAINER}/data"
    seen: list[tuple[subprocess.CompletedProcess[str], Any]] = []
    with fault_proxy(azurite) as proxy:
        endpoint = f"endpoint={proxy.endpoint}/{ACCOUNT}"
        b_command = [sys.executable, "-c", tool_code(True, lease, *SMALL_PARTS), "to-v3", url]
        run_b = subprocess.Popen(
            [*b_command, "--shard-size", "1MiB", "--storage-option", endpoint],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def run_a() -> tuple[subprocess.CompletedProcess[str], Any]:
            a_command = [sys.executable, "-c", tool_code(True, lease), "to-v3", url]
            done = subprocess.run(
                [*a_command, "--shard-size", "1MiB"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            try:
                return done, obstore.head(azure, "data/big/c/0/0")
            except FileNotFoundError:
                return done, None

        pause_b = paused_past_its_lease(run_b.pid, lease, run_a, seen)
        if paused_at == "second part":
            proxy.add(
                Fault("delay", method="PUT", key=TEMPORARY_BLOCKS + "&"),  # the first part
                Fault("before", method="PUT", key=TEMPORARY_BLOCKS + "&", hook=pause_b),
            )
        else:
            proxy.add(Fault("before", method="PUT", key=TEMPORARY_BLOCKS + "list", hook=pause_b))
        try:
            _, err = run_b.communicate(timeout=120)
        finally:
            run_b.kill()
        blocks = [key for method, key in proxy.requests if re.search(TEMPORARY_BLOCKS + "&", key)]
        lists = [key for method, key in proxy.requests if re.search(TEMPORARY_BLOCKS + "list", key)]
        on_the_shard = [
            (method, key)
            for method, key in proxy.requests
            if method != "GET" and re.search(r"data/big/c/0/0(\?|$)", key)
        ]
    [(a_done, shard_after_a)] = seen
    assert a_done.returncode == 0, a_done.stderr
    assert run_b.returncode == 2, err
    assert "stopped, nothing more written; run again to finish" in err, err
    if paused_at == "second part":
        assert len(blocks) <= 3 and not lists, (blocks, lists)  # two parts at most, no completion
    else:
        assert len(blocks) == 5 and len(lists) == 1, (blocks, lists)  # all its parts: the window
    assert not [request for request in on_the_shard if request[0] != "HEAD"], on_the_shard
    shard_now = obstore.head(azure, "data/big/c/0/0")
    assert (shard_now["e_tag"], shard_now["last_modified"]) == (
        shard_after_a["e_tag"],
        shard_after_a["last_modified"],
    )
    assert not [key for key in objects(azure) if key.endswith(TEMP_SUFFIX)]
    group = zarr.open_group(zarr_store(azurite, CONTAINER, "data"), mode="r", zarr_format=3)
    np.testing.assert_array_equal(group["big"][...], values)  # type: ignore[index]


def test_a_chunk_gone_while_its_shard_goes_up_leaves_no_shard_and_the_v2_array_whole(
    azure: Any, azurite: str, tmp_path: Path, small_parts: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another writer removes a chunk object after the listing, while the shard's parts go up: the
    upload is abandoned (no blob appears), the array stays as it was, and the run says so."""
    values = upload_large_array(azure, tmp_path / "v2")
    with fault_proxy(azurite) as proxy:
        proxy.add(
            Fault(
                "before",
                method="GET",
                key=r"data/big/5\.5$",
                hook=lambda: obstore.delete(azure, "data/big/7.7"),
            )
        )
        endpoint = f"endpoint={proxy.endpoint}/{ACCOUNT}"
        arguments = ["--shard-size", "1MiB", "--remove-v2-metadata", "--storage-option", endpoint]
        code = main(["to-v3", f"az://{CONTAINER}/data", *arguments])
        assert proxy.faults[0].hits == 1
    out = capsys.readouterr()
    assert code == 1, out
    assert "7.7" in out.err and "gone" in out.err
    after = objects(azure)
    assert not [key for key in after if "/c/" in key]
    assert "data/big/.zarray" in after and "data/big/0.0" in after
    group = zarr.open_group(zarr_store(azurite, CONTAINER, "data"), mode="r", zarr_format=2)
    expected = values.copy()
    expected[56:, 56:] = 0  # the chunk the other writer removed reads as the fill value
    np.testing.assert_array_equal(group["big"][...], expected)  # type: ignore[index]


@pytest.mark.parametrize("one_listing", [True, False])
def test_the_walk_sees_the_store_alike_from_one_listing_or_folder_by_folder(
    azure: Any, azurite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_listing: bool
) -> None:
    """A store of few keys is listed whole, in one request; where that stops paying (here: a
    thousand keys reduced to one, naming fewer nodes than requests in flight), one folder a
    request. Both see what a walk of the same files on disk sees."""
    from numcodecs_bytes.store import listing

    upload_v2_store(azure, tmp_path / "v2")
    if not one_listing:
        monkeypatch.setattr(listing, "BATCH", 1)
    with fault_proxy(azurite) as proxy:
        endpoint = {"endpoint": f"{proxy.endpoint}/{ACCOUNT}"}
        store = open_store(f"az://{CONTAINER}/data", StoreOptions(storage_options=endpoint))
        proxy.requests.clear()
        seen = sorted(
            (folder.path.removeprefix(f"{CONTAINER}/data"), folder.subfolders, folder.files)
            for batch in store.walk(dry_run=True)
            for folder in batch.folders
        )
        listings = [key for method, key in proxy.requests if "comp=list" in key]
    local = open_store(tmp_path / "v2")
    expected = sorted(
        (folder.path.removeprefix(str(tmp_path / "v2")), folder.subfolders, folder.files)
        for batch in local.walk(dry_run=True)
        for folder in batch.folders
    )
    assert seen == expected
    with_delimiter = [key for key in listings if "delimiter=" in key]
    if one_listing:
        assert (len(listings), with_delimiter) == (1, []), listings
    else:  # the whole listing's first page, then each folder: the group, a, g, g/b
        assert len(with_delimiter) >= 4, listings


STOPS = {
    "its old shards written down, before its switch": (
        "numcodecs_bytes.to_v3.removal.removals:Removals.mark",
        1,
    ),
    "its new shards packed": ("numcodecs_bytes.store.object_packing:ObjectPacking.pack", 1),
    "its switch": ("numcodecs_bytes.to_v3.metadata_pass.zarr_json:ZarrJsonWriter.arrays", 1),
    "its first removal": ("numcodecs_bytes.store.object_files:ObjectFiles.remove", 1),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_resharding_stopped_at_each_step_loses_nothing_and_a_rerun_finishes(
    azure: Any, azurite: str, tmp_path: Path, stop: str
) -> None:
    """A reshard on Azure stopped dead (``os._exit``) at each named step: the array reads its
    values right after the stop and after the rerun, which finishes: the new shards and the
    zarr.json only, no marker, no lock object."""
    values = np.arange(80, dtype="<i4").reshape(8, 10)
    local = tmp_path / "v3"
    array = zarr.create_array(
        str(local), shape=values.shape, chunks=(2, 5), shards=(2, 5), dtype="<i4", compressors=None
    )
    array[...] = values
    upload(azure, local, "data")
    arguments = ["reshard", f"az://{CONTAINER}/data", "--shard-size", "160B"]
    step, calls = STOPS[stop]
    stopped = subprocess.run(
        [sys.executable, "-c", stopped_tool(step, calls), *arguments],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert stopped.returncode == 137, stopped.stderr

    def read() -> Any:
        return zarr.open_array(zarr_store(azurite, CONTAINER, "data"), mode="r")[...]

    np.testing.assert_array_equal(read(), values)
    rerun = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", *arguments],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    np.testing.assert_array_equal(read(), values)
    # (the new shards take the separator the old ones did not, as on a disk)
    assert sorted(objects(azure)) == ["data/c.0.0", "data/c.1.0", "data/zarr.json"]


def test_a_run_that_starts_while_another_packs_is_refused_by_the_lock(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run B is held at its first shard's PUT; run A, which would remove every v2 file, says the
    store is busy (exit 2) and writes nothing; B then finishes, and its lock goes with it."""
    upload_v2_store(azure, tmp_path / "v2")
    url = f"az://{CONTAINER}/data"
    seen: list[subprocess.CompletedProcess[str]] = []
    with fault_proxy(azurite) as proxy:
        endpoint = f"endpoint={proxy.endpoint}/{ACCOUNT}"
        other = [sys.executable, "-m", "numcodecs_bytes", "to-v3", url, "--remove-v2-metadata"]
        proxy.add(
            Fault(
                "before",
                method="PUT",
                key=r"/c/",
                hook=lambda: seen.append(
                    subprocess.run(
                        [*other, "--storage-option", endpoint],
                        capture_output=True,
                        text=True,
                        timeout=120,
                    )
                ),
            )
        )
        code = main(["to-v3", url, "--shard-size", "1MiB", "--storage-option", endpoint])
    assert code == 0, capsys.readouterr()
    [run_a] = seen
    assert run_a.returncode == 2, run_a.stderr
    assert "another numcodecs-bytes run is working on this store (pid " in run_a.stderr
    after = objects(azure)
    assert "data/a/.zarray" in after and "data/.numcodecs-bytes-lock" not in after
    found = read_values(azurite)
    for name, expected in VALUES.items():
        np.testing.assert_array_equal(found[name], expected)


def test_a_zarr_v3_write_between_two_runs_is_kept(
    azure: Any, azurite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metadata-only run keeps v2; zarr-python then writes values through the new zarr.json (a
    chunk object rewritten under its v2 key); the sharding run that follows keeps them: its shards
    hold the v3 writer's bytes, and zarr reads them."""
    from obstore.store import AzureStore
    from support.azure import KEY as ACCOUNT_KEY
    from zarr.storage import ObjectStore

    upload_v2_store(azure, tmp_path / "v2")
    url = f"az://{CONTAINER}/data"
    assert main(["to-v3", url]) == 0
    writable = ObjectStore(
        AzureStore(
            CONTAINER,
            prefix="data",
            account_name=ACCOUNT,
            account_key=ACCOUNT_KEY,
            endpoint=f"{azurite}/{ACCOUNT}",
            client_options={"allow_http": True},
        )
    )
    written = zarr.open_array(writable, path="a", mode="r+", zarr_format=3)
    written[0:2, 0:3] = -7
    expected = VALUES["a"].copy()
    expected[0:2, 0:3] = -7
    capsys.readouterr()
    assert main(["to-v3", url, "--shard-size", "1MiB", "--remove-v2-metadata"]) == 0, (
        capsys.readouterr()
    )
    found = read_values(azurite)
    np.testing.assert_array_equal(found["a"], expected)
    np.testing.assert_array_equal(found["g/b"], VALUES["g/b"])
    assert not [key for key in objects(azure) if key.rsplit("/", 1)[-1].startswith(".z")]
