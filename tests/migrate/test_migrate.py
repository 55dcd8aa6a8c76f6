"""numcodecs-bytes migrate: legacy ``endian`` stores upgraded in place, safely."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.slowed_tool import slowed_tool

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.migrate import migrate_metadata, migrate_store, rewrite_text

pytest.importorskip("zarr", minversion="3", reason="building the test stores needs zarr 3")
from zarr.codecs import BytesCodec as ZarrBytesCodec

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do


def summary(result: subprocess.CompletedProcess[str]) -> str:
    """The last line of a store tool's output, without the time it took."""
    return re.sub(r" \(\d+\.\d s\)$", "", result.stdout.strip().splitlines()[-1])


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line, run in this process: ``main(args)`` with its output captured."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse: --help, usage errors
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(
        ["numcodecs-bytes", *args], code, stdout.getvalue(), stderr.getvalue()
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def digest(files: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def make_legacy(root: Path) -> int:
    """Rename the bytes codec to the draft's name in every metadata file, as old writers did."""
    count = 0
    for path in root.rglob("*"):
        if path.name == "zarr.json":
            text = path.read_text()
            count += text.count('"name": "bytes"')
            path.write_text(text.replace('"name": "bytes"', '"name": "endian"'))
        elif path.name in (".zarray", ".zmetadata"):
            text = path.read_text()
            count += text.count('"id": "bytes"')
            path.write_text(text.replace('"id": "bytes"', '"id": "endian"'))
    return count


ORIGINALS: dict[str, np.ndarray[Any, Any]] = {
    "a": np.arange(24, dtype="<i4").reshape(4, 6),
    "nested/deeper/b": np.linspace(0, 1, 16, dtype="<f8"),
    "nested/sharded": np.arange(32, dtype="<u2").reshape(4, 8),
    "v2/c": np.arange(10, dtype="<i8") * -3,
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A v3 store: nested groups, an array, a sharded array, consolidated metadata; beside it a v2
    group."""
    root = tmp_path / "store.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_array(
        "a", data=ORIGINALS["a"], chunks=(2, 3), serializer=ZarrBytesCodec(endian="big")
    )
    group.create_array(
        "nested/deeper/b",
        data=ORIGINALS["nested/deeper/b"],
        chunks=(5,),
        serializer=ZarrBytesCodec(endian="big"),
    )
    group.create_array(
        "nested/sharded",
        data=ORIGINALS["nested/sharded"],
        chunks=(2, 2),
        shards=(2, 4),
        serializer=ZarrBytesCodec(endian="big"),
    )
    zarr.consolidate_metadata(str(root))
    v2 = zarr.open_group(str(root / "v2"), mode="w", zarr_format=2)
    v2.create_array(
        "c",
        data=ORIGINALS["v2/c"],
        chunks=(4,),
        filters=[BytesCodec(endian="big", dtype="<i8")],
        compressors=None,
    )
    zarr.consolidate_metadata(str(root / "v2"))
    assert make_legacy(root) >= 8
    return root


def read_all(root: Path) -> dict[str, np.ndarray[Any, Any]]:
    return {name: zarr.open_array(str(root / name), mode="r")[...] for name in ORIGINALS}


def test_zarr_pythons_own_codec_cannot_open_the_legacy_v3_store(store: Path) -> None:
    # With numcodecs-bytes installed, zarr uses numcodecs_bytes.zarr3 for the name
    # (test_zarr3_native.py); zarr-python's own class, chosen explicitly, refuses the draft's name.
    with zarr.config.set({"codecs.endian": "zarr.codecs.bytes.BytesCodec"}):
        with pytest.raises(ValueError, match=r"Expected 'bytes'\. Got endian instead"):
            zarr.open_array(str(store / "a"), mode="r")[...]
    assert zarr.open_array(str(store / "a"), mode="r")[...].tolist() == ORIGINALS["a"].tolist()


def test_migrate_upgrades_every_node_and_touches_nothing_else(store: Path) -> None:
    before = snapshot(store)
    result = cli("migrate", str(store), "--verbose")
    assert result.returncode == 0, result.stderr
    after = snapshot(store)

    assert after.keys() == before.keys(), "migrate added or removed files"
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {
        "zarr.json",  # consolidated metadata
        "a/zarr.json",
        "nested/deeper/b/zarr.json",
        "nested/sharded/zarr.json",
        "v2/.zmetadata",
        "v2/c/.zarray",
    }
    for name in changed:  # the only textual change is the codec's name
        assert after[name].replace(b'"bytes"', b'"endian"') == before[name]
        assert b'"endian"' not in after[name].replace(b'"endian": "big"', b"").replace(
            b'"endian": "little"', b""
        )
    for name, data in read_all(store).items():
        assert np.array_equal(data, ORIGINALS[name]), name
    assert zarr.open_group(str(store), mode="r", use_consolidated=True)["a"][0, 1] == 1
    assert (
        "changed a/zarr.json:" in result.stdout
        and "codecs[0]: 'endian' -> 'bytes'" in result.stdout
    )
    assert "codecs[0].configuration.index_codecs[0]" in result.stdout
    assert summary(result) == "6 files changed (10 codecs) in 8 nodes"


def test_second_run_changes_nothing(store: Path) -> None:
    assert cli("migrate", str(store)).returncode == 0
    once = snapshot(store)
    again = cli("migrate", str(store))
    assert again.returncode == 0
    assert (
        summary(again) == "nothing to do: no legacy codec in 8 nodes"
        and again.stdout.count("\n") == 1
    )
    assert snapshot(store) == once


def test_dry_run_changes_no_byte(store: Path) -> None:
    before = snapshot(store)
    result = cli("migrate", str(store), "--dry-run", "--verbose")
    assert result.returncode == 0
    assert snapshot(store) == before
    assert "would change a/zarr.json:" in result.stdout
    assert summary(result) == "dry run: 6 files would change (10 codecs) in 8 nodes"


def test_backup_keeps_the_originals(store: Path) -> None:
    before = snapshot(store)
    assert cli("migrate", str(store), "--backup").returncode == 0
    after = snapshot(store)
    backups = {name: data for name, data in after.items() if name.endswith(".bak")}
    assert {name.removesuffix(".bak") for name in backups} == {
        n for n in before if before[n] != after[n]
    }
    for name, data in backups.items():
        assert data == before[name.removesuffix(".bak")]


DECOY = b'{"filters": [{"id": "endian"}]}'  # chunk bytes that happen to look like metadata


def test_the_walk_stops_at_arrays_and_never_reads_chunks(store: Path) -> None:
    decoy = store / "a" / "c" / "0" / ".zarray"
    decoy.write_bytes(DECOY)
    assert cli("migrate", str(store)).returncode == 0
    assert decoy.read_bytes() == DECOY


def test_permission_bits_are_kept(store: Path) -> None:
    path = store / "a" / "zarr.json"
    path.chmod(0o640)
    assert cli("migrate", str(store)).returncode == 0
    assert path.stat().st_mode & 0o777 == 0o640
    assert b'"bytes"' in path.read_bytes()


def test_broken_file_is_reported_left_alone_and_the_rest_migrated(store: Path) -> None:
    broken = store / "nested" / "deeper" / "b" / "zarr.json"
    # torn by some other tool
    broken.write_bytes(b'{"zarr_format": 3, "codecs": [{"name": "endian"')
    result = cli("migrate", str(store))
    assert result.returncode == 1
    assert "failed nested/deeper/b/zarr.json: not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert broken.read_bytes() == b'{"zarr_format": 3, "codecs": [{"name": "endian"'
    assert np.array_equal(zarr.open_array(str(store / "a"), mode="r")[...], ORIGINALS["a"])
    assert "1 file could not be migrated" in result.stdout


@pytest.fixture
def unwritable(store: Path) -> Iterator[Path]:
    """A metadata file nobody may replace, root included (``chattr +i``, where the file system
    allows it)."""
    path = store / "a" / "zarr.json"
    if os.geteuid() != 0:
        path.chmod(0o444)
        path.parent.chmod(0o555)
    elif (
        subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode
        != 0
    ):
        pytest.skip("cannot make a file unwritable for root here (no chattr support)")
    yield path
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=False)
    path.parent.chmod(0o755)


def test_unwritable_file_is_reported_and_the_rest_migrated(store: Path, unwritable: Path) -> None:
    before = unwritable.read_bytes()
    result = cli("migrate", str(store))
    assert result.returncode == 1
    assert "failed a/zarr.json:" in result.stderr and "Traceback" not in result.stderr
    assert unwritable.read_bytes() == before
    assert not [p for p in store.rglob("*") if p.name.endswith(".numcodecs-bytes-tmp")]
    assert np.array_equal(
        zarr.open_array(str(store / "v2" / "c"), mode="r")[...], ORIGINALS["v2/c"]
    )
    assert b'"bytes"' in (store / "nested" / "sharded" / "zarr.json").read_bytes()


@pytest.mark.parametrize("args", [[], ["/no/such/store"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = cli("migrate", *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_a_folder_that_is_not_a_store_exits_2(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("not zarr")
    result = cli("migrate", str(tmp_path))
    assert result.returncode == 2
    assert "not a Zarr store" in result.stderr and "Traceback" not in result.stderr


def test_help_for_every_subcommand() -> None:
    for command in ([], ["demo"], ["dtypes"], ["migrate"]):
        result = cli(*command, "--help")
        assert result.returncode == 0 and "usage: numcodecs-bytes" in result.stdout
    assert "--dry-run" in cli("migrate", "--help").stdout


def test_every_store_tool_prints_the_exit_codes_in_its_help() -> None:
    from numcodecs_bytes.__main__ import EXIT_CODES

    for command in ("migrate", "to-v3", "reshard"):
        text = " ".join(cli(command, "--help").stdout.split())
        for code, meaning in EXIT_CODES.items():
            assert f"{code} {' '.join(meaning.split())}" in text, (command, code)


def test_console_script_is_the_module() -> None:
    script = Path(sys.executable).parent / "numcodecs-bytes"
    if not script.exists():
        pytest.skip("console script not installed in this environment")
    result = subprocess.run([str(script), "dtypes"], capture_output=True, text=True, check=True)
    assert result.stdout == cli("dtypes").stdout


def test_leftover_temporary_files_of_a_killed_run_are_removed(store: Path) -> None:
    leftover = store / "a" / ".zarr.json.x1y2z3.numcodecs-bytes-tmp"
    leftover.write_text('{"half": ')
    dry = cli("migrate", str(store), "--dry-run", "--verbose")
    assert (
        "would remove a/.zarr.json.x1y2z3.numcodecs-bytes-tmp" in dry.stdout and leftover.exists()
    )
    result = cli("migrate", str(store), "--verbose")
    assert result.returncode == 0
    assert not leftover.exists()
    assert (
        "removed a/.zarr.json.x1y2z3.numcodecs-bytes-tmp (left by an interrupted run)"
        in result.stdout
    )


def test_killed_mid_run_leaves_every_file_whole_and_a_rerun_finishes(tmp_path: Path) -> None:
    root = tmp_path / "many.zarr"
    group = zarr.open_group(str(root), mode="w")
    template = group.create_array(
        "t", data=np.arange(12, dtype="<i4"), chunks=(4,), serializer=ZarrBytesCodec(endian="big")
    )
    assert template[5] == 5
    for g in range(20):
        zarr.open_group(str(root / f"g{g:02d}"), mode="w")
        for a in range(15):
            shutil.copytree(root / "t", root / f"g{g:02d}" / f"a{a:02d}")
    assert make_legacy(root) == 301
    # Each atomic rename is slowed down, so that the run can be watched and killed halfway.
    slow = slowed_tool(0.005, "replace")
    process = subprocess.Popen(
        [sys.executable, "-c", slow, "migrate", str(root)], stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while sum(b'"bytes"' in path.read_bytes() for path in root.rglob("zarr.json")) < 60:
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run finished before it could be killed"
        )
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"

    states = {"old": 0, "new": 0}
    for path in root.rglob("zarr.json"):
        document = json.loads(path.read_text())  # every file parses: old or new, never torn
        if document.get("node_type") == "array":
            states["new" if document["codecs"][0]["name"] == "bytes" else "old"] += 1
    assert states["new"] >= 60 and states["old"] > 0 and sum(states.values()) == 301

    rerun = cli("migrate", str(root))
    assert rerun.returncode == 0, rerun.stderr
    assert f"{states['old']} files changed" in rerun.stdout
    assert not [p for p in root.rglob("*") if p.name.endswith(".numcodecs-bytes-tmp")]
    # Every array was a copy of one template: each now has the template's migrated document.
    migrated = (root / "t" / "zarr.json").read_bytes()
    assert json.loads(migrated)["codecs"][0]["name"] == "bytes"
    assert all(
        (root / f"g{g:02d}" / f"a{a:02d}" / "zarr.json").read_bytes() == migrated
        for g in range(20)
        for a in range(15)
    )
    assert zarr.open_array(str(root / "g19" / "a14"), mode="r")[7] == 7


def test_progress_line_for_many_nodes(tmp_path: Path) -> None:
    root = tmp_path / "wide.zarr"
    zarr.open_group(str(root), mode="w")
    for i in range(120):
        zarr.open_group(str(root / f"g{i:03d}"), mode="w")
    result = cli("migrate", str(root))  # stderr is no terminal: no progress line
    assert result.returncode == 0 and result.stderr == ""
    assert (
        summary(result) == "nothing to do: no legacy codec in 121 nodes"
        and result.stdout.count("\n") == 1
    )


# -- fsspec URLs -----------------------------------------------------------------------------------


def test_fsspec_memory_url(store: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for name, data in snapshot(store).items():
        fs.pipe_file(f"/legacy.zarr/{name}", data)
    fs.pipe_file("/legacy.zarr/a/c/0/.zarray", DECOY)
    report = migrate_store("memory://legacy.zarr")
    assert len(report.files_changed) == 6 and not report.failures
    assert fs.cat_file("/legacy.zarr/a/c/0/.zarray") == DECOY
    migrated = json.loads(fs.cat_file("/legacy.zarr/nested/sharded/zarr.json"))
    inner = migrated["codecs"][0]["configuration"]
    assert inner["codecs"][0]["name"] == inner["index_codecs"][0]["name"] == "bytes"
    assert len(migrate_store("memory://legacy.zarr").files_changed) == 0
    fs.rm("/legacy.zarr", recursive=True)


def test_file_url(store: Path) -> None:
    result = cli("migrate", f"file://{store}")
    assert result.returncode == 0
    assert np.array_equal(zarr.open_array(str(store / "a"), mode="r")[...], ORIGINALS["a"])


# -- the text rewrite keeps everything but the name ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{\n  "filters": [{"id": "endian", "endian": "big"}],\n  "fill_value": 1e-05\n}\n',
        '{\n    "filters": [\n        {\n            "id": "endian",\n'
        '            "endian": "little"\n        }\n    ]\n}',
        '{\n\t"codecs": [{"name":"endian"}, "endian"],\n\t"attributes": {"t": "\\u00e9"}\n}\n',
        '{"codecs":["endian",{"name": "gzip"}],"z":[1.50,2]}',
    ],
)
def test_rewrite_changes_only_the_codec_names(text: str) -> None:
    name = ".zarray" if '"filters"' in text else "zarr.json"
    migrated, locations = migrate_metadata(json.loads(text), name)
    assert locations
    new = rewrite_text(text, json.loads(text), name)
    assert json.loads(new) == migrated
    assert new.replace('"bytes"', '"endian"') == text


def test_rewrite_leaves_a_user_attribute_named_endian_alone() -> None:
    text = (
        '{\n  "attributes": {"name": "endian", "list": ["endian"]},\n'
        '  "codecs": [{"name": "endian"}]\n}\n'
    )
    _, locations = migrate_metadata(json.loads(text), "zarr.json")
    assert locations == ["codecs[0]"]
    new = rewrite_text(text, json.loads(text), "zarr.json")
    assert new == text.replace('"codecs": [{"name": "endian"}]', '"codecs": [{"name": "bytes"}]')


def test_rewrite_of_an_escaped_name_changes_only_that_name() -> None:
    # An escaped spelling used to make the whole file be written again
    text = (
        '{\r\n   "codecs": [{"name": "\\u0065ndian"}, "end\\u0069an"],\r\n'
        ' "x": 1.50E+2, "t": "\\u00e9\u00e9"}\r\n'
    )
    migrated, _ = migrate_metadata(json.loads(text), "zarr.json")
    new = rewrite_text(text, json.loads(text), "zarr.json")
    assert json.loads(new) == migrated
    assert new == text.replace('"\\u0065ndian"', '"bytes"').replace('"end\\u0069an"', '"bytes"')


def test_migrate_metadata_forms() -> None:
    zarray: dict[str, Any] = {
        "filters": [{"id": "endian", "endian": "big"}, {"id": "zlib"}],
        "compressor": {"id": "endian"},
    }
    migrated, locations = migrate_metadata(zarray, ".zarray")
    assert locations == ["compressor", "filters[0]"]
    assert migrated["filters"] == [{"id": "bytes", "endian": "big"}, {"id": "zlib"}]
    assert zarray["filters"][0]["id"] == "endian", "the input must not be mutated"
    zmetadata = {
        "metadata": {"x/.zarray": {"filters": [{"id": "endian"}]}, "x/.zattrs": {"id": "endian"}}
    }
    migrated, locations = migrate_metadata(zmetadata, ".zmetadata")
    assert locations == ["metadata['x/.zarray'].filters[0]"]
    assert migrated["metadata"]["x/.zattrs"] == {"id": "endian"}
    unchanged: Any
    for unchanged in (
        {"filters": None, "compressor": None},
        {"codecs": [{"name": "bytes"}]},
        [],
        "x",
    ):
        assert migrate_metadata(unchanged, "zarr.json")[1] == []


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False),
    st.text(max_size=5),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
legacy_codecs = st.one_of(
    st.just("endian"),
    st.fixed_dictionaries(
        {"name": st.just("endian")}, optional={"configuration": st.just({"endian": "big"})}
    ),
)
other_codecs = st.sampled_from(
    [{"name": "gzip", "configuration": {"level": 1}}, "crc32c", {"name": "bytes"}]
)


@settings(max_examples=200, deadline=None)
@given(
    codecs=st.lists(st.one_of(legacy_codecs, other_codecs), min_size=1, max_size=4),
    attributes=st.dictionaries(
        st.sampled_from(["name", "id", "list", "x"]),
        st.one_of(json_values, st.just("endian"), st.just(["endian"])),
        max_size=4,
    ),
    indent=st.sampled_from([None, 0, 2, 4, "\t"]),
)
def test_rewrite_property(codecs: list[Any], attributes: dict[str, Any], indent: Any) -> None:
    document = {"zarr_format": 3, "node_type": "array", "attributes": attributes, "codecs": codecs}
    text = json.dumps(document, indent=indent)
    migrated, locations = migrate_metadata(document, "zarr.json")
    # The oracle, from the inputs: exactly the legacy codecs of the list are found, nothing in the
    # attributes.
    expected = [
        f"codecs[{i}]"
        for i, c in enumerate(codecs)
        if c == "endian" or (isinstance(c, dict) and c.get("name") == "endian")
    ]
    assert locations == expected
    event("renamed" if locations else "nothing to rename")
    new = rewrite_text(text, document, "zarr.json")
    assert json.loads(new) == migrated
    assert migrated["attributes"] == attributes
    # the minimal edit: each renamed codec's name one character shorter, every other character kept
    assert len(new) == len(text) - len(locations)
    assert new.replace('"bytes"', '"endian"') == text.replace('"bytes"', '"endian"')


@pytest.mark.parametrize("array", ["a", "v2/c"])
def test_path_may_be_a_single_array(store: Path, array: str) -> None:
    before = snapshot(store)
    result = cli("migrate", str(store / array))
    assert result.returncode == 0, result.stderr
    after = snapshot(store)
    assert {name for name in before if before[name] != after[name]} == {
        f"{array}/zarr.json" if array == "a" else f"{array}/.zarray"
    }
    assert summary(result) == "1 file changed (1 codec) in 1 node"
    assert np.array_equal(zarr.open_array(str(store / array), mode="r")[...], ORIGINALS[array])


# -- for people: progress on a terminal, Ctrl-C, --version -----------------------------------------

# The tool with each file replace slowed down by 10 ms (every write makes one), so that a run lasts
# long enough to watch.
SLOW_TOOL = slowed_tool(0.01, "replace")


def write_v3_legacy_array(folder: Path) -> None:
    """A v3 array's metadata (no chunk: it reads as the fill value) with the legacy codec name."""
    folder.mkdir(parents=True)
    (folder / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [4],
                "data_type": "int32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": 0,
                "codecs": [{"name": "endian", "configuration": {"endian": "big"}}],
            }
        )
    )


def test_progress_shows_on_a_terminal_and_is_cleared_and_the_output_is_the_summary(
    tmp_path: Path,
) -> None:
    import pty

    root = tmp_path / "many.zarr"
    zarr.open_group(str(root), mode="w")
    for g in range(60):
        zarr.open_group(str(root / f"g{g:02d}"), mode="w")
    for g in range(60):
        write_v3_legacy_array(root / f"g{g:02d}" / "a")
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_TOOL, "migrate", str(root)],
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    stdout, _ = process.communicate(timeout=120)
    terminal = b""
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal is closed once the process is gone
            break
        if not data:
            break
        terminal += data
    os.close(leader)
    assert process.returncode == 0
    assert re.fullmatch(r"60 files changed \(60 codecs\) in 121 nodes \(\d+\.\d s\)\n", stdout), (
        stdout
    )
    lines = terminal.decode().split("\r\x1b[K")
    assert any(
        re.fullmatch(r"migrate: [\d,]+ of [\d,]+ folders, [\d,]+/s(, about \d+ s left)?", line)
        for line in lines
    )
    assert terminal.endswith(b"\r\x1b[K"), "the progress line is cleared at the end"


def test_ctrl_c_says_how_far_the_run_came_and_exits_130(tmp_path: Path) -> None:
    root = tmp_path / "many.zarr"
    zarr.open_group(str(root), mode="w")
    for g in range(100):
        write_v3_legacy_array(root / f"g{g:02d}")
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_TOOL, "migrate", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not any(b'"bytes"' in path.read_bytes() for path in root.rglob("zarr.json")):
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run finished before Ctrl-C"
        )
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert re.fullmatch(
        r"interrupted: [\d,]+ files? changed, [\d,]+ of [\d,]+ folders walked; "
        r"run again to finish\n",
        stderr,
    ), stderr
    assert stdout == ""
    assert cli("migrate", str(root)).returncode == 0  # the rerun finishes
    assert all(b'"name": "endian"' not in path.read_bytes() for path in root.rglob("zarr.json"))


def test_version() -> None:
    from numcodecs_bytes import __version__

    result = cli("--version")
    assert result.returncode == 0 and result.stdout == f"numcodecs-bytes {__version__}\n"
