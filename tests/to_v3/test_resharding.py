"""Resharding without decoding (issue 56): a run with another shard size on arrays sharded already,
by this tool, zarr-python or tensorstore, moves each inner chunk, byte for byte, from the shard it
is in to its new shard.

The oracles: zarr-python reading every array in a fresh interpreter without this package
(`support.zarr_read`), and tensorstore, against the values written; the shard format rebuilt from
the old shards' inner chunks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
from support.stack import has_module
from support.zarr_read import fingerprint
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes.cli import main
from numcodecs_bytes.store.shard_format import parsed_index
from numcodecs_bytes.to_v3 import convert_store

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

DATA = np.arange(24 * 10, dtype="<i4").reshape(24, 10) * 7 - 100


def zarr_sharded(path: Path, shards: tuple[int, int], chunks: tuple[int, int] = (2, 5)) -> None:
    """An array zarr-python writes sharded (zstd inside, as zarr does by default), a chunk left
    empty."""
    array = zarr.create_array(
        str(path), shape=DATA.shape, chunks=chunks, shards=shards, dtype="<i4", fill_value=-1
    )
    array[...] = DATA
    array[2:4, 0:5] = -1  # an inner chunk of fill values: zarr stores no bytes for it


def document(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((path / "zarr.json").read_text())
    return found


def expected() -> np.ndarray[Any, Any]:
    values = DATA.copy()
    values[2:4, 0:5] = -1
    return values


def inner_chunks(path: Path) -> dict[tuple[int, int], bytes]:
    """Every stored inner chunk of a sharded array in a local folder, by its grid index, from its
    shards' bytes."""
    doc = document(path)
    shard_shape = doc["chunk_grid"]["configuration"]["chunk_shape"]
    configuration = doc["codecs"][0]["configuration"]
    inner = configuration["chunk_shape"]
    per = [s // c for s, c in zip(shard_shape, inner, strict=True)]
    separator = doc["chunk_key_encoding"].get("configuration", {}).get("separator", "/")
    at_end = configuration.get("index_location", "end") == "end"
    found = {}
    for i in range(-(-DATA.shape[0] // shard_shape[0])):
        for j in range(-(-DATA.shape[1] // shard_shape[1])):
            file = (
                path / separator.join(["c", str(i), str(j)])
                if separator == "/"
                else path / f"c.{i}.{j}"
            )
            if not file.exists():
                continue
            data = file.read_bytes()
            count = per[0] * per[1]
            index = data[-(count * 16 + 4) :] if at_end else data[: count * 16 + 4]
            for k, entry in enumerate(parsed_index(index, count)):
                if entry is not None:
                    found[(i * per[0] + k // per[1], j * per[1] + k % per[1])] = data[
                        entry[0] : entry[0] + entry[1]
                    ]
    return found


@pytest.mark.parametrize("writer", ["zarr-python", "tensorstore, index at the start"])
def test_an_array_zarr_or_tensorstore_sharded_is_resharded_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str
) -> None:
    """A Zarr v3 store (no v2 metadata): its array, in shards of 4x10, made shards of 12x10 by
    moving each inner chunk's bytes from its shard to its new one (no chunk decoded: every inner
    chunk is the same bytes after); the new shards under ``c.0.0`` (the old under ``c/0/0`` are
    removed); the array reads the same values."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=3)
    if writer == "zarr-python":
        zarr_sharded(root / "a", (4, 10))
    else:
        if not has_module("tensorstore"):
            pytest.skip("tensorstore is not installed (the interop extra)")
        import tensorstore as ts

        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {"chunk_shape": [2, 5], "index_location": "start"},
            }
        ]
        metadata = {
            "shape": list(DATA.shape),
            "data_type": "int32",
            "fill_value": -1,
            "codecs": codecs,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 10]}},
        }
        array = ts.open(
            {
                "driver": "zarr3",
                "kvstore": {"driver": "file", "path": str(root / "a")},
                "create": True,
                "metadata": metadata,
            }
        ).result()
        array[...] = expected()
    before = inner_chunks(root / "a")
    assert main(["to-v3", str(root), "--shard-size", f"{12 * 10 * 4}B"]) == 0, (
        capsys.readouterr().err
    )
    assert "1 array resharded (2 shards, " in capsys.readouterr().out
    doc = document(root / "a")
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [12, 10]
    assert doc["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "."}}
    assert sorted(p.name for p in (root / "a").iterdir()) == ["c.0.0", "c.1.0", "zarr.json"]
    assert inner_chunks(root / "a") == before
    assert zarr_reads(root, 3) == {"a": fingerprint(expected())}
    if has_module("tensorstore"):
        import tensorstore as ts

        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / "a")}}
        assert ts.open(spec, open=True).result().read().result().tolist() == expected().tolist()


@pytest.mark.parametrize("v2_files", ["kept", "removed"])
def test_an_array_this_tool_sharded_is_resharded_with_its_v2_files_kept_or_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], v2_files: str
) -> None:
    """A v2 array sharded (v2 files kept, or removed), then resharded, then resharded again (the
    keys go back to ``c/``): from its shards each time; the v2 chunk files, where kept, stay as v2
    readers read them, and a later removal of the v2 files finds them held by the new shards."""
    root = tmp_path / "s.zarr"
    array = zarr.create_array(
        str(root), shape=DATA.shape, chunks=(2, 5), dtype="<i4", zarr_format=2, fill_value=-1
    )
    array[...] = expected()
    removing = ["--remove-v2-metadata"] if v2_files == "removed" else []
    assert main(["to-v3", str(root), "--shard-size", f"{4 * 10 * 4}B", *removing]) == 0
    for rows, separator in ((12, "."), (24, "/")):
        assert main(["to-v3", str(root), "--shard-size", f"{rows * 10 * 4}B"]) == 0, (
            capsys.readouterr().err
        )
        assert "1 array resharded" in capsys.readouterr().out
        doc = document(root)
        assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [rows, 10]
        assert doc["chunk_key_encoding"]["configuration"]["separator"] == separator
        assert zarr_reads(root, 3) == {"": fingerprint(expected())}
    if v2_files == "kept":
        assert zarr_reads(root, 2) == {"": fingerprint(expected())}
        assert main(["to-v3", str(root), "--remove-v2-metadata"]) == 0, capsys.readouterr().err
        assert sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
        assert zarr_reads(root, 3) == {"": fingerprint(expected())}
    assert not [p for p in root.rglob("*") if "numcodecs-bytes" in p.name]


def test_a_writer_between_the_repacking_and_the_switch_keeps_the_array_in_its_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zarr writes into the array (through the zarr.json it reads: into an old shard) after its new
    shards were packed: the array is not switched, keeps its old shards and reads the write."""
    from numcodecs_bytes.store.local_shards import LocalPacking

    zarr_sharded(tmp_path / "a", (4, 10))
    pack = LocalPacking.pack

    def writer_meanwhile(self: LocalPacking, shards: Any, on_progress: Any = None) -> Any:
        packed = pack(self, shards, on_progress)
        zarr.open_array(str(tmp_path / "a"), mode="r+")[5, 5] = 12345
        return packed

    monkeypatch.setattr(LocalPacking, "pack", writer_meanwhile)
    report = convert_store(tmp_path / "a", shard_size=12 * 10 * 4)
    assert report.resharded == []
    assert report.failures == [
        (
            ".",
            "c/1/0: written by someone else while its shards were made: left in the shards it has",
        )
    ]
    values = expected()
    values[5, 5] = 12345
    assert zarr.open_array(str(tmp_path / "a"), mode="r")[...].tolist() == values.tolist()
    assert document(tmp_path / "a")["chunk_grid"]["configuration"]["chunk_shape"] == [4, 10]


@pytest.mark.parametrize("moment", ["new shards are placed", "the array switched to them"])
def test_a_resharding_killed_anywhere_reads_right_and_a_rerun_finishes(
    tmp_path: Path, moment: str
) -> None:
    """SIGKILL while the new shards are placed, or once the array switched (its old shards not all
    removed yet): the array reads its values throughout; a rerun finishes (no old shard, no marker,
    no temporary file left)."""
    from support.slowed_tool import slowed_tool

    root = tmp_path / "a"
    zarr_sharded(root, (2, 5))  # 24 shards of one chunk each
    done: Callable[[], bool] = {
        "new shards are placed": lambda: any(p.name.startswith("c.") for p in root.iterdir()),
        "the array switched to them": lambda: (
            b'"separator": "."' in (root / "zarr.json").read_bytes()
        ),
    }[moment]
    code = slowed_tool(0.02, "link", "rename", "replace")
    process = subprocess.Popen(
        [sys.executable, "-c", code, "to-v3", str(root), "--shard-size", f"{12 * 10 * 4}B"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not done():
            assert process.poll() is None and time.monotonic() < deadline, (
                "the run ended before it was killed"
            )
            time.sleep(0.002)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert zarr.open_array(str(root), mode="r")[...].tolist() == expected().tolist()
    assert main(["to-v3", str(root), "--shard-size", f"{12 * 10 * 4}B"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["c.0.0", "c.1.0", "zarr.json"]
    assert zarr_reads(root, 3) == {"": fingerprint(expected())}


STOPS = {
    "its old shards written down, before its switch": (
        "numcodecs_bytes.to_v3.removal.removals:Removals.mark",
        1,
    ),
    "one of two new shards placed": ("numcodecs_bytes.store.local_shards:_placed_shard", 1),
    "its switch": ("numcodecs_bytes.to_v3.metadata_pass.zarr_json:ZarrJsonWriter.arrays", 1),
    "its old shards removed, the list not yet": (
        "numcodecs_bytes.store.local_shards:LocalPacking.tidy",
        1,
    ),
}


def stopped_at(step: str, calls: int, *arguments: str) -> None:
    """``numcodecs-bytes ARGUMENTS`` in a process of its own, stopped dead right after ``step``
    returned the ``calls``-th time (as a killed machine stops it)."""
    from support.slowed_tool import stopped_tool

    done = subprocess.run(
        [sys.executable, "-c", stopped_tool(step, calls), *arguments], capture_output=True
    )
    assert done.returncode == 137, done.stderr.decode()


def readers_read(root: Path, values: np.ndarray[Any, Any]) -> None:
    """zarr-python and (where installed) tensorstore, each in a fresh process without this
    package, read ``values`` from the array at ``root``."""
    from support.zarr_read import tensorstore_reads

    assert zarr_reads(root, 3) == {"": fingerprint(values)}
    if has_module("tensorstore"):
        assert tensorstore_reads(root) == fingerprint(values)


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_resharding_stopped_at_each_step_loses_nothing_and_a_rerun_finishes(
    tmp_path: Path, stop: str
) -> None:
    """A reshard stopped dead at each named step (issue 68: between writing down its old shards
    and switching, the rerun removed the shards the zarr.json still read, and every value read as
    the fill value): the array reads its values right after the stop and after the rerun, which
    finishes (the new shards only, no marker)."""
    root = tmp_path / "a"
    zarr_sharded(root, (2, 5))  # 24 shards of one chunk each
    step, calls = STOPS[stop]
    stopped_at(step, calls, "reshard", str(root), "--shard-size", f"{12 * 10 * 4}B")
    assert zarr.open_array(str(root), mode="r")[...].tolist() == expected().tolist()
    assert main(["reshard", str(root), "--shard-size", f"{12 * 10 * 4}B"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["c.0.0", "c.1.0", "zarr.json"]
    readers_read(root, expected())


def test_a_rerun_with_another_shard_size_removes_the_shards_the_stopped_run_placed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reshard into shards of one chunk stopped after five of its 24 new shards, rerun with
    shards of 12x10: the stopped run's shards outside the new grid (``c.0.1``, ``c.2.0``, ...)
    are removed too (no zarr.json reads them; issue 68 found them left for ever), named with
    ``-v``."""
    root = tmp_path / "a"
    zarr_sharded(root, (4, 10))
    step = "numcodecs_bytes.store.local_shards:_placed_shard"
    stopped_at(step, 5, "reshard", str(root), "--shard-size", "40B")
    placed = sorted(p.name for p in root.iterdir() if p.name.startswith("c."))
    assert len(placed) >= 3 and any(name.endswith(".1") for name in placed), placed
    capsys.readouterr()
    assert main(["reshard", str(root), "--shard-size", f"{12 * 10 * 4}B", "-v"]) == 0
    out = capsys.readouterr().out
    for name in placed:
        if name not in ("c.0.0", "c.1.0"):
            assert f"removed a/{name} (left by an interrupted run)" in out or (
                f"removed {name} (left by an interrupted run)" in out
            ), out
    assert sorted(p.name for p in root.iterdir()) == ["c.0.0", "c.1.0", "zarr.json"]
    readers_read(root, expected())


@pytest.mark.parametrize("v2_files", [False, True])
def test_a_rerun_without_a_shard_size_removes_the_shards_a_stopped_run_placed(
    tmp_path: Path, v2_files: bool
) -> None:
    """A sharding stopped after two of its new shards, rerun with no shard size asked: the array
    still reads the files it read, and the stopped run's shards (no zarr.json reads them) go; a
    v2 array's v2 files stay as they are."""
    root = tmp_path / "a"
    if v2_files:
        array = zarr.create_array(
            str(root), shape=DATA.shape, chunks=(2, 5), dtype="<i4", zarr_format=2, fill_value=-1
        )
        array[...] = expected()
        arguments = ["to-v3", str(root)]
    else:
        zarr_sharded(root, (2, 5))
        arguments = ["to-v3", str(root)]
    before = sorted(p.name for p in root.iterdir())
    step = "numcodecs_bytes.store.local_shards:_placed_shard"
    stopped_at(step, 2, *arguments, "--shard-size", f"{12 * 10 * 4}B")
    assert main(arguments) == 0
    after = sorted(p.name for p in root.iterdir())
    assert after == sorted({*before, "zarr.json"}), after
    readers_read(root, expected())


def test_an_old_shard_another_writer_changes_after_the_switch_stays_on_every_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer rewrites an old shard between the switch and its removal (through the document it
    had open): the shard stays, reported, and so does the list naming it; a rerun, with a shard
    size or without, does not take it for a killed run's leftover, and says why the array is not
    sharded anew while it is there. Removed by hand, the next run finishes."""
    from numcodecs_bytes.to_v3.removal import removals as removal

    root = tmp_path / "a"
    zarr_sharded(root, (2, 5))
    retire = removal.Removals.retire

    def writer_first(self: Any, arrays: list[Any]) -> Any:
        if any(array.retired for array in arrays):
            (root / "c" / "3" / "1").write_bytes(b"another writer's bytes")
        return retire(self, arrays)

    monkeypatch.setattr(removal.Removals, "retire", writer_first)
    size = ["--shard-size", f"{12 * 10 * 4}B"]
    assert main(["reshard", str(root), *size]) == 1
    err = capsys.readouterr().err
    assert "c/3/1: changed by someone else since it was read" in err, err
    monkeypatch.setattr(removal.Removals, "retire", retire)
    for arguments in (["to-v3", str(root)], ["reshard", str(root), *size]):
        assert main(arguments) == 1
        err = capsys.readouterr().err
        assert (root / "c" / "3" / "1").read_bytes() == b"another writer's bytes", arguments
        assert "c/3/1: changed by someone else since it was read" in err, err
    assert ".numcodecs-bytes-retired is there still" not in err  # nothing to shard anew: the same
    (root / "c" / "3" / "1").unlink()
    assert main(["to-v3", str(root)]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["c.0.0", "c.1.0", "zarr.json"]
    readers_read(root, expected())


@st.composite
def documents_and_names(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A v3 array document (any rank to 3, default or v2 keys, either separator) and names below
    its folder: keys of both encodings and separators, in its grid and past it, and others."""
    rank = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 9), min_size=rank, max_size=rank))
    chunks = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    encoding = draw(st.sampled_from(["default", "v2"]))
    separator = draw(st.sampled_from(["/", "."]))
    document = {
        "shape": shape,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": encoding, "configuration": {"separator": separator}},
        "codecs": [{"name": "bytes"}],
    }
    coords = st.lists(st.integers(0, 5), min_size=rank, max_size=rank + 1).map(tuple)
    key = st.builds(
        lambda prefix, sep, index: sep.join([*prefix, *map(str, index)]) or "0",
        st.sampled_from([["c"], []]),
        st.sampled_from(["/", "."]),
        coords,
    )
    other = st.sampled_from(["zarr.json", "c/.zarray", "c/zarr.json", "c", "c.x", "c/01", "x"])
    return document, draw(st.lists(st.one_of(key, other), max_size=12))


def zarr_reads_keys(document: dict[str, Any]) -> set[str]:
    """Every key of the array's grid, as zarr-python encodes it (the oracle)."""
    from itertools import product

    from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

    encoding = document["chunk_key_encoding"]
    kind = DefaultChunkKeyEncoding if encoding["name"] == "default" else V2ChunkKeyEncoding
    encoder = kind(separator=encoding["configuration"]["separator"])
    chunks = document["chunk_grid"]["configuration"]["chunk_shape"]
    grid = [-(-extent // size) for extent, size in zip(document["shape"], chunks, strict=True)]
    return {encoder.encode_chunk_key(index) for index in product(*map(range, grid))}


@given(documents_and_names())
@settings(max_examples=300, deadline=None)
def test_what_a_killed_run_left_is_removed_only_where_the_document_does_not_read_it(
    found: tuple[dict[str, Any], list[str]],
) -> None:
    """The documents decide, against zarr-python's own key encoding: of the files a killed run
    wrote down, those the document reads stay; a shard named as a killed run's leftover is never a
    key the document reads, and is a key of this tool's new shards (v3's default encoding, the
    other separator)."""
    from numcodecs_bytes.store.layout import Location
    from numcodecs_bytes.to_v3.rules.plan import ArrayFound, retiring, unread_shards

    document, names = found
    read = zarr_reads_keys(document)
    retired = {name: "v" for name in names}
    going, staying = retiring(ArrayFound(Location("store", "a"), document, b"", retired=retired))
    assert set(going) | set(staying) == set(retired) and not set(going) & set(staying)
    assert not set(going) & read
    unread = unread_shards(document, names)
    assert not set(unread) & read
    encoding = document["chunk_key_encoding"]
    own = encoding["configuration"]["separator"] if encoding["name"] == "default" else None
    for name in unread:
        separator = "." if own == "/" else "/"
        parts = name.split(separator)
        assert parts[0] == "c" and len(parts) == len(document["shape"]) + 1, name


def test_resharding_on_an_object_store(tmp_path: Path) -> None:
    """On fsspec's memory file system (no local disk): byte ranges read, new shards written, old
    ones removed."""
    fsspec = pytest.importorskip("fsspec")
    local = tmp_path / "a"
    zarr_sharded(local, (4, 10))
    fs = fsspec.filesystem("memory")
    url = f"memory://reshard-{os.getpid()}"
    fs.put(str(local), url.removeprefix("memory://"), recursive=True)
    try:
        report = convert_store(url, shard_size=12 * 10 * 4)
        assert report.failures == [] and report.resharded == [""]
        names = sorted(path.rsplit("/", 1)[-1] for path in fs.find(url.removeprefix("memory://")))
        assert names == ["c.0.0", "c.1.0", "zarr.json"]
        assert zarr.open_array(url, mode="r")[...].tolist() == expected().tolist()
    finally:
        fs.rm(url.removeprefix("memory://"), recursive=True)


def test_resharding_on_s3(endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On S3 (moto): each inner chunk a ranged GET of its shard; the array read right by zarr in a
    fresh interpreter."""
    from support.s3 import empty_bucket

    s3 = next(empty_bucket(endpoint, monkeypatch, "reshard"))
    local = tmp_path / "a"
    zarr_sharded(local, (4, 10))
    s3.put(str(local), "reshard/a", recursive=True)
    from numcodecs_bytes.store import StoreOptions

    report = convert_store(
        "s3://reshard/a",
        shard_size=12 * 10 * 4,
        store_options=StoreOptions(storage_options={"endpoint_url": endpoint}),
    )
    assert report.failures == [] and report.resharded == [""]
    s3.invalidate_cache()
    assert sorted(path.rsplit("/", 1)[-1] for path in s3.find("reshard/a")) == [
        "c.0.0",
        "c.1.0",
        "zarr.json",
    ]
    assert zarr_reads("s3://reshard/a", 3, endpoint) == {"": fingerprint(expected())}


def test_reshard_is_the_command_a_user_guesses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``numcodecs-bytes reshard STORE --shard-size SIZE``: the same run as to-v3's, a shard size
    required."""
    zarr_sharded(tmp_path / "a", (4, 10))
    with pytest.raises(SystemExit) as exited:
        main(["reshard", str(tmp_path / "a")])
    assert (
        exited.value.code == 2
        and "the following arguments are required: --shard-size" in capsys.readouterr().err
    )
    assert main(["reshard", str(tmp_path / "a"), "--shard-size", f"{24 * 10 * 4}B"]) == 0
    assert "1 array resharded (1 shard, " in capsys.readouterr().out
    assert zarr.open_array(str(tmp_path / "a"), mode="r")[...].tolist() == expected().tolist()


def test_a_kept_v2_sharding_says_what_its_kept_chunk_files_cost_and_a_resharding_says_nothing_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, item 4: the run that shards and keeps the v2 files says how much more the disk
    holds; one that reshards (no chunk file kept by it) does not."""
    root = tmp_path / "s.zarr"
    array = zarr.create_array(
        str(root), shape=DATA.shape, chunks=(2, 5), dtype="<i4", zarr_format=2, compressors=None
    )
    array[...] = DATA
    assert main(["to-v3", str(root), "--shard-size", f"{4 * 10 * 4}B"]) == 0
    assert f"note: v2 chunk files kept beside the shards: {DATA.nbytes} B more on disk" in (
        capsys.readouterr().err
    )
    assert main(["to-v3", str(root), "--shard-size", f"{12 * 10 * 4}B"]) == 0
    assert "v2 chunk files kept beside the shards" not in capsys.readouterr().err


@given(
    shape=st.lists(st.integers(1, 300), min_size=1, max_size=3),
    data=st.data(),
    dtype=st.sampled_from(["|u1", "<i2", "<f4", "<f8", "|b1"]),
    shard_size=st.sampled_from([64, 1000, 4096, 1 << 20]),
)
@settings(max_examples=60, deadline=None)
def test_an_array_sharded_at_a_size_asks_for_the_shards_it_has_at_that_size(
    shape: list[int], data: st.DataObject, dtype: str, shard_size: int
) -> None:
    """Worked out once (`plan.layouts`), the layouts of an array sharded at a size say that, asked
    for the same size again, it has the shards asked for: a rerun reshards nothing. Its inner
    chunks are the chunks it was sharded from, and its shards hold whole chunks."""
    from numcodecs_bytes.store.layout import Location
    from numcodecs_bytes.to_v3.rules.arrays import array_document
    from numcodecs_bytes.to_v3.rules.plan import ArrayFound, layouts, reshard_from, shard_count
    from numcodecs_bytes.to_v3.rules.sharding import sharded_document

    chunks = [data.draw(st.integers(1, n), label="chunk") for n in shape]
    zarray = {
        "zarr_format": 2,
        "shape": shape,
        "chunks": chunks,
        "dtype": dtype,
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
    }
    unsharded = array_document(zarray, {}).document
    first = layouts(unsharded, shard_size, None)
    assert first.now is None and first.problem is None
    if first.asked is None:  # one chunk, or chunks larger than the size: left unsharded
        return
    assert list(first.asked.inner) == chunks
    assert all(s % c == 0 for s, c in zip(first.asked.shape, chunks, strict=True))
    sharded = sharded_document(unsharded, first.asked)
    again = layouts(sharded, shard_size, None)
    assert again.now is not None and again.asked is not None
    assert (again.now.shape, again.now.inner) == (first.asked.shape, first.asked.inner)
    assert again.asked.shape == again.now.shape
    array = ArrayFound(Location("store", "a"), sharded, b"")
    assert reshard_from(array, again) is None
    assert shard_count(array, again) == shard_count(
        ArrayFound(Location("store", "a"), unsharded, b""), first
    )
