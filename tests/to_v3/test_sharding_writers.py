"""to-v3 --shard-size where the store is written between two runs, or two runs overlap (issue 55).

Writers between runs: a Zarr v3 writer (zarr's ``append``, a write into a
shard) after a run that kept the v2 metadata; a Zarr v2 writer after one. Runs
at once: one run paused at a point (as a busy host pauses it) while another
works on the same store, given the same folder or one below it. Each test fails
on the release before this one (each names the item of issue 55 it covers).

The oracles: zarr-python reading every array in a fresh interpreter without
this package (`support.zarr_read`), against the values both writers wrote;
tensorstore reading the sharded arrays.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")
from support.stack import has_module
from support.zarr_read import fingerprint
from support.zarr_read import read_in_a_fresh_process as zarr_reads

from numcodecs_bytes.cli import main
from numcodecs_bytes.to_v3 import convert_store
from numcodecs_bytes.to_v3.rules.arrays import array_document

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do


def v2_array(
    path: Path, data: np.ndarray[Any, Any], chunks: tuple[int, ...], **options: Any
) -> None:
    array = zarr.create_array(
        str(path),
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        zarr_format=2,
        fill_value=0,
        **options,
    )
    array[...] = data


def assert_reads(
    root: Path, expected: dict[str, np.ndarray[Any, Any]], zarr_format: int = 3
) -> None:
    """zarr-python in a fresh interpreter reads these arrays (by path below ``root``) with these
    values."""
    read = zarr_reads(root, zarr_format)
    assert {path: read.get(path) for path in expected} == {
        path: fingerprint(data) for path, data in expected.items()
    }


def tensorstore_reads(path: Path) -> list[Any]:
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    values: list[Any] = ts.open(spec, open=True).result().read().result().tolist()
    return values


def chunk_files(folder: Path) -> list[str]:
    """The v2 chunk files below an array's folder (its shards, under ``c/``, left out)."""
    names = (
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.name[0].isdigit()
    )
    return sorted(name for name in names if not name.startswith("c/"))


def codec(path: Path) -> str:
    return str(json.loads((path / "zarr.json").read_text())["codecs"][0]["name"])


# -- writers between runs --------------------------------------------------------------------------


def test_rows_a_v3_writer_appended_after_a_metadata_run_are_sharded_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 1: README's road, then zarr appends through zarr.json (new chunk files under the v2
    keys, a larger shape there, the .zarray as it was), then a sharding run that removes the v2
    files: the sharding plans from the zarr.json (the side that reads the data), so the appended
    rows are in its shards, no chunk file left."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(1, 7, dtype="<i4"), (2,))
    assert main(["to-v3", str(root)]) == 0
    zarr.open_array(str(root), mode="r+").append(np.array([70, 80], dtype="<i4"))
    capsys.readouterr()
    assert main(["to-v3", str(root), "--shard-size", "48B", "--remove-v2-metadata"]) == 0
    out = capsys.readouterr().out
    assert "1 array sharded (1 shard, 4 chunks" in out, out
    expected = np.array([1, 2, 3, 4, 5, 6, 70, 80], dtype="<i4")
    assert_reads(root, {"": expected})
    assert chunk_files(root) == [] and sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
    if has_module("tensorstore"):
        assert tensorstore_reads(root) == expected.tolist()


def test_a_v3_writers_shards_are_never_replaced_by_a_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 2: sharded with the v2 files kept, then zarr appends (into the shards: the last one
    rewritten, a new one), then a rerun with the same size, then one that removes the v2 files: the
    v3 writer's shards are never replaced by shards of the old chunk files, and the appended values
    stay."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(1, 7, dtype="<i4"), (2,))
    assert main(["to-v3", str(root), "--shard-size", "16B"]) == 0
    zarr.open_array(str(root), mode="r+").append(np.array([70, 80, 90], dtype="<i4"))
    expected = np.array([1, 2, 3, 4, 5, 6, 70, 80, 90], dtype="<i4")
    shards = {p: p.read_bytes() for p in (root / "c").rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["to-v3", str(root), "--shard-size", "16B"]) == 0, capsys.readouterr().err
    assert {p: p.read_bytes() for p in (root / "c").rglob("*") if p.is_file()} == shards
    assert_reads(root, {"": expected})
    assert main(["to-v3", str(root), "--shard-size", "16B", "--remove-v2-metadata"]) == 0, (
        capsys.readouterr().err
    )
    assert_reads(root, {"": expected})
    assert chunk_files(root) == [] and not (root / ".zarray").exists()
    if has_module("tensorstore"):
        assert tensorstore_reads(root) == expected.tolist()


def test_removing_the_v2_files_after_a_v3_write_into_a_shard_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 4: sharded with the v2 files kept, then zarr writes into a shard: a later run that
    removes the v2 files finishes (the chunk files are the ones packed, or older than the shard that
    holds their place), and the v3 writer's values stay."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(16, dtype="<i4").reshape(4, 4), (2, 2))
    assert main(["to-v3", str(root), "--shard-size", "32B"]) == 0
    # the first shard (two chunks) rewritten by zarr
    zarr.open_array(str(root), mode="r+")[0, :] = -1
    expected = np.arange(16, dtype="<i4").reshape(4, 4)
    expected[0, :] = -1
    capsys.readouterr()
    assert main(["to-v3", str(root), "--remove-v2-metadata"]) == 0, capsys.readouterr().err
    assert "4 v2 chunk files removed" in capsys.readouterr().out
    assert chunk_files(root) == [] and sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
    assert_reads(root, {"": expected})


def test_a_v2_write_after_the_sharding_keeps_the_v2_files_and_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other side of item 4: a Zarr v2 writer changes a chunk file after the sharding (v3
    readers read the shard, which holds the old bytes): nothing is removed, and the line says what
    to do."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(16, dtype="<i4").reshape(4, 4), (2, 2))
    assert main(["to-v3", str(root), "--shard-size", "32B"]) == 0
    time.sleep(0.01)
    zarr.open_array(str(root), mode="r+", zarr_format=2)[2, 2] = 99  # chunk 1.1, after its shard
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["to-v3", str(root), "--remove-v2-metadata"]) == 1
    err = capsys.readouterr().err
    assert (
        "failed .: 1.1: written after its shard c/1/0 (by a Zarr v2 writer, since the sharding), "
        "which holds other bytes: v3 readers do not see that write; its v2 files are kept." in err
    ), err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_v2_write_where_there_was_no_data_keeps_the_v2_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Zarr v2 writer writes, after the sharding, where the array held no chunk (so no shard holds
    its place): removing the v2 files keeps them, and says why."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.array([1, 2, 0, 0], dtype="<i4"), (2,))
    assert not (root / "1").exists()  # a chunk of fill values: zarr writes none
    assert main(["to-v3", str(root), "--shard-size", "8B"]) == 0
    assert not (root / "c" / "1").exists()
    zarr.open_array(str(root), mode="r+", zarr_format=2)[3] = 9
    capsys.readouterr()
    assert main(["to-v3", str(root), "--remove-v2-metadata"]) == 1
    err = capsys.readouterr().err
    said = (
        "failed .: c/1: no such shard, where chunk files of it are kept (a Zarr v2 writer wrote "
        "where there was no data since the sharding, or a Zarr v3 writer removed it): its v2 files "
        "are kept."
    )
    assert said in err, err
    assert (root / ".zarray").exists() and (root / "1").exists()


def test_v2_readers_keep_reaching_an_array_left_unsharded_through_the_groups_above(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 5: an array left unsharded (a v2 writer changed a chunk while its shards were made)
    keeps its v2 metadata, and so do the groups above it: v2 readers reach it from the root, and the
    root's .zmetadata lists only what is still v2 (an entry of a removed array would read its
    removed chunks as fill values)."""
    from numcodecs_bytes.store.local_shards import LocalPacking

    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "sub/b"):
        group.create_array(name, shape=(8,), chunks=(2,), dtype="<i4", fill_value=0)[...] = (
            np.arange(1, 9)
        )
    zarr.consolidate_metadata(str(root))
    pack = LocalPacking.pack

    def writer_meanwhile(self: LocalPacking, shards: Any, on_progress: Any = None) -> Any:
        packed = pack(self, shards, on_progress)
        zarr.open_array(str(root / "sub" / "b"), mode="r+", zarr_format=2)[0] = 99
        return packed

    monkeypatch.setattr(LocalPacking, "pack", writer_meanwhile)
    report = convert_store(root, shard_size=16, remove_v2_metadata=True)
    assert [path for path, _ in report.failures] == ["sub/b"] and report.sharded == ["a"]
    assert not (root / "a" / ".zarray").exists() and (root / "sub" / "b" / ".zarray").exists()
    assert (root / ".zgroup").exists() and (root / "sub" / ".zgroup").exists()
    listed = json.loads((root / ".zmetadata").read_text())["metadata"]
    assert sorted(listed) == [
        ".zattrs",
        ".zgroup",
        "sub/.zattrs",
        "sub/.zgroup",
        "sub/b/.zarray",
        "sub/b/.zattrs",
    ]
    b = np.array([99, 2, 3, 4, 5, 6, 7, 8], dtype="<i4")
    # through the root's .zmetadata, as xarray opens it
    assert zarr_reads(root, 2) == {"sub/b": fingerprint(b)}
    assert_reads(root, {"a": np.arange(1, 9, dtype="<i4"), "sub/b": b})


def test_a_symlinked_chunk_file_is_packed_from_its_target_and_the_link_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 9: a chunk file that is a symbolic link (a deduplicated store) is packed from its
    target; removing the v2 files removes the link, never its target; a note says so."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(8, dtype="<i4"), (2,))
    elsewhere = tmp_path / "elsewhere"
    (root / "3").rename(elsewhere)
    (root / "3").symlink_to(elsewhere)
    target = elsewhere.read_bytes()
    assert main(["to-v3", str(root), "--shard-size", "16B", "--remove-v2-metadata"]) == 0, (
        capsys.readouterr().err
    )
    assert (
        "1 chunk files are symbolic links: packed from their targets; the links go with the chunk "
        "files, their targets stay" in capsys.readouterr().err
    )
    assert (
        not (root / "3").exists()
        and not (root / "3").is_symlink()
        and elsewhere.read_bytes() == target
    )
    assert_reads(root, {"": np.arange(8, dtype="<i4")})


def test_nested_chunk_folders_go_with_their_chunk_files(tmp_path: Path) -> None:
    """Item 10: chunks in nested folders (``dimension_separator "/"``): once their files are
    removed, their folders go too."""
    root = tmp_path / "s.zarr"
    v2_array(
        root,
        np.arange(64, dtype="<i4").reshape(8, 8),
        (2, 2),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    assert (root / "3" / "3").is_file()
    report = convert_store(root, shard_size=64, remove_v2_metadata=True)
    assert report.failures == [] and report.chunks_removed == 16
    assert sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
    assert_reads(root, {"": np.arange(64, dtype="<i4").reshape(8, 8)})


def test_shard_shapes_keys_are_paths_however_spelled_and_one_naming_no_array_is_refused(
    tmp_path: Path,
) -> None:
    """Item 11: ``/sub/a`` and ``sub/a/`` name the array ``sub/a``; a key naming no array is an
    error before the run writes anything."""
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array("sub/a", shape=(8,), chunks=(2,), dtype="<i4")[...] = np.arange(8)
    group.create_array("b", shape=(8,), chunks=(2,), dtype="<i4")[...] = np.arange(8)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for wrong in ("nothing", "sub"):
        with pytest.raises(
            ValueError, match=f"shard_shapes names '{wrong}', which is no array of the store"
        ):
            convert_store(root, shard_shapes={wrong: (4,)})
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    report = convert_store(root, shard_shapes={"/sub/a": (4,), "b/": (8,)})
    assert report.failures == [] and sorted(report.sharded) == ["b", "sub/a"]
    assert json.loads((root / "sub" / "a" / "zarr.json").read_text())["chunk_grid"][
        "configuration"
    ] == {"chunk_shape": [4]}
    assert json.loads((root / "b" / "zarr.json").read_text())["chunk_grid"]["configuration"] == {
        "chunk_shape": [8]
    }


def test_a_dry_run_counts_what_the_run_does_and_the_same_size_again_does_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 12: a dry run over a sharded store counts the shards the run would write: none for the
    same size (the release before this one said "8 shards to write" and the run wrote none), and the
    new ones for another size (which reshards it)."""
    root = tmp_path / "s.zarr"
    v2_array(root, np.arange(16, dtype="<i4"), (2,))
    assert main(["to-v3", str(root), "--shard-size", "16B"]) == 0
    capsys.readouterr()
    assert main(["to-v3", str(root), "--shard-size", "16B", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "shards to write" not in out and out.startswith("dry run: nothing to do"), out
    assert main(["to-v3", str(root), "--shard-size", "64B", "--dry-run"]) == 0
    assert "1 shard to write" in capsys.readouterr().out
    assert main(["to-v3", str(root), "--shard-size", "64B"]) == 0
    assert "1 array resharded (1 shard, 8 chunks" in capsys.readouterr().out


def test_temporaries_a_killed_removal_left_in_chunk_folders_are_removed_by_the_rerun(
    tmp_path: Path,
) -> None:
    """Item 13: a run killed while it removed nested chunk files (a chunk file renamed aside, not
    yet removed): the rerun finishes the removal, the temporary file and the emptied folders with
    it."""
    root = tmp_path / "s.zarr"
    v2_array(
        root,
        np.arange(16, dtype="<i4").reshape(4, 4),
        (2, 2),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    assert convert_store(root, shard_size=32).failures == []
    # What a run killed while removing the chunk files leaves: the v2 metadata aside, a chunk file
    # renamed aside.
    zarray = json.loads((root / ".zarray").read_text())
    unsharded = array_document(zarray, {}).document
    (root / ".zarray.numcodecs-bytes-removing").write_text(
        json.dumps({"zarray": zarray, "unsharded": unsharded})
    )
    for name in (".zarray", ".zattrs"):
        (root / name).unlink()
    (root / "1" / "1").rename(root / "1" / ".1.3a9f0c.numcodecs-bytes-tmp")
    (root / "0" / "0").unlink()
    report = convert_store(root)
    assert report.failures == [] and report.finished_removals == [""]
    assert sorted(p.name for p in root.iterdir()) == ["c", "zarr.json"]
    assert_reads(root, {"": np.arange(16, dtype="<i4").reshape(4, 4)})


def test_remove_v2_metadata_says_it_removes_chunk_files_with_shard_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Item 14."""
    with pytest.raises(SystemExit):
        main(["to-v3", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "never chunks" not in text
    assert "with --shard-size, also the chunk files its shards hold" in text, text


# -- two runs at once ------------------------------------------------------------------------------

PAUSED = """
import os, sys, time
pause, go = sys.argv[1], sys.argv[2]
copy = os.copy_file_range
def paused(*args):
    if not os.path.exists(pause):
        open(pause, "w").close()
        while not os.path.exists(go):
            time.sleep(0.01)
    return copy(*args)
os.copy_file_range = paused
from numcodecs_bytes.cli import main
sys.exit(main(sys.argv[3:]))
"""
"""The command line, paused at its first shard (its first copy of a chunk file) until a file says
go."""


@pytest.mark.skipif(
    not hasattr(os, "copy_file_range"), reason="pauses at the kernel's copy (Linux)"
)
@pytest.mark.parametrize("second", ["the same folder", "an array below it", "a group above it"])
def test_a_run_given_any_folder_of_a_store_another_run_works_on_is_refused(
    tmp_path: Path, second: str
) -> None:
    """Item 3, on a local disk: run B paused at its first shard; run A, given the store, an array in
    it, or the folder of a group above it, says the store is busy (exit 2) and writes nothing; B
    then finishes."""
    outer = tmp_path / "outer.zarr"
    # a v3 group (a v2 one would refuse run B's removal of a part's v2 files below it)
    zarr.open_group(str(outer), mode="w", zarr_format=3)
    root = outer / "s"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "b"):
        group.create_array(name, shape=(16,), chunks=(2,), dtype="<i4")[...] = np.arange(16)
    pause, go = tmp_path / "paused", tmp_path / "go"
    options = ["--shard-size", "16B", "--remove-v2-metadata"]
    run_b = subprocess.Popen(
        [sys.executable, "-c", PAUSED, str(pause), str(go), "to-v3", str(root), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not pause.exists():
            assert run_b.poll() is None and time.monotonic() < deadline, run_b.communicate()
            time.sleep(0.01)
        given = {
            "the same folder": root,
            "an array below it": root / "a",
            "a group above it": outer,
        }[second]
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        run_a = subprocess.run(
            [sys.executable, "-m", "numcodecs_bytes", "to-v3", str(given), "--shard-size", "16B"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert run_a.returncode == 2, run_a.stderr
        busy = (
            f"numcodecs-bytes to-v3: error: {outer}: another numcodecs-bytes run is working on "
            "this store\n"
        )
        assert run_a.stderr == busy
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    finally:  # run B goes on (and ends) whatever happened here
        go.touch()
        _, err = run_b.communicate(timeout=120)
    assert run_b.returncode == 0, err
    assert_reads(root, {"a": np.arange(16, dtype="<i4"), "b": np.arange(16, dtype="<i4")})


def test_after_a_run_was_killed_a_rerun_on_the_same_machine_takes_its_s3_lock_at_once(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run killed (SIGKILL) leaves its lock object: a rerun on the same machine sees that its
    process has ended, takes the lock over at once and finishes."""
    from support.s3 import empty_bucket

    s3 = next(empty_bucket(endpoint, monkeypatch, "killed"))
    local = tmp_path / "s.zarr"
    v2_array(local, np.arange(64, dtype="<i4"), (2,))
    s3.put(str(local), "killed/s", recursive=True)
    env = {**os.environ, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    url = "s3://killed/s"
    run = subprocess.Popen(
        [sys.executable, "-m", "numcodecs_bytes", "to-v3", url, "--shard-size", "16B"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not s3.exists("killed/s/.numcodecs-bytes-lock"):
        assert run.poll() is None and time.monotonic() < deadline, (
            "the run ended before it took its lock"
        )
        s3.invalidate_cache()
        time.sleep(0.005)
    run.send_signal(signal.SIGKILL)
    run.wait()
    s3.invalidate_cache()
    assert s3.exists("killed/s/.numcodecs-bytes-lock")
    rerun = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", "to-v3", url, "--shard-size", "16B"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    s3.invalidate_cache()
    assert not s3.exists("killed/s/.numcodecs-bytes-lock")
    assert zarr_reads(url, 3, endpoint) == {"": fingerprint(np.arange(64, dtype="<i4"))}


def test_the_root_consolidation_is_rewritten_once_per_round_not_once_per_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 8: 60 arrays of two shards each under a consolidated root: one round, so the root's
    zarr.json is brought up to date once by the sharding (the release before this one rewrote it
    once per array: 60 times)."""
    from numcodecs_bytes.store.local import LocalFiles

    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for i in range(60):
        group.create_array(f"a{i:02d}", shape=(8,), chunks=(2,), dtype="<i4")[...] = (
            np.arange(8) + i
        )
    zarr.consolidate_metadata(str(root))
    replaced: list[str] = []
    replace = LocalFiles.replace

    def counted(self: LocalFiles, replacements: Any) -> Any:
        replacements = list(replacements)
        replaced.extend(r.path for r in replacements)
        return replace(self, replacements)

    monkeypatch.setattr(LocalFiles, "replace", counted)
    report = convert_store(root, shard_size=16, remove_v2_metadata=True)
    assert report.failures == [] and len(report.sharded) == 60
    assert replaced.count(str(root / "zarr.json")) == 1
    assert_reads(root, {f"a{i:02d}": np.arange(8, dtype="<i4") + i for i in range(60)})


@pytest.mark.parametrize("writer", ["zarr v2", "zarr v3"])
def test_a_chunk_written_where_none_was_while_the_shards_are_made_keeps_the_array_unsharded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A writer fills a region that held no chunk (only the fill value) after the chunk files were
    listed and before the switch: its new chunk file is in no shard, so the array stays unsharded,
    reported, and reads the write through either metadata."""
    from numcodecs_bytes.store.local_shards import LocalPacking

    root = tmp_path / "s.zarr"
    data = np.arange(1, 9, dtype="<i4")
    data[4:6] = 0
    v2_array(root, data, (2,))
    (root / "2").unlink(missing_ok=True)  # zarr writes no chunk of fill values: to be sure
    pack = LocalPacking.pack

    def writer_meanwhile(self: LocalPacking, shards: Any, on_progress: Any = None) -> Any:
        packed = pack(self, shards, on_progress)
        zarr.open_array(str(root), mode="r+", zarr_format=2 if writer == "zarr v2" else 3)[4] = 77
        return packed

    monkeypatch.setattr(LocalPacking, "pack", writer_meanwhile)
    report = convert_store(root, shard_size=16, remove_v2_metadata=True)
    assert report.failures == [
        (".", "2: written by someone else while its shards were made: left unsharded")
    ]
    data[4] = 77
    assert codec(root) == "bytes" and (root / "2").is_file()
    for zarr_format in (2, 3):
        assert (
            zarr.open_array(str(root), mode="r", zarr_format=zarr_format)[...].tolist()
            == data.tolist()
        )


def test_the_shard_progress_line_counts_as_it_packs_at_a_true_rate(tmp_path: Path) -> None:
    """Issue 56, item 2: each chunk copy takes 50 ms more; the progress line shows shards and bytes
    while a shard is being packed (not after a batch), and its rate counts from the first byte:
    never more than a chunk's bytes per 50 ms (the release before this one said '109,855,685
    GB/s')."""
    import re

    from support.slowed_tool import slowed_tool

    root = tmp_path / "s.zarr"
    # 40 chunks of 16 KiB
    v2_array(root, np.arange(40 * 4096, dtype="<i4"), (4096,), compressors=None)
    code = slowed_tool(0.05, "copy_file_range")
    result = subprocess.run(
        [sys.executable, "-c", code, "to-v3", str(root), "--shard-size", "160KiB", "--progress"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in re.split(r"\x1b\[K|\r|\n", result.stderr) if " shards, " in line]
    found = [
        re.fullmatch(
            r"to-v3: (\d+) of 4 shards, ([\d.,]+) (k?B|MB) at ([\d.,]+) (k?B|MB)/s(, about .*)?",
            line,
        )
        for line in lines
    ]
    assert lines and all(found), lines
    scale = {"B": 1, "kB": 1e3, "MB": 1e6}
    # shown while packing, not only at the end
    assert any(int(f.group(1)) < 4 for f in found if f), lines
    for f in found:
        assert f is not None
        rate = float(f.group(4).replace(",", "")) * scale[f.group(5)]
        assert rate <= 16384 / 0.05 * 1.5, lines  # a chunk's bytes per 50 ms at most
