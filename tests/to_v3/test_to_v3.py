"""numcodecs-bytes to-v3: Zarr v2 stores that use the bytes filter become standard Zarr v3 stores.

The v2 stores are written by zarr-python 3 (``zarr_format=2``) and, for
zarr 2.18, read from fixtures it wrote (tests/fixtures/zarr218). After each
conversion: every chunk file is byte-identical, the v2 files are unchanged,
and a fresh interpreter reading the store as Zarr v3 with zarr-python's own
codec classes gets exactly the values the v2 store gives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
import numcodecs
from support.slowed_tool import slowed_tool
from support.stack import benchmark, has_module
from support.v2_stores import (
    files_of,
    read_as_v3_read_in_a_fresh_process,
    tensorstore_reads,
    v3_documents,
    write_v2_store,
)

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.to_v3 import convert_store
from numcodecs_bytes.to_v3.rules.arrays import array_document

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

FIXTURES = Path(__file__).parents[1] / "fixtures" / "zarr218"


@pytest.fixture(scope="module")
def v2_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    root = tmp_path_factory.mktemp("v2") / "store.zarr"
    return root, write_v2_store(root)


def test_every_dtype_endian_order_separator_and_compressor_converts(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    source, expected = v2_store
    root = tmp_path / "store.zarr"
    shutil.copytree(source, root)
    before = files_of(root)
    report = convert_store(root)
    assert report.failures == []
    assert len(report.converted) == len(expected) + 2  # every array, the root and the nested group
    assert sum(node.folded is not None for node in report.converted) == len(expected) - 1
    assert files_of(root) == before  # every chunk and every v2 file byte-identical
    read_as_v3_read_in_a_fresh_process(root, expected, tmp_path)
    group = json.loads((root / "zarr.json").read_text())
    assert group["attributes"] == {"title": "v2 store"}
    # zarr 3.1.3 writes it as null, later versions leave it out
    assert group.get("consolidated_metadata") is None
    assert json.loads((root / "nested" / "zarr.json").read_text())["attributes"] == {"level": 1}

    # The legacy id, as old writers wrote it, converts to the very same documents.
    legacy = tmp_path / "legacy.zarr"
    shutil.copytree(source, legacy)
    for path in legacy.rglob(".zarray"):
        path.write_text(path.read_text().replace('"id": "bytes"', '"id": "endian"'))
    legacy_report = convert_store(legacy)
    assert legacy_report.failures == [] and len(legacy_report.converted) == len(report.converted)
    assert v3_documents(legacy) == v3_documents(root)
    assert (
        sum(b'"id": "endian"' in p.read_bytes() for p in legacy.rglob(".zarray"))
        == len(expected) - 1
    )


def test_the_serializer_says_the_filters_endian_and_f_order_is_a_transpose(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]],
) -> None:
    source, _ = v2_store
    for name, endian, order in [
        ("i4_big_F", "big", "F"),
        ("f8_little_C", "little", "C"),
        ("b1_big_C", None, "C"),
    ]:
        zarray = json.loads((source / name / ".zarray").read_text())
        assert zarray["order"] == order
        conversion = array_document(zarray, {})
        document, folded = conversion.document, conversion.folded
        assert folded is not None and f"endian {endian or 'big'}" in folded
        codecs = document["codecs"]
        serializer = next(c for c in codecs if c["name"] == "bytes")
        assert serializer.get("configuration", {}).get("endian") == endian
        assert (codecs[0]["name"] == "transpose") == (order == "F")
        assert document["chunk_key_encoding"]["name"] == "v2"


@pytest.mark.skipif(
    not has_module("tensorstore"), reason="tensorstore is not installed (the interop extra)"
)
def test_tensorstore_reads_the_converted_store(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    source, expected = v2_store
    root = tmp_path / "store.zarr"
    shutil.copytree(source, root)
    convert_store(root)
    assert tensorstore_reads(root, expected) >= 30


def test_consolidated_v2_store_is_consolidated_again_in_v3_form(tmp_path: Path) -> None:
    root = tmp_path / "c.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    array = group.create_group("g").create_array(
        "a",
        shape=(4,),
        chunks=(2,),
        dtype="<i4",
        filters=[BytesCodec(endian="big", dtype="<i4")],
        compressors=None,
    )
    array[...] = [1, 2, 3, 256]
    zarr.consolidate_metadata(str(root))
    report = convert_store(root)
    assert report.failures == [] and report.consolidated
    assert [node.path for node in report.converted][-1] == ""  # the root last: it holds the others
    document = json.loads((root / "zarr.json").read_text())
    assert set(document["consolidated_metadata"]["metadata"]) == {"g", "g/a"}
    opened = zarr.open_consolidated(str(root), zarr_format=3)
    assert opened["g/a"][...].tolist() == [1, 2, 3, 256]


def test_remove_v2_metadata_removes_only_metadata_after_writing(tmp_path: Path) -> None:
    root = tmp_path / "s.zarr"
    expected = {"a": np.arange(6, dtype="<i4")}
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.attrs["x"] = 1
    array = group.create_array(
        "a",
        shape=(6,),
        chunks=(4,),
        dtype="<i4",
        compressors=None,
        filters=[BytesCodec(endian="big", dtype="<i4")],
    )
    array[...] = expected["a"]
    zarr.consolidate_metadata(str(root))
    chunks = {k: v for k, v in files_of(root).items() if not k.rsplit("/", 1)[-1].startswith(".z")}
    code = main(["to-v3", str(root), "--remove-v2-metadata"])
    assert code == 0
    left = files_of(root)
    assert left == chunks  # chunks untouched, every v2 metadata file gone
    assert sorted(p.name for p in root.rglob("zarr.json")) == ["zarr.json", "zarr.json"]
    read_as_v3_read_in_a_fresh_process(root, expected, tmp_path)


def test_dry_run_writes_nothing(
    v2_store: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path
) -> None:
    source, _ = v2_store
    root = tmp_path / "store.zarr"
    shutil.copytree(source, root)
    before = {str(p.relative_to(root)) for p in root.rglob("*")}
    assert main(["to-v3", str(root), "--dry-run", "--remove-v2-metadata"]) == 0
    assert {str(p.relative_to(root)) for p in root.rglob("*")} == before


def test_an_existing_zarr_json_is_never_overwritten_and_a_rerun_is_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "b"):
        group.create_array(
            name, shape=(2,), dtype="<i2", filters=[BytesCodec(endian="big", dtype="<i2")]
        )
    assert main(["to-v3", str(root)]) == 0
    assert main(["to-v3", str(root), "--verbose"]) == 0  # the same documents: kept, nothing written
    assert "kept a/zarr.json (array, already converted)" in capsys.readouterr().out
    (root / "b" / "zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {"mine": 1}}'
    )
    # written after the v2 files: a writer's, through v3 (below: v2 newer)
    assert main(["to-v3", str(root)]) == 0
    err = capsys.readouterr().err
    assert (
        "note b: zarr.json and its .zarray, .zattrs differ (a group in zarr.json, a array in v2)"
        in err
    )
    assert (
        "zarr.json was written after them (through Zarr v3, since the conversion) and is kept"
        in err
    )
    assert json.loads((root / "b" / "zarr.json").read_text())["attributes"] == {"mine": 1}


def test_a_filter_that_cannot_be_folded_is_reported_and_the_rest_converted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array(
        "ours_first",
        shape=(4,),
        dtype="<i4",
        filters=[BytesCodec(endian="big", dtype="<i4"), numcodecs.Delta(dtype=">i4")],
    )
    group.create_array("quantize", shape=(4,), dtype="<f8", filters=[numcodecs.PackBits()])
    group.create_array(
        "fine", shape=(4,), dtype="<i4", filters=[BytesCodec(endian="little", dtype="<i4")]
    )
    (root / "broken").mkdir()
    (root / "broken" / ".zarray").write_text("{")
    assert main(["to-v3", str(root)]) == 1
    err = capsys.readouterr().err
    assert "failed ours_first: filters[0] is the bytes codec but not the last filter" in err
    assert "failed quantize: zarr-python" in err and "cannot convert it" in err
    assert "failed broken: .zarray: not valid JSON" in err
    assert (
        not (root / "ours_first" / "zarr.json").exists() and (root / "fine" / "zarr.json").exists()
    )
    # The root stays v2 (zarr-python opens a node as v3 where it finds a zarr.json): v2 readers
    # still reach all.
    assert "failed .: left as Zarr v2: 3 path(s) below it could not be converted" in err
    assert not (root / "zarr.json").exists()
    assert zarr.open_group(str(root), mode="r")["ours_first"].shape == (4,)


@pytest.mark.parametrize("path", ["missing", "file"])
def test_not_a_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str) -> None:
    (tmp_path / "file").write_text("x")
    assert main(["to-v3", str(tmp_path / path)]) == 2
    assert "numcodecs-bytes to-v3: error:" in capsys.readouterr().err


def test_a_single_v2_array_as_the_store(tmp_path: Path) -> None:
    root = tmp_path / "a.zarr"
    array = zarr.create_array(
        str(root),
        shape=(5,),
        chunks=(2,),
        dtype="<u2",
        zarr_format=2,
        filters=[BytesCodec(endian="big", dtype="<u2")],
        compressors=None,
    )
    array[...] = np.arange(5)
    assert main(["to-v3", str(root)]) == 0
    assert zarr.open_array(str(root), zarr_format=3)[...].tolist() == [0, 1, 2, 3, 4]


def test_zarr_pythons_private_converter_is_still_there() -> None:
    """Pinned: to-v3 uses zarr.metadata.migrate_v3._convert_array_metadata (private), on every zarr
    we support."""
    from zarr.metadata.migrate_v3 import _convert_array_metadata

    assert callable(_convert_array_metadata)
    conversion = array_document(
        {
            "zarr_format": 2,
            "shape": [2],
            "chunks": [2],
            "dtype": "<i4",
            "compressor": None,
            "fill_value": 0,
            "order": "C",
            "filters": [{"id": "bytes", "endian": "big", "dtype": "<i4"}],
        },
        {},
    )
    document = conversion.document
    assert conversion.folded == "filters[0] 'bytes' (endian big)"
    assert document["codecs"] == [{"name": "bytes", "configuration": {"endian": "big"}}]
    assert document["data_type"] == "int32"


def test_zarr_pythons_private_concurrent_map_still_runs_its_calls_at_once() -> None:
    """Pinned: the check reads a sample through both documents with
    zarr.core.common.concurrent_map (private), on every zarr we support: ``func(*item)`` for each
    item, all at once on zarr's event loop, the results in the items' order."""
    import asyncio

    from zarr.core.common import concurrent_map
    from zarr.core.sync import sync

    started: list[str] = []
    both = asyncio.Event()

    async def call(name: str, waits: bool) -> str:
        started.append(name)
        if len(started) == 2:
            both.set()
        if waits:  # ends only once the other call has begun: one after the other, it never would
            await asyncio.wait_for(both.wait(), timeout=10)
        return name.upper()

    assert sync(concurrent_map([("a", True), ("b", False)], call)) == ["A", "B"]
    assert started == ["a", "b"]


@pytest.mark.skipif(not FIXTURES.exists(), reason="no zarr 2.18 fixtures")
def test_stores_written_by_zarr_2_18_convert(tmp_path: Path) -> None:
    root = tmp_path / "store.zarr"
    shutil.copytree(FIXTURES / "store.zarr", root)
    expected = dict(np.load(FIXTURES / "expected.npz"))
    before = files_of(root)
    report = convert_store(root)
    assert report.failures == []
    assert files_of(root) == before
    read_as_v3_read_in_a_fresh_process(
        root, {k.replace("__", "/"): v for k, v in expected.items()}, tmp_path
    )


@pytest.mark.runs_a_benchmark
def test_the_to_v3_benchmark_runs() -> None:
    """benchmarks/to_v3.py keeps working: its three parts, small (the script's own checks run
    too)."""
    bench = benchmark("to_v3")
    assert set(bench.against_zarr(20)) == {
        "zarr's migrate_v2_to_v3",
        "ours",
        "ours, with the filter",
        "ours, with the filter, --no-sample-check",
    }
    assert set(bench.on_the_disk(20)) == {"to-v3 --dry-run", "to-v3"}
    assert bench.with_large_attributes(1)["megabytes"] > 0.5


@pytest.mark.parametrize("endian", ["little", "big"])
def test_structs_convert_where_zarr_orders_their_fields(tmp_path: Path, endian: str) -> None:
    """zarr 3.3+ (PR #4142) orders struct fields by the bytes codec's endian; before, it reads them
    native.

    So before 3.3 little endian fields convert (the serializer says so, zarr 3.1 reads them native,
    which they are) and big endian ones are refused.
    """
    from support.stack import ZARR_SWAPS_STRUCT_FIELDS

    dtype = np.dtype([("a", "<i4"), ("b", "<f8")])
    data = np.zeros(4, dtype)
    data["a"], data["b"] = [1, 2, 3, 256], [0.5, 1.5, -2, 3]
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    ours = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    array = group.create_array(
        "s",
        shape=(4,),
        chunks=(2,),
        dtype=dtype,
        compressors=None,
        filters=[ours],
        fill_value=np.zeros((), dtype)[()],
    )
    array[...] = data
    report = convert_store(root)
    # zarr < 3.3 would read the fields native: refused
    if not ZARR_SWAPS_STRUCT_FIELDS and endian == "big":
        assert [
            (node, "reads struct fields in native order" in reason)
            for node, reason in report.failures[:1]
        ] == [("s", True)]
        assert not (root / "s" / "zarr.json").exists()
        return
    assert report.failures == []
    document = json.loads((root / "s" / "zarr.json").read_text())
    assert document["codecs"] == [{"name": "bytes", "configuration": {"endian": endian}}]
    read_as_v3_read_in_a_fresh_process(root, {"s": data}, tmp_path)


def test_a_killed_runs_temporary_file_is_removed_and_the_rerun_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array(
        "a", shape=(2,), dtype="<i2", filters=[BytesCodec(endian="big", dtype="<i2")]
    )
    leftover = root / "a" / ".zarr.json.x1y2.numcodecs-bytes-tmp"
    leftover.write_text('{"zarr_fo')  # a run killed while writing a/zarr.json
    assert main(["to-v3", str(root), "--verbose"]) == 0
    assert (
        "removed a/.zarr.json.x1y2.numcodecs-bytes-tmp (left by an interrupted run)"
        in capsys.readouterr().out
    )
    assert not leftover.exists()
    assert json.loads((root / "a" / "zarr.json").read_text())["codecs"][0] == {
        "name": "bytes",
        "configuration": {"endian": "big"},
    }


def test_a_new_zarr_json_gets_the_mode_the_umask_gives(tmp_path: Path) -> None:
    import os
    import stat

    root = tmp_path / "s.zarr"
    ours = BytesCodec(endian="big", dtype="<i2")
    zarr.create_array(str(root), shape=(2,), dtype="<i2", zarr_format=2, filters=[ours])
    previous = os.umask(0o007)
    try:
        assert convert_store(root).failures == []
    finally:
        os.umask(previous)
    assert stat.S_IMODE((root / "zarr.json").stat().st_mode) == 0o660


# 20 ms more per zarr.json created; 40 folders a batch
SLOW_TO_V3 = slowed_tool(0.02, "link", batch=40)


def test_ctrl_c_twice_ends_with_one_line_that_counts_what_was_written(tmp_path: Path) -> None:
    """Issue 43, item 9: Ctrl-C, and another during the way out: one line (no asyncio task left
    pending in zarr's loop printed), counting the zarr.json written; exit code 130; a rerun
    finishes."""
    import re
    import signal
    import time

    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    zarray = {
        "zarr_format": 2,
        "shape": [2],
        "chunks": [2],
        "dtype": "<i4",
        "fill_value": 0,
        "order": "C",
        "compressor": None,
        "filters": None,
    }
    for i in range(60):  # two batches of the walk
        (root / f"a{i:04d}").mkdir()
        (root / f"a{i:04d}" / ".zarray").write_text(json.dumps({**zarray, "fill_value": i}))
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_TO_V3, "to-v3", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not any(root.glob("a002*/zarr.json")):  # in the first batch of the walk
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run finished before Ctrl-C"
        )
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and stdout == "", (process.returncode, stdout, stderr)
    line = re.fullmatch(
        r"interrupted: ([\d,]+) zarr\.json written, [\d,]+ of [\d,]+ folders walked; run again to "
        r"finish\n",
        stderr,
    )
    assert line, stderr
    assert int(line.group(1).replace(",", "")) <= len(list(root.glob("*/zarr.json")))
    assert main(["to-v3", str(root)]) == 0 and (root / "zarr.json").exists()  # the rerun finishes
