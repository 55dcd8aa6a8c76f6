"""to-v3 on stores written after a conversion that kept the v2 metadata (issue 43, item 5).

Either side can move on: a v3 writer (xarray, zarr) changes ``zarr.json``, a
v2 writer (zarr 2, a pipeline pinned to ``zarr_format=2``) changes
``.zarray``/``.zattrs``. A later run keeps the side written last: ``zarr.json``
as it is (its stale v2 files removed with ``--remove-v2-metadata``), or
``zarr.json`` brought up to date from the v2 files; where the files' times do
not tell, it fails the node and changes neither. The oracle: xarray opening the
store in a fresh interpreter without this package, against the dataset as
written by both steps.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("xarray", reason="the writers are xarray (the test extra)")
pytest.importorskip("zarr", minversion="3", reason="to-v3 needs zarr 3")

import xarray
from support.xarray_stores import base, open_store

from numcodecs_bytes.cli import main

CHECK = Path(__file__).parents[1] / "support" / "xarray_check.py"


def opened_elsewhere(path: Path, expected: xarray.Dataset, tmp_path: Path) -> dict[str, str]:
    """How a user without this package opens ``path`` (plain, and ``zarr_format=3``) against
    ``expected``."""
    (tmp_path / "expected.pickle").write_bytes(pickle.dumps({"store": expected}))
    (tmp_path / "stores.json").write_text(json.dumps({"store": [str(path), "dataset"]}))
    result = subprocess.run(
        [
            sys.executable,
            str(CHECK),
            str(tmp_path / "expected.pickle"),
            str(tmp_path / "stores.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, str] = json.loads(result.stdout)["store"]
    return found


def first_then_appended(path: Path, **append: object) -> xarray.Dataset:
    """Three steps written as v2 and converted (v2 metadata kept), then three more appended by
    ``append``; the six as xarray opens them written at once as v2."""
    ds = base()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.isel(time=slice(0, 3)).to_zarr(path, zarr_format=2)
        assert main(["to-v3", str(path)]) == 0
        ds.isel(time=slice(3, 6)).to_zarr(path, append_dim="time", **append)  # type: ignore[call-overload]
        ds.to_zarr(path.with_name("whole.zarr"), zarr_format=2)
    whole: xarray.Dataset = open_store(path.with_name("whole.zarr"), "dataset")
    return whole


def test_steps_appended_through_v3_are_kept_and_the_stale_v2_files_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.zarr"
    ds = first_then_appended(path)  # zarr opens zarr.json first: the append goes through v3
    # v2 readers: a stale view
    assert json.loads((path / "temp" / ".zarray").read_text())["shape"] == [3, 4]
    capsys.readouterr()
    assert main(["to-v3", str(path), "--remove-v2-metadata"]) == 0
    out, err = capsys.readouterr()
    assert (
        "zarr.json was written after them (through Zarr v3, since the conversion) and is kept"
        in err
    )
    assert "failed" not in err and "v2 metadata files removed" in out
    assert not list(path.rglob(".z*"))
    assert opened_elsewhere(path, ds, tmp_path) == {
        "plain": "identical",
        "zarr_format=3": "identical",
    }


def test_steps_appended_through_v2_bring_zarr_json_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.zarr"
    ds = first_then_appended(path, zarr_format=2)  # a v2 writer: zarr.json is stale
    assert json.loads((path / "temp" / "zarr.json").read_text())["shape"] == [3, 4]
    capsys.readouterr()
    assert main(["to-v3", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "they were written after zarr.json (by a v2 writer, since the conversion)" in err
    assert "consolidation" in out or "brought up to date" in out, out
    assert json.loads((path / "temp" / "zarr.json").read_text())["shape"] == [6, 4]
    assert opened_elsewhere(path, ds, tmp_path) == {
        "plain": "identical",
        "zarr_format=3": "identical",
    }
    assert main(["to-v3", str(path), "--remove-v2-metadata"]) == 0  # and then the v2 files go
    assert opened_elsewhere(path, ds, tmp_path) == {
        "plain": "identical",
        "zarr_format=3": "identical",
    }


def test_where_the_times_do_not_tell_neither_side_is_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.zarr"
    first_then_appended(path)
    same = os.stat(path / "temp" / "zarr.json").st_mtime_ns
    for name in (".zarray", ".zattrs", "zarr.json"):
        os.utime(path / "temp" / name, ns=(same, same))
    before = {
        name: (path / "temp" / name).read_bytes() for name in (".zarray", ".zattrs", "zarr.json")
    }
    capsys.readouterr()
    assert main(["to-v3", str(path), "--remove-v2-metadata"]) == 1
    err = capsys.readouterr().err
    assert (
        "failed temp: zarr.json and its .zarray, .zattrs differ (shape [6, 4] in zarr.json, [3, 4] "
        "in v2)" in err
    )
    assert "their times do not tell which was written last: both left as they are" in err
    assert (
        "failed .: its zarr.json is left as it is: 1 path(s) below it could not be converted" in err
    )
    assert {name: (path / "temp" / name).read_bytes() for name in before} == before
    # no advice that loses the append
    assert not any("remove zarr.json" in line for line in err.splitlines())


def test_a_run_that_keeps_the_v2_metadata_says_what_v2_readers_will_not_see(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.zarr"
    base().to_zarr(path, zarr_format=2)
    assert main(["to-v3", str(path)]) == 0
    assert "v2 readers see nothing written through Zarr v3 from now on" in capsys.readouterr().err
    assert main(["to-v3", str(path), "--remove-v2-metadata"]) == 0
    assert "v2 readers see nothing" not in capsys.readouterr().err
    np.testing.assert_array_equal(xarray.open_zarr(path).temp.values, base().temp.values)


def test_a_store_written_as_zarr_v3_is_said_to_be_v3_already(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43, item 10: nothing was converted, so it is not "already converted"."""
    path = tmp_path / "s.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base().to_zarr(path, zarr_format=3)
    before = {file: file.stat().st_mtime_ns for file in path.rglob("zarr.json")}
    capsys.readouterr()
    assert main(["to-v3", str(path)]) == 0
    out, err = capsys.readouterr()
    assert (
        out.startswith(f"nothing to do: {len(before)} nodes are Zarr v3 already (") and err == ""
    ), (out, err)
    assert {file: file.stat().st_mtime_ns for file in path.rglob("zarr.json")} == before
