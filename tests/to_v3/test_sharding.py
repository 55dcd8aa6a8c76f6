"""to-v3 --shard-size: v2 chunk files packed, byte for byte, into Zarr v3 shards (issue 44).

The oracles: zarr-python reading every array as v2 before and as v3 after in
a fresh interpreter, with its own codec classes (and with the zarrs pipeline);
tensorstore reading the numeric arrays; the shard format as the spec gives it,
rebuilt here from the chunk files.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
import numcodecs
from support.slowed_tool import slowed_tool
from support.stack import has_module
from support.v2_stores import (
    files_of,
    read_as_v3_read_in_a_fresh_process,
    tensorstore_reads,
    write_v2_store,
)

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.to_v3 import convert_store
from numcodecs_bytes.to_v3.rules.sharding import (
    ShardLayout,
    is_sharding_of,
    layout_of,
    shard_shape,
    sharded_document,
    shards_of,
)

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do


# -- the rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "chunks", "itemsize", "size", "expected"),
    [
        # the guide's: 32 along the last axis, then 2
        ((8192, 32768), (256, 1024), 4, 64 * 2**20, (512, 32768)),
        ((8192, 32768), (256, 1024), 4, 2**20, (256, 1024)),  # one chunk fits
        ((8192, 32768), (256, 1024), 4, 3 * 2**20 - 1, (256, 2048)),  # two fit, not three
        ((256, 1024, 1024), (8, 256, 256), 4, 64 * 2**20, (16, 1024, 1024)),  # the module's example
        ((10, 10), (3, 3), 8, 10**6, (12, 12)),  # the whole array (edge chunks counted whole)
        ((10, 10), (3, 3), 8, 8 * 9 * 5, (3, 12)),  # a row of four chunks, not a second row
        ((100,), (7,), 2, 14 * 3 + 13, (21,)),  # three chunks of 14 bytes fit in 55
        ((5,), (5,), 1, 1, (5,)),  # smaller than a chunk: one (to-v3 leaves such arrays unsharded)
    ],
)
def test_shard_shapes_by_example(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    itemsize: int,
    size: int,
    expected: tuple[int, ...],
) -> None:
    assert shard_shape(shape, chunks, itemsize, size) == expected


@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(1, 9)), min_size=1, max_size=4),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 4096),
)
def test_a_shard_is_whole_rows_of_chunks_then_as_many_chunks_of_the_next_axis_as_fit(
    axes: list[tuple[int, int]], itemsize: int, size: int
) -> None:
    """The shape the guide describes, told apart from how the code finds it: the shard holds whole
    chunks, never more along an axis than the array has; it is every chunk along the last axes, then
    some along one axis, then one along the axes before it (a block of whole rows in C order); and
    no larger such block would fit."""
    shape, chunks = [n for n, _ in axes], [c for _, c in axes]
    shard = shard_shape(shape, chunks, itemsize, size)
    grid = [-(-n // c) for n, c in zip(shape, chunks, strict=True)]
    counts = [s // c for s, c in zip(shard, chunks, strict=True)]
    assert all(s % c == 0 for s, c in zip(shard, chunks, strict=True))
    assert all(1 <= k <= g for k, g in zip(counts, grid, strict=True))
    chunk_bytes = math.prod(chunks) * itemsize
    assert math.prod(counts) * chunk_bytes <= max(size, chunk_bytes)  # fits, or is one chunk
    partial = [axis for axis, (k, g) in enumerate(zip(counts, grid, strict=True)) if k < g]
    # every chunk along the axes after the last one cut short, one along the axes before it
    if partial:
        last = partial[-1]
        assert all(counts[axis] == 1 for axis in range(last))
        grown = counts.copy()
        grown[last] += 1  # one chunk more along it does not fit
        assert math.prod(grown) * chunk_bytes > size


@given(
    st.lists(
        st.tuples(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=3
    )
)
def test_every_chunk_of_an_array_is_in_one_shard_at_its_place(
    axes: list[tuple[int, int, int]],
) -> None:
    shape = [n for n, _, _ in axes]
    inner = tuple(c for _, c, _ in axes)
    layout = ShardLayout(tuple(c * k for _, c, k in axes), inner)
    seen: list[tuple[int, ...]] = []
    for plan in shards_of(shape, layout):
        seen += [index for index in plan.inner if index is not None]
        assert len(plan.inner) == math.prod(
            s // c for s, c in zip(layout.shape, inner, strict=True)
        )
    grid = [-(-n // c) for n, c in zip(shape, inner, strict=True)]
    assert sorted(seen) == list(product(*map(range, grid)))


def test_a_sharded_document_is_known_as_an_earlier_runs_own() -> None:
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
        "attributes": {"a": 1},
    }
    layout = ShardLayout((4,), (2,))
    sharded = sharded_document(document, layout)
    assert sharded["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
    assert sharded["codecs"][0]["configuration"]["codecs"] == document["codecs"]
    assert layout_of(sharded) == layout and is_sharding_of(
        json.loads(json.dumps(sharded)), document
    )
    # another document: not ours
    assert not is_sharding_of({**sharded, "attributes": {"a": 2}}, document)
    assert layout_of(document) is None and not is_sharding_of(document, document)


# -- whole stores ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def v2_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    root = tmp_path_factory.mktemp("v2") / "store.zarr"
    return root, write_v2_store(root)


def sharded_copy(source: Path, tmp_path: Path, *options: str) -> Path:
    root = tmp_path / "store.zarr"
    shutil.copytree(source, root)
    assert main(["to-v3", str(root), *options]) == 0
    return root


def test_every_dtype_endian_order_separator_and_compressor_reads_the_same_through_shards(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """72 arrays of 2x2 chunks (edges on both axes), this package's filter in both byte orders, C
    and F order, both separators, four compressors: each in shards of two chunks, read by zarr with
    its own codecs."""
    source, expected = v2_store
    before = files_of(source)
    # one chunk of 2x3 complex128, all four of int16
    root = sharded_copy(source, tmp_path, "--shard-size", "96B")
    out = capsys.readouterr().out
    assert f"{len(expected)} arrays sharded" in out, out
    assert {
        path: digest for path, digest in files_of(root).items() if "/c/" not in f"/{path}"
    } == before
    for name in expected:
        document = json.loads((root / name / "zarr.json").read_text())
        assert document["codecs"][0]["name"] == "sharding_indexed", name
        assert document["chunk_key_encoding"]["name"] == "default"
    read_as_v3_read_in_a_fresh_process(root, expected, tmp_path)
    if has_module("zarrs"):
        # zarrs-python 0.2.3 reads big-endian complex arrays wrong, zarr-python's own too (sharded
        # or not): left out
        zarrs_reads_right = {
            name: data
            for name, data in expected.items()
            if not ("c" in name[:3] and "_big_" in name)
        }
        read_as_v3_read_in_a_fresh_process(root, zarrs_reads_right, tmp_path, zarrs=True)


@pytest.mark.skipif(
    not has_module("tensorstore"), reason="tensorstore is not installed (the interop extra)"
)
def test_tensorstore_reads_the_sharded_store(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    source, expected = v2_store
    root = sharded_copy(source, tmp_path, "--shard-size", "96B")
    assert tensorstore_reads(root, expected) >= 30


def test_missing_chunks_filters_and_a_file_count_that_falls(tmp_path: Path) -> None:
    """Missing chunks are empty entries (read as the fill value); Delta, Quantize and this filter in
    big endian shard as they convert; a 2-d array of 10x10 chunks in shards of 25 chunks (two whole
    rows of chunks: 20): 97 chunk files become 5 shards."""
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    data = np.arange(400, dtype="<i4").reshape(20, 20)
    grid = group.create_array(
        "grid",
        shape=(20, 20),
        chunks=(2, 2),
        dtype="<i4",
        fill_value=-1,
        filters=[BytesCodec(endian="big", dtype="<i4")],
    )
    grid[...] = data
    for name in ("0.0", "3.4", "9.9"):
        (root / "grid" / name).unlink()
    expected = data.copy()
    for i, j in ((0, 0), (3, 4), (9, 9)):
        expected[2 * i : 2 * i + 2, 2 * j : 2 * j + 2] = -1
    delta = group.create_array(
        "delta", shape=(12,), chunks=(3,), dtype="<i8", filters=[numcodecs.Delta("<i8")]
    )
    delta[...] = np.arange(12) ** 2
    quantize = group.create_array(
        "quantize",
        shape=(9,),
        chunks=(2,),
        dtype="<f8",
        filters=[numcodecs.Quantize(digits=3, dtype="<f8")],
    )
    quantize[...] = np.linspace(0, 1, 9)
    chunk_files = len([p for p in (root / "grid").iterdir() if not p.name.startswith(".")])
    report = convert_store(root, shard_size=25 * 2 * 2 * 4, remove_v2_metadata=True)
    assert report.failures == [] and sorted(report.sharded) == ["delta", "grid", "quantize"]
    assert chunk_files == 97 and sorted(p.name for p in (root / "grid").iterdir()) == [
        "c",
        "zarr.json",
    ]
    shards = sorted(
        p.relative_to(root / "grid").as_posix()
        for p in (root / "grid" / "c").rglob("*")
        if p.is_file()
    )
    assert shards == [f"c/{row}/0" for row in range(5)]
    opened = zarr.open_group(str(root), mode="r", zarr_format=3)
    assert opened["grid"][...].tolist() == expected.tolist()
    assert opened["delta"][...].tolist() == (np.arange(12) ** 2).tolist()
    np.testing.assert_allclose(opened["quantize"][...], np.linspace(0, 1, 9), atol=1e-3)


def test_arrays_with_nothing_to_shard_stay_as_they_are(tmp_path: Path) -> None:
    """One chunk, 0-d, zero-size: nothing to gather; strings of any length: no fixed size (a
    note)."""
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array("one", shape=(4,), chunks=(4,), dtype="<i4")[...] = [1, 2, 3, 4]
    group.create_array("scalar", shape=(), dtype="<f8")[...] = 1.5
    group.create_array("empty", shape=(0, 3), chunks=(2, 3), dtype="<f4")
    strings = group.create_array("strings", shape=(4,), chunks=(2,), dtype=str)
    strings[...] = np.array(["a", "bb", "", "ccc"], dtype=object)
    report = convert_store(root, shard_size=1)
    assert report.failures == [] and report.sharded == []
    assert (
        "strings",
        "left unsharded: its elements have no fixed size, so no shard size says how many fit",
    ) in (report.notes)
    assert not list(root.rglob("c"))


def _arrays_to_shard(root: Path, count: int) -> dict[str, np.ndarray[Any, Any]]:
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    written = {}
    for i in range(count):
        values = np.arange(32, dtype="<i4") * (i + 1)
        group.create_array(f"a{i}", shape=(32,), chunks=(4,), dtype="<i4")[...] = values
        written[f"a{i}"] = values
    return written


@pytest.mark.parametrize(
    ("sample_bytes", "calls"),
    [(None, 2), (1, 12)],
    ids=["together", "an array a batch"],
)
def test_the_checks_of_many_arrays_read_their_chunks_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_bytes: int | None, calls: int
) -> None:
    """The check of what was packed reads one chunk per array through its new shard (its range and
    the shard's index) and through its chunk file: the arrays' reads in one call of the store each
    (`Files.concurrency` at a time: on an object store, requests in flight together; a local disk
    reads one file after another, so it is made to take more here), not one array's after
    another's; with a byte budget below a chunk, a batch per array, every array checked and
    sharded as well."""
    from numcodecs_bytes.store.local import LocalFiles
    from numcodecs_bytes.to_v3.sharding_pass import verify

    root = tmp_path / "s.zarr"
    written = _arrays_to_shard(root, 6)
    if sample_bytes is not None:
        monkeypatch.setattr(verify, "SAMPLE_BYTES", sample_bytes)
    asked: list[list[str]] = []
    original = LocalFiles.read_ranges

    def recorded(self: Any, ranges: Any) -> Any:
        ranges = list(ranges)
        asked.append(sorted(Path(r.path).relative_to(root).as_posix() for r in ranges))
        return original(self, ranges)

    monkeypatch.setattr(LocalFiles, "read_ranges", recorded)
    monkeypatch.setattr(LocalFiles, "concurrency", 8)
    report = convert_store(root, shard_size=32)
    assert report.failures == [] and sorted(report.sharded) == sorted(written)
    asked = [call for call in asked if call]  # (no shard of another shape read: none)
    assert len(asked) == calls, asked
    # each array's first chunk: its range of its first shard and that shard's index, then its file
    every = sorted(f"a{i}/c/0" for i in range(6) for _ in range(2)) + sorted(
        f"a{i}/0" for i in range(6)
    )
    assert sorted(path for call in asked for path in call) == sorted(every)
    for name, values in written.items():
        assert np.array_equal(zarr.open_array(str(root / name), mode="r")[...], values)


def test_sharding_now_and_removing_the_v2_files_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that shards and keeps the v2 files; a rerun, which keeps every shard; a run that
    removes the v2 metadata and the chunk files the shards hold, each only if unchanged."""
    root = tmp_path / "s.zarr"
    array = zarr.create_array(str(root), shape=(8, 6), chunks=(2, 3), dtype=">f8", zarr_format=2)
    array[...] = np.arange(48.0).reshape(8, 6)
    assert main(["to-v3", str(root), "--shard-size", "96B"]) == 0
    assert "1 array sharded (4 shards, 8 chunks" in capsys.readouterr().out
    assert main(["to-v3", str(root)]) == 0  # no --shard-size: the shards are its own, kept
    assert capsys.readouterr().out.startswith("nothing to do: 1 node already converted")
    # v2 too
    assert zarr.open_array(str(root), mode="r", zarr_format=2)[...].tolist() == array[...].tolist()
    assert main(["to-v3", str(root), "--remove-v2-metadata"]) == 0
    assert "8 v2 chunk files removed" in capsys.readouterr().out
    assert sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
    assert (
        zarr.open_array(str(root), mode="r", zarr_format=3)[...].tolist()
        == np.arange(48.0).reshape(8, 6).tolist()
    )


def test_a_dry_run_counts_the_shards_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), shape=(8, 6), chunks=(2, 3), dtype="<f8", zarr_format=2)[...] = 1.0
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    assert (
        main(["to-v3", str(root), "--shard-size", "96B", "--remove-v2-metadata", "--dry-run"]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(
        "dry run: 1 zarr.json to write, 2 v2 metadata files to remove, 4 shards to write, "
        "8 v2 chunk files to remove ("
    ), out
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file()} == before


@pytest.mark.parametrize("command", ["to-v3", "reshard"])
def test_a_dry_run_names_every_file_the_run_removes_and_the_run_names_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """With ``-v``, a dry run names each file the real run then removes, chunk files and old shards
    too, and counts them; the real run's ``-v`` names the same (issue 68: a dry run named the
    metadata only, and the run removed 100 chunk files neither named)."""
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), shape=(8, 6), chunks=(2, 3), dtype="<f8", zarr_format=2)[...] = 1.0
    arguments = [str(root), "--shard-size", "96B", "--remove-v2-metadata", "-v"]
    if command == "reshard":
        assert main(["to-v3", *arguments]) == 0
        arguments = [str(root), "--shard-size", "192B", "-v"]
    capsys.readouterr()
    files = {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}
    assert main([command, *arguments, "--dry-run"]) == 0
    dry = capsys.readouterr().out
    named = {
        line.removeprefix("would remove ") for line in dry.splitlines() if "would remove" in line
    }
    assert main([command, *arguments]) == 0
    real = capsys.readouterr().out
    removed = {
        line.removeprefix("removed ") for line in real.splitlines() if line.startswith("removed ")
    }
    gone = files - {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}
    assert named == removed == gone, (dry, real)
    chunks = {name for name in gone if name not in (".zarray", ".zattrs")}
    assert len(chunks) == (8 if command == "to-v3" else 4), gone
    counted = "8 v2 chunk files" if command == "to-v3" else "4 replaced files"
    assert f"{counted} to remove" in dry and f"{counted} removed" in real, (dry, real)


@pytest.mark.parametrize("element", [0, 6], ids=["the chunk the check reads", "another chunk"])
def test_a_chunk_written_while_its_shard_is_made_keeps_the_array_unsharded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, element: int
) -> None:
    """A v2 writer changes a chunk between its packing and the switch: the array is reported and
    keeps reading its chunk files, which v2 readers keep too; the other array is sharded."""
    from numcodecs_bytes.store.local_shards import LocalPacking

    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "b"):
        group.create_array(name, shape=(8,), chunks=(2,), dtype="<i4")[...] = np.arange(8)
    pack = LocalPacking.pack

    def writer_meanwhile(self: LocalPacking, shards: Any, on_progress: Any = None) -> Any:
        packed = pack(self, shards, on_progress)
        # after the copy, before the switch
        zarr.open_array(str(root / "a"), mode="r+", zarr_format=2)[element] = 99
        return packed

    monkeypatch.setattr(LocalPacking, "pack", writer_meanwhile)
    report = convert_store(root, shard_size=16)
    chunk = element // 2
    assert (
        dict(report.failures)["a"]
        == f"{chunk}: written by someone else while its shards were made: left unsharded"
    )
    assert report.sharded == ["b"]
    assert json.loads((root / "a" / "zarr.json").read_text())["codecs"][0]["name"] == "bytes"
    assert (
        json.loads((root / "b" / "zarr.json").read_text())["codecs"][0]["name"]
        == "sharding_indexed"
    )
    for zarr_format in (2, 3):
        array = zarr.open_array(str(root / "a"), mode="r", zarr_format=zarr_format)
        assert array[...].tolist() == [99 if i == element else i for i in range(8)]


# 3 ms more per file put in place or renamed
SLOWED = slowed_tool(0.003, "link", "replace", "rename")


def _chunk_files(root: Path) -> int:
    return sum(1 for p in root.glob("a*/*") if p.is_file() and p.name.isdigit())


KILLED_WHILE: dict[str, Callable[[Path, int], bool]] = {
    "shards are placed": lambda root, _: any(p.is_file() for p in root.glob("a*/c/*")),
    "arrays switch to them": lambda root, _: any(
        b"sharding_indexed" in p.read_bytes() for p in root.glob("a*/zarr.json")
    ),
    "chunk files are removed": lambda root, chunks: _chunk_files(root) < chunks,
}


@pytest.mark.parametrize(
    ("moment", "removing"),
    [
        ("shards are placed", False),
        ("arrays switch to them", False),
        ("shards are placed", True),
        ("arrays switch to them", True),
        ("chunk files are removed", True),
    ],
)
def test_a_run_killed_anywhere_leaves_every_array_readable_and_a_rerun_finishes(
    tmp_path: Path, moment: str, removing: bool
) -> None:
    """SIGKILL at a moment of the sharding pass: every array reads its values through whichever
    metadata it has (v3 and, where it is still there, v2); a rerun shards every array, with no
    temporary file left and, where it removes, no chunk file (an array's v2 metadata, kept aside
    while its chunk files go, tells the rerun which)."""
    import signal
    import subprocess
    import sys
    import time

    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    expected = {f"a{i}": np.arange(64, dtype="<i4") * (i + 1) for i in range(8)}
    for name, data in expected.items():
        group.create_array(name, shape=(64,), chunks=(4,), dtype="<i4")[...] = data
    chunks = _chunk_files(root)
    options = ["--shard-size", "64B", *(["--remove-v2-metadata"] if removing else [])]
    process = subprocess.Popen(
        [sys.executable, "-c", SLOWED, "to-v3", str(root), *options], stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not KILLED_WHILE[moment](root, chunks):
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run finished before it could be killed"
        )
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run finished before it could be killed"

    for name, data in expected.items():
        formats = [
            f for f, file in ((3, "zarr.json"), (2, ".zarray")) if (root / name / file).exists()
        ]
        assert formats, f"{name}: no metadata left"
        for zarr_format in formats:
            assert (
                zarr.open_array(str(root / name), mode="r", zarr_format=zarr_format)[...].tolist()
                == data.tolist()
            )

    if moment == "chunk files are removed":
        assert list(root.glob("a*/.zarray.numcodecs-bytes-removing")), (
            "killed after the removal, not during it"
        )
    assert main(["to-v3", str(root), *options]) == 0
    for name, data in expected.items():
        assert (
            json.loads((root / name / "zarr.json").read_text())["codecs"][0]["name"]
            == "sharding_indexed"
        ), name
        assert (
            zarr.open_array(str(root / name), mode="r", zarr_format=3)[...].tolist()
            == data.tolist()
        )
    assert not [
        p
        for p in root.rglob("*")
        if p.name.endswith((".numcodecs-bytes-tmp", ".numcodecs-bytes-removing"))
    ]
    assert _chunk_files(root) == (0 if removing else chunks)
    assert (root / "a0" / ".zarray").exists() != removing


def test_a_bad_size_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["to-v3", str(tmp_path), "--shard-size", "12 parsecs"])
    assert exited.value.code == 2
    assert "must be a number of bytes such as 256MiB, 1GB or 512B" in capsys.readouterr().err
    with pytest.raises(
        ValueError, match="shard_size must be a whole number of bytes, 1 or more, got 0"
    ):
        convert_store(tmp_path, shard_size=0)


def test_a_bare_number_below_a_mebibyte_is_refused_and_chunks_larger_than_the_size_stay_unsharded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 56, item 1: ``--shard-size 64`` (64 bytes, where 64 MiB was meant) is a usage error
    that names the units; arrays whose chunks hold more than the size asked stay unsharded, with one
    note for them all (one chunk a shard would be that chunk and an index: no fewer files)."""
    with pytest.raises(SystemExit) as exited:
        main(["to-v3", str(tmp_path), "--shard-size", "64"])
    assert exited.value.code == 2
    assert (
        "64 without a unit is 64 bytes: give the unit (64MiB? 64MB? 64B for bytes)"
        in capsys.readouterr().err
    )
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "b", "c"):  # chunks of 4 KiB
        group.create_array(name, shape=(4096,), chunks=(1024,), dtype="<i4")[...] = np.arange(4096)
    # chunks of 64 B
    group.create_array("small", shape=(64,), chunks=(16,), dtype="<i4")[...] = np.arange(64)
    assert main(["to-v3", str(root), "--shard-size", "1KiB"]) == 0
    out, err = capsys.readouterr()
    assert "1 array sharded" in out, out
    assert err.count("shard of one chunk is that chunk and an index") == 1, err
    assert (
        "note a, b, c: left unsharded: each of its chunks holds more than --shard-size of data"
        in err
    ), err
