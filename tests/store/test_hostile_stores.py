"""The store tools beside other writers, on odd stores, through kills: nothing removed unread or
changed since.

Each test is one way a store met a run (issue 39's items on a local disk; the
object-store ones are in test_store_tools_faults.py). The oracle is zarr
itself in a fresh process (support/zarr_read.py): every array it reads from
the v2 store before (through ``.zmetadata`` where there is one) it reads with
the same values from the v3 store after, or the run reports why not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.migrate import migrate_store
from numcodecs_bytes.store import Removal, digest, disk, local_writes, open_store
from numcodecs_bytes.store.files import TEMP_SUFFIX
from numcodecs_bytes.to_v3 import NodeResult, convert_store

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

FILTER = [BytesCodec(endian="big", dtype="<i4")]


def consolidated_store(root: Path, arrays: int = 4) -> None:
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for i in range(arrays):
        array = group.create_array(
            f"a{i:03d}", shape=(4,), chunks=(2,), dtype="<i4", filters=FILTER
        )
        array[...] = np.arange(4, dtype="<i4") * (i + 1) + 256
        array.attrs["i"] = i
    zarr.consolidate_metadata(str(root))


def no_v2_metadata(root: Path) -> bool:
    return not [
        path
        for path in root.rglob("*")
        if path.name in (".zarray", ".zgroup", ".zattrs", ".zmetadata")
    ]


# -- data lost -------------------------------------------------------------------------------------


def test_a_node_known_only_from_zmetadata_is_converted_from_it_before_zmetadata_goes(
    tmp_path: Path,
) -> None:
    """Item 1: a001's own .zarray and .zattrs are gone, but v2 readers reach it through
    .zmetadata."""
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    (root / "a001" / ".zarray").unlink()
    (root / "a001" / ".zattrs").unlink()
    before = zarr_reads(root, 2)
    assert "a001" in before
    report = convert_store(root, remove_v2_metadata=True)
    assert report.failures == []
    assert zarr_reads(root, 3) == before and no_v2_metadata(root)
    assert (
        "a001",
        "known only from .zmetadata (its own v2 files are gone): converted from its entry there",
    ) in (report.notes)
    assert zarr.open_group(str(root), mode="r")["a001"].attrs["i"] == 1


def test_a_node_known_only_from_zmetadata_without_a_folder_gets_one(tmp_path: Path) -> None:
    """No chunk written, no folder: zarr 2 reads it through .zmetadata as fill values, and so does
    v3."""
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    zarr.create_array(str(root / "empty"), shape=(3,), dtype="<i2", zarr_format=2, fill_value=7)
    zarr.consolidate_metadata(str(root))
    shutil.rmtree(root / "empty")
    before = zarr_reads(root, 2)
    assert "empty" in before
    report = convert_store(root, remove_v2_metadata=True)
    assert report.failures == [] and zarr_reads(root, 3) == before


def test_a_node_whose_zarray_alone_is_gone_is_converted_from_zmetadata(tmp_path: Path) -> None:
    """Its .zattrs is there, its .zarray not: a .zattrs makes no node (zarr reads it through
    .zmetadata)."""
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    (root / "a002" / ".zarray").unlink()
    before = zarr_reads(root, 2)
    report = convert_store(root)
    assert report.failures == [] and zarr_reads(root, 3) == before
    assert json.loads((root / "a002" / "zarr.json").read_text())["node_type"] == "array"


def test_v2_files_changed_after_they_were_read_are_not_removed(tmp_path: Path) -> None:
    """Item 2: a writer appends to t and sets an attribute after to-v3 read it: its files stay,
    reported."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("t", "u"):
        zarr.create_array(
            str(root / name), data=np.arange(4, dtype="<i4"), chunks=(4,), zarr_format=2
        )

    def writer(node: NodeResult) -> None:
        if node.path == "t":  # its zarr.json is written: the writer comes in
            t = zarr.open_array(str(root / "t"), mode="r+", zarr_format=2)
            t.resize((6,))
            t[4:] = [40, 50]
            t.attrs["units"] = "K"

    report = convert_store(root, remove_v2_metadata=True, on_node=writer)
    failures = dict(report.failures)
    for name in ("t/.zarray", "t/.zattrs"):
        assert (
            failures[name]
            == "changed by someone else since it was read: not removed: left as it is"
        ), failures
    assert (root / "t" / ".zarray").exists() and (root / "t" / ".zattrs").exists()
    assert not (root / "u" / ".zarray").exists()  # unchanged: removed
    assert zarr.open_array(str(root / "t"), mode="r", zarr_format=2)[...].tolist() == [
        0,
        1,
        2,
        3,
        40,
        50,
    ]
    # A rerun sees the v2 files written after zarr.json (the writer's), and brings zarr.json up to
    # date from them.
    again = convert_store(root)
    assert not again.failures and [node.action for node in again.converted if node.path == "t"] == [
        "updated"
    ]
    assert any(
        "written after zarr.json (by a v2 writer" in note
        for path, note in again.notes
        if path == "t"
    )
    t = zarr.open_array(str(root / "t"), mode="r", zarr_format=3)
    assert t[...].tolist() == [0, 1, 2, 3, 40, 50] and t.attrs["units"] == "K"


def test_a_node_added_while_v2_metadata_is_removed_reaches_the_consolidation_on_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: a writer adds late and consolidates again during the removal: .zmetadata (changed)
    stays, and the next run brings late into the v3 root's consolidated metadata."""
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    original = local_writes.remove_one
    added: list[bool] = []

    def removing(removal: Any) -> None:
        if not added:
            added.append(True)
            late = zarr.create_array(
                str(root / "late"), shape=(2,), dtype="<i4", zarr_format=2, fill_value=5
            )
            late[...] = [7, 8]
            zarr.consolidate_metadata(str(root), zarr_format=2)
        original(removal)

    monkeypatch.setattr(local_writes, "remove_one", removing)
    first = convert_store(root, remove_v2_metadata=True)
    assert dict(first.failures) == {
        ".zmetadata": "changed by someone else since it was read: not removed: left as it is"
    }
    monkeypatch.undo()
    second = convert_store(root, remove_v2_metadata=True)
    assert second.failures == [] and second.consolidated
    assert zarr.open_group(str(root), mode="r")["late"][...].tolist() == [7, 8]
    assert (
        "late" in json.loads((root / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    )
    assert no_v2_metadata(root)


def test_a_v3_roots_consolidation_is_brought_up_to_date_on_every_run(tmp_path: Path) -> None:
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    assert convert_store(root, remove_v2_metadata=True).failures == []
    late = zarr.create_array(
        str(root / "late"), shape=(2,), dtype="<i2", zarr_format=3, fill_value=1
    )
    late[...] = [3, 4]
    assert zarr.open_group(str(root), mode="r").metadata.consolidated_metadata is not None
    report = convert_store(root)
    assert report.failures == [] and [n.action for n in report.converted if n.path == ""] == [
        "updated"
    ]
    assert zarr.open_group(str(root), mode="r")["late"][...].tolist() == [3, 4]
    assert [n.action for n in convert_store(root).converted if n.path == ""] == ["kept"]


def test_migrate_killed_between_the_backup_and_the_replace_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 5: the .bak holds the original the rerun would keep: it is the rerun's own, and the
    rerun goes on."""
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), data=np.arange(3, dtype="<i4"), zarr_format=2, filters=FILTER)
    zarray = root / ".zarray"
    zarray.write_text(zarray.read_text().replace('"id": "bytes"', '"id": "endian"'))
    original = zarray.read_bytes()

    def killed(source: str, target: str) -> None:
        raise KeyboardInterrupt  # after the backup was linked, before the replace

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", killed)
        with pytest.raises(KeyboardInterrupt):
            migrate_store(root, backup=True)
    assert (root / ".zarray.bak").read_bytes() == original and zarray.read_bytes() == original
    report = migrate_store(root, backup=True)
    assert report.failures == [] and report.files_changed == [".zarray"]
    assert (
        root / ".zarray.bak"
    ).read_bytes() == original and b'"id": "bytes"' in zarray.read_bytes()
    # A .bak that holds anything else is still never overwritten.
    (root / ".zarray.bak").write_bytes(b"mine")
    zarray.write_bytes(original)
    assert "exists already" in dict(migrate_store(root, backup=True).failures)[".zarray"]


# -- silently wrong values -------------------------------------------------------------------------


def test_nested_chunks_under_a_zarray_without_separator_convert_with_slash(tmp_path: Path) -> None:
    """Item 6: zarr before 2.8 wrote 0/0 chunks (NestedDirectoryStore) under a .zarray without
    dimension_separator; zarr 2.18's NestedDirectoryStore reads them so."""
    root = tmp_path / "s.zarr"
    data = np.arange(12, dtype="<i4").reshape(3, 4) + 1
    array = zarr.create_array(
        str(root),
        data=data,
        chunks=(2, 2),
        zarr_format=2,
        filters=FILTER,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    assert (root / "1" / "1").exists()
    zarray = json.loads((root / ".zarray").read_text())
    del zarray["dimension_separator"]
    (root / ".zarray").write_text(json.dumps(zarray))
    del array
    report = convert_store(root)
    assert report.failures == []
    assert any("chunks lie in nested folders" in note for _, note in report.notes)
    assert zarr.open_array(str(root), zarr_format=3)[...].tolist() == data.tolist()


def test_chunks_in_both_layouts_under_a_zarray_without_separator_are_refused(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), data=np.ones((2, 2), "<i4"), chunks=(1, 1), zarr_format=2)
    zarray = json.loads((root / ".zarray").read_text())
    del zarray["dimension_separator"]
    (root / ".zarray").write_text(json.dumps(zarray))
    (root / "1").mkdir()
    (root / "1" / "0").write_bytes((root / "1.0").read_bytes())
    report = convert_store(root)
    assert "both layouts" in dict(report.failures)["."] and not (root / "zarr.json").exists()


def test_a_sample_of_zeros_vouches_for_no_other_one_byte_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 7: a rule made wrong on purpose (Delta dropped) reads a 1-D one-byte array of zeros
    alike; the array beside it with the same .zarray is read too, and the check catches the rule
    there."""
    from numcodecs_bytes.to_v3.metadata_pass import reading
    from numcodecs_bytes.to_v3.rules import arrays as rules

    original = rules.array_document

    def delta_dropped(*args: Any, **kwargs: Any) -> Any:
        conversion = original(*args, **kwargs)
        codecs = [codec for codec in conversion.document["codecs"] if "delta" not in codec["name"]]
        return type(conversion)(
            **{**vars(conversion), "document": {**conversion.document, "codecs": codecs}}
        )

    monkeypatch.setattr(reading, "array_document", delta_dropped)
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    for name, values in (("a", np.zeros(4, "|u1")), ("b", np.array([1, 2, 3, 5], "|u1"))):
        zarr.create_array(
            str(root / name),
            data=values,
            chunks=(4,),
            zarr_format=2,
            compressors=None,
            filters=[numcodecs.Delta(dtype="|u1")],
            fill_value=9,
        )
    # zeros stored (not the fill value): the sample the check reads
    assert (root / "a" / "0").exists()
    report = convert_store(root)
    assert "the converted metadata reads chunk 0 otherwise than v2" in dict(report.failures)["b"]
    assert not (root / "b" / "zarr.json").exists()


# -- hangs and tracebacks --------------------------------------------------------------------------


def test_a_chunk_zero_that_is_a_fifo_is_refused_not_waited_for(tmp_path: Path) -> None:
    """Item 8, locally: reading a FIFO blocks until a writer comes, for ever."""
    root = tmp_path / "s.zarr"
    zarr.create_array(
        str(root), shape=(4,), chunks=(4,), dtype="<i4", zarr_format=2, filters=FILTER
    )
    os.mkfifo(root / "0")
    result = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", "to-v3", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "failed .: not a regular file: not read" in result.stderr, (
        result.stderr
    )


@pytest.mark.parametrize(
    "unreadable",
    [
        {"codecs": [{"name": "mystery-plugin-codec"}]},
        {"data_type": "float1024"},
        {"shape": "x"},
    ],
    ids=["plugin codec", "newer data type", "bad shape"],
)
def test_a_node_zarr_cannot_read_in_a_consolidated_store_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unreadable: dict[str, Any]
) -> None:
    """Item 9: x/zarr.json (an earlier run's, edited, or another tool's) cannot be consolidated."""
    root = tmp_path / "s.zarr"
    consolidated_store(root, arrays=2)
    zarr.create_array(str(root / "x"), shape=(2,), dtype="<i2", zarr_format=3, fill_value=0)
    document = json.loads((root / "x" / "zarr.json").read_text())
    (root / "x" / "zarr.json").write_text(json.dumps({**document, **unreadable}))
    assert main(["to-v3", str(root)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert sum(line.startswith("failed x: ") for line in err.splitlines()) == 1, err
    assert "failed .: not consolidated" in err and not (root / "zarr.json").exists()


# -- reports ---------------------------------------------------------------------------------------


def test_a_node_in_a_digit_folder_of_a_dot_separated_array_is_reported(tmp_path: Path) -> None:
    """Item 11: with '.' chunk keys a digit-named folder holds no chunk: a node in it is reported as
    a/b is."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    zarr.create_array(str(root / "a"), data=np.ones((2, 2), "<i2"), chunks=(1, 1), zarr_format=2)
    zarr.create_array(str(root / "a" / "0"), data=np.arange(2, dtype="<i2"), zarr_format=2)
    zarr.create_array(str(root / "a" / "b"), data=np.arange(2, dtype="<i2"), zarr_format=2)
    failures = dict(convert_store(root).failures)
    assert (
        failures["a/0"]
        == failures["a/b"]
        == "a node inside the array a: Zarr v3 arrays hold no nodes; left as v2"
    )


def test_a_rerun_with_nothing_to_do_writes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    consolidated_store(root)
    assert main(["to-v3", str(root)]) == 0
    times = {path: path.stat().st_mtime_ns for path in root.rglob("zarr.json")}
    capsys.readouterr()
    assert main(["to-v3", str(root)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("nothing to do: 5 nodes already converted (") and err == ""
    assert {path: path.stat().st_mtime_ns for path in root.rglob("zarr.json")} == times


def test_the_local_disk_sees_one_syncfs_per_batch_step_not_one_fsync_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 12: a batch of new files reaches the disk with one flush before the renames and one
    after."""
    if disk._SYNCFS is None:
        pytest.skip("syncfs is Linux's")
    calls: list[int] = []
    fsyncs: list[int] = []
    flush = disk._SYNCFS

    def counted(descriptor: int) -> int:
        calls.append(descriptor)
        return flush(descriptor)

    monkeypatch.setattr(disk, "_SYNCFS", counted)
    monkeypatch.setattr(os, "fsync", fsyncs.append)
    root = tmp_path / "s.zarr"
    consolidated_store(root, arrays=20)
    assert convert_store(root).failures == []
    # the arrays' batch and the root's, each before and after renames
    assert fsyncs == [] and len(calls) == 4
    shutil.rmtree(root)


def test_verbose_is_one_line_per_node_and_the_documents_only_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``to-v3 --dry-run -v`` on 6 nodes: 6 lines and the summary; ``--show-documents`` adds each
    zarr.json."""
    root = tmp_path / "s.zarr"
    consolidated_store(root, arrays=5)
    assert main(["to-v3", str(root), "--dry-run", "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 7 and all(line.startswith("would write ") for line in out[:6]), out
    assert out[6].startswith(
        "dry run: 6 zarr.json to write (5 bytes filters folded), consolidated ("
    )
    assert main(["to-v3", str(root), "--dry-run", "--show-documents"]) == 0
    shown = capsys.readouterr().out
    # each document, and the root's consolidated copies
    assert shown.count('"zarr_format": 3') == 6 + 5
    assert main(["to-v3", str(root)]) == 0 and main(["to-v3", str(root), "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out[-7:-1]][:1] == ["kept a000/zarr.json"] and out[
        -1
    ].startswith("nothing to do: 6 nodes already converted (")


def test_a_removal_that_cannot_read_the_file_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file to remove is renamed aside before it is compared: where reading it there fails, it
    goes back (under the aside name it would be taken for a killed run's leftover and removed by the
    next run)."""
    root = tmp_path / "s.zarr"
    consolidated_store(root, arrays=1)
    files = open_store(root).files
    zattrs = str(root / "a000" / ".zattrs")
    read = digest((root / "a000" / ".zattrs").read_bytes())

    def unreadable(path: str) -> bytes:
        raise OSError("injected")

    monkeypatch.setattr(local_writes, "read_regular_file", unreadable)
    assert "injected" in str(files.remove([Removal(zattrs, read)])[zattrs])
    assert json.loads((root / "a000" / ".zattrs").read_text()) == {"i": 0}
    assert [p.name for p in (root / "a000").iterdir() if p.name.endswith(TEMP_SUFFIX)] == []
