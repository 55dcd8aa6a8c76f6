"""migrate against hostile stores: only codec names change, every problem is reported, no
traceback."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numcodecs_bytes.cli import main
from numcodecs_bytes.migrate import migrate_config, migrate_metadata, migrate_store, rewrite_text
from numcodecs_bytes.problems import NotAStoreError, StoreBusyError
from numcodecs_bytes.store import Replacement
from numcodecs_bytes.store.local import LocalFiles

V3_ARRAY = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [4],
    "data_type": "int16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "codecs": [{"name": "endian", "configuration": {"endian": "big"}}],
    "attributes": {},
}


def write_json(path: Path, document: Any, **dumps: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, **dumps))
    return path


def legacy_group(root: Path, arrays: int = 2) -> Path:
    write_json(root / "zarr.json", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    for i in range(arrays):
        write_json(root / f"a{i}" / "zarr.json", V3_ARRAY, indent=2)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``migrate --verbose``: every change on its own line."""
    code = main(["migrate", "--verbose", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- wrong edits -----------------------------------------------------------------------------------


def test_a_v2_codec_is_named_by_its_id_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zlib_with_a_name = {"id": "zlib", "level": 1, "name": "endian"}
    assert migrate_config(zlib_with_a_name) == zlib_with_a_name
    zarray = {
        "zarr_format": 2,
        "filters": [zlib_with_a_name, {"id": "endian", "endian": "big"}],
        "compressor": None,
    }
    path = write_json(tmp_path / "s" / ".zarray", zarray)
    code, out, _ = run(capsys, str(tmp_path / "s"))
    assert code == 0 and "filters[1]" in out and "filters[0]" not in out
    assert json.loads(path.read_text())["filters"] == [
        zlib_with_a_name,
        {"id": "bytes", "endian": "big"},
    ]


def test_a_v3_codec_is_named_by_its_name_only() -> None:
    document = {
        "codecs": [{"name": "transpose", "configuration": {"order": [0], "id": "endian"}}, "endian"]
    }
    migrated, locations = migrate_metadata(document, "zarr.json")
    assert locations == ["codecs[1]"] and migrated["codecs"][0] == document["codecs"][0]


def test_large_consolidated_metadata_with_a_decoy_is_renamed_in_one_pass(tmp_path: Path) -> None:
    # 3000 arrays plus {"instrument": {"name": "endian"}} took over 400 s (a parse per token)
    consolidated = {
        f"a{i}": {**V3_ARRAY, "attributes": {"instrument": {"name": "endian"}}} for i in range(3000)
    }
    root = write_json(
        tmp_path / "big" / "zarr.json",
        {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {"instrument": {"name": "endian"}},
            "consolidated_metadata": {
                "kind": "inline",
                "must_understand": False,
                "metadata": consolidated,
            },
        },
        indent=2,
    ).parent
    before = (root / "zarr.json").read_text()
    start = time.perf_counter()
    report = migrate_store(root)
    elapsed = time.perf_counter() - start
    after = (root / "zarr.json").read_text()
    assert len(report.changes) == 3000
    # the decoys stay
    assert after.count('"name": "endian"') == before.count('"name": "endian"') - 3000
    assert len(after) == len(before) - 3000
    print(f"3000-array consolidated store migrated in {elapsed:.2f} s")


# -- tracebacks and half-finished runs -------------------------------------------------------------


@pytest.mark.parametrize("metadata", [["x"], "x", None, 3, {"a/.zarray": "x", "b/.zarray": [1]}])
def test_odd_zmetadata_shapes_are_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metadata: Any
) -> None:
    write_json(tmp_path / "s" / ".zgroup", {"zarr_format": 2})
    write_json(tmp_path / "s" / ".zmetadata", {"metadata": metadata, "zarr_consolidated_format": 1})
    code, out, err = run(capsys, str(tmp_path / "s"))
    assert code == 0 and "nothing to do: no legacy codec in" in out and err == ""


def test_very_deep_nesting_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    legacy_group(tmp_path / "s")
    deep = tmp_path / "s" / "deep" / "zarr.json"
    deep.parent.mkdir()
    deep.write_text('{"attributes": ' + "[" * 100_000 + "]" * 100_000 + ', "codecs": ["endian"]}')
    code, out, err = run(capsys, str(tmp_path / "s"))
    assert code == 1 and "failed deep/zarr.json: nested too deeply to parse" in err
    assert "2 files changed" in out


@pytest.mark.parametrize(
    "location", ["foo://bucket/x", "http://localhost:1/x", "", "   ", "/no/such/folder"]
)
def test_bad_locations_are_usage_errors(capsys: pytest.CaptureFixture[str], location: str) -> None:
    code, out, err = run(capsys, location)
    assert out == ""
    assert (
        code == 2 and err.startswith("numcodecs-bytes migrate: error:") and "Traceback" not in err
    )
    with pytest.raises(NotAStoreError):
        migrate_store(location)


def test_a_closed_pipe_lets_the_run_finish_quietly_with_its_own_exit_code(tmp_path: Path) -> None:
    """``migrate -v STORE | head -1``: the reader goes away after one line; the run goes on to its
    end without output, and its result alone decides the exit code (every file migrated: 0)."""
    root = legacy_group(tmp_path / "s", arrays=300)
    script = Path(sys.executable).parent / "numcodecs-bytes"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "numcodecs_bytes"]
    process = subprocess.Popen(
        [*command, "migrate", str(root), "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert stderr == ""
    assert all(
        json.loads(path.read_text())["codecs"][0]["name"] == "bytes"
        for path in root.glob("a*/zarr.json")
    )


def test_folder_names_that_are_not_utf8_under_a_strict_output(tmp_path: Path) -> None:
    root = legacy_group(tmp_path / "s", arrays=0)
    odd = os.path.join(os.fsencode(root), b"caf\xe9")
    os.mkdir(odd)
    with open(os.path.join(odd, b"zarr.json"), "w") as handle:
        json.dump(V3_ARRAY, handle)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}
    result = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", "migrate", "--verbose", str(root)],
        capture_output=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert b"changed caf\\xe9/zarr.json" in result.stdout


# -- silent skips and collateral damage ------------------------------------------------------------


def test_symbolic_links_are_reported_never_followed_or_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s")
    elsewhere = legacy_group(tmp_path / "elsewhere", arrays=1)
    os.symlink(elsewhere / "a0", root / "linked")
    (root / "a1" / "zarr.json").unlink()
    os.symlink(elsewhere / "a0" / "zarr.json", root / "a1" / "zarr.json")
    code, out, err = run(capsys, str(root))
    assert code == 1
    assert "failed linked: symbolic link to a folder: not followed" in err
    assert "failed a1/zarr.json: symbolic link" in err
    assert (root / "a1" / "zarr.json").is_symlink()
    assert '"endian"' in (elsewhere / "a0" / "zarr.json").read_text()
    assert "1 file changed" in out


def test_an_existing_backup_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s")
    (root / "a0" / "zarr.json.bak").write_text("precious")
    code, _, err = run(capsys, str(root), "--backup")
    assert code == 1 and "a0/zarr.json: zarr.json.bak exists already: not overwritten" in err
    assert (root / "a0" / "zarr.json.bak").read_text() == "precious"
    assert '"endian"' in (root / "a0" / "zarr.json").read_text()
    assert '"bytes"' in (root / "a1" / "zarr.json").read_text()
    assert '"endian"' in (root / "a1" / "zarr.json.bak").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_owner_and_group_are_kept(tmp_path: Path) -> None:
    root = legacy_group(tmp_path / "s", arrays=1)
    os.chown(root / "a0" / "zarr.json", 1234, 5678)
    migrate_store(root)
    info = os.stat(root / "a0" / "zarr.json")
    assert (info.st_uid, info.st_gid) == (1234, 5678)


def test_a_fifo_named_like_metadata_does_not_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s")
    (root / "odd").mkdir()
    os.mkfifo(root / "odd" / "zarr.json")
    code, _, err = run(capsys, str(root))
    assert code == 1 and "failed odd/zarr.json: not a regular file" in err


def test_a_utf8_bom_is_read_and_kept(tmp_path: Path) -> None:
    root = legacy_group(tmp_path / "s", arrays=1)
    path = root / "a0" / "zarr.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(migrate_store(root).changes) == 1
    assert path.read_bytes().startswith(b"\xef\xbb\xbf") and b'"bytes"' in path.read_bytes()


# -- concurrency -----------------------------------------------------------------------------------


def test_one_run_at_a_time_per_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = legacy_group(tmp_path / "s")
    leftover = root / "a0" / ".zarr.json.x.numcodecs-bytes-tmp"
    leftover.write_text("another run's")
    descriptor = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # as another run holds it
        with pytest.raises(StoreBusyError):
            migrate_store(root)
        code, _, err = run(capsys, str(root))
        assert code == 2 and "another numcodecs-bytes run is working on this store" in err
        assert leftover.exists(), "a live run's temporary file must not be removed"
    finally:
        os.close(descriptor)
    assert len(migrate_store(root).leftovers_removed) == 1


def test_a_file_changed_between_read_and_replace_is_left_alone(tmp_path: Path) -> None:
    path = write_json(tmp_path / "zarr.json", V3_ARRAY)
    read = path.read_bytes()
    path.write_text(json.dumps({**V3_ARRAY, "attributes": {"written": "meanwhile"}}))
    failures = LocalFiles(tmp_path).replace([Replacement(str(path), b"{}", read)])
    assert "changed by someone else" in str(failures[str(path)])
    assert json.loads(path.read_text())["attributes"] == {"written": "meanwhile"}


# -- fuzz: only the renamed tokens change ----------------------------------------------------------

names = st.sampled_from(["endian", "bytes", "name", "id", "configuration", "codecs", "x"])
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(allow_nan=False), names
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=10,
)
v3_codecs = st.one_of(
    st.just("endian"),
    st.fixed_dictionaries(
        {"name": st.just("endian")}, optional={"configuration": st.just({"endian": "big"})}
    ),
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["gzip", "bytes"]),
            "configuration": st.dictionaries(names, values),
        }
    ),
    st.fixed_dictionaries(
        {
            "name": st.just("sharding_indexed"),
            "configuration": st.fixed_dictionaries({"codecs": st.just(["endian"])}),
        }
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    codecs=st.lists(v3_codecs, max_size=4),
    attributes=st.dictionaries(names, values, max_size=4),
    indent=st.sampled_from([None, 0, 1, "\t"]),
    ascii_only=st.booleans(),
    escape_names=st.booleans(),
    crlf=st.booleans(),
)
def test_fuzz_only_the_renamed_tokens_change(
    codecs: list[Any],
    attributes: dict[str, Any],
    indent: Any,
    ascii_only: bool,
    escape_names: bool,
    crlf: bool,
) -> None:
    document = {"zarr_format": 3, "node_type": "array", "attributes": attributes, "codecs": codecs}
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    if escape_names:
        text = text.replace('"endian"', '"\\u0065ndian"')
    if crlf:
        text = text.replace("\n", "\r\n")
    migrated, locations = migrate_metadata(json.loads(text), "zarr.json")
    new = rewrite_text(text, json.loads(text), "zarr.json")
    assert json.loads(new) == migrated
    # outside the renamed tokens, the text is the same character for character
    old_name = '"\\u0065ndian"' if escape_names else '"endian"'
    assert new.replace('"bytes"', "\0").replace(old_name, "\0") == text.replace(
        '"bytes"', "\0"
    ).replace(old_name, "\0")
    assert new.count('"bytes"') - text.count('"bytes"') == len(locations)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv, to run the command without the right to read any folder",
)
def test_a_folder_that_cannot_be_listed_is_reported(tmp_path: Path) -> None:
    root = legacy_group(tmp_path / "s")
    write_json(root / "locked" / "zarr.json", V3_ARRAY)
    (root / "locked").chmod(0o000)
    caps = "-dac_override,-dac_read_search"  # root without these obeys folder permissions
    try:
        result = subprocess.run(
            [
                "setpriv",
                f"--bounding-set={caps}",
                f"--inh-caps={caps}",
                sys.executable,
                "-m",
                "numcodecs_bytes",
                "migrate",
                str(root),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        (root / "locked").chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert "failed locked: folder not read: Permission denied" in result.stderr
    assert (
        "2 files changed" in result.stdout
        and '"endian"' in (root / "locked" / "zarr.json").read_text()
    )


v2_codecs = st.one_of(
    st.fixed_dictionaries(
        {"id": st.just("endian")}, optional={"endian": st.just("big"), "dtype": st.just("<i4")}
    ),
    st.fixed_dictionaries(
        {"id": st.sampled_from(["zlib", "bytes"]), "name": st.sampled_from(["endian", "x"])}
    ),
    st.none(),
)


@settings(max_examples=100, deadline=None)
@given(
    filters=st.one_of(st.none(), st.lists(v2_codecs, max_size=3)),
    compressor=v2_codecs,
    attributes=st.dictionaries(names, values, max_size=3),
    indent=st.sampled_from([None, 2]),
)
def test_fuzz_v2_metadata_only_ids_name_our_codec(
    filters: Any, compressor: Any, attributes: dict[str, Any], indent: Any
) -> None:
    zarray = {
        "zarr_format": 2,
        "filters": filters,
        "compressor": compressor,
        "attributes": attributes,
    }
    zmetadata = {
        "metadata": {"a/.zarray": zarray, "a/.zattrs": attributes},
        "zarr_consolidated_format": 1,
    }
    for document, name in ((zarray, ".zarray"), (zmetadata, ".zmetadata")):
        text = json.dumps(document, indent=indent)
        migrated, locations = migrate_metadata(document, name)
        new = rewrite_text(text, document, name)
        assert json.loads(new) == migrated
        assert new.count('"bytes"') - text.count('"bytes"') == len(locations)
        ours = [
            c
            for c in ([*(filters or []), compressor])
            if isinstance(c, dict) and c.get("id") == "endian"
        ]
        assert len(locations) == len(ours)
        assert new.replace('"bytes"', '"endian"') == text.replace('"bytes"', '"endian"')


# -- third review: closed output, links, owners, odd names and paths -------------------------------


# Each command with both streams closed, and one stream closed while the other stays open.
@pytest.mark.parametrize(
    ("command", "closed"),
    [
        ("migrate", (1, 2)),
        ("demo", (1, 2)),
        ("dtypes", (1, 2)),
        ("migrate", (1,)),
        ("migrate", (2,)),
    ],
    ids=["migrate-both", "demo-both", "dtypes-both", "migrate-stdout", "migrate-stderr"],
)
def test_the_command_line_works_with_its_output_closed(
    tmp_path: Path, closed: tuple[int, ...], command: str
) -> None:
    root = legacy_group(tmp_path / "s")
    args = ["migrate", str(root)] if command == "migrate" else [command]

    def close_output() -> None:  # in the child, before the program starts: as `>&-` and `2>&-` do
        for descriptor in closed:
            os.close(descriptor)

    result = subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", *args],
        stdout=None if 1 in closed else subprocess.DEVNULL,
        stderr=None if 2 in closed else subprocess.PIPE,
        preexec_fn=close_output,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr is None or result.stderr == b"", result.stderr
    if command == "migrate":
        assert all(
            json.loads(p.read_text())["codecs"][0]["name"] == "bytes"
            for p in root.glob("a*/zarr.json")
        )


def test_a_hard_linked_metadata_file_is_reported_and_left_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s")
    other = tmp_path / "other.json"
    os.link(root / "a0" / "zarr.json", other)
    code, out, err = run(capsys, str(root))
    assert code == 1
    assert "failed a0/zarr.json: hard link (2 names for one file): not replaced" in err
    assert "1 file changed" in out
    assert os.path.samefile(root / "a0" / "zarr.json", other)
    assert '"endian"' in other.read_text()


def test_a_file_whose_owner_cannot_be_kept_is_reported_and_left_whole(tmp_path: Path) -> None:
    root = legacy_group(tmp_path / "s")
    os.chown(root / "a0" / "zarr.json", 1234, 5678)
    before = (root / "a0" / "zarr.json").read_bytes()
    caps = "-chown"  # root without this is any user who does not own the file
    result = subprocess.run(
        [
            "setpriv",
            f"--bounding-set={caps}",
            f"--inh-caps={caps}",
            sys.executable,
            "-m",
            "numcodecs_bytes",
            "migrate",
            str(root),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "failed a0/zarr.json: its owner (uid 1234, gid 5678) could not be kept" in result.stderr
    assert "run as that user or as root" in result.stderr
    assert (root / "a0" / "zarr.json").read_bytes() == before
    assert [p.name for p in (root / "a0").iterdir()] == ["zarr.json"]  # no temporary file left
    assert '"bytes"' in (root / "a1" / "zarr.json").read_text()


def test_control_characters_in_names_are_escaped_in_every_report_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s", arrays=0)
    write_json(root / "a\nb\x1b[2J" / "zarr.json", V3_ARRAY)
    write_json(root / "c\rd" / "zarr.json", {"zarr_format": 3})  # broken: a failure line
    (root / "c\rd" / "zarr.json").write_text("{")
    code, out, err = run(capsys, str(root))
    assert code == 1
    assert "changed a\\nb\\x1b[2J/zarr.json:" in out.splitlines()
    assert any(
        line.startswith("failed c\\rd/zarr.json: not valid JSON") for line in err.splitlines()
    )
    assert "\x1b" not in out + err and "\r" not in out + err


def test_a_file_as_the_store_path_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("{}")
    code, _, err = run(capsys, str(tmp_path / "f"))
    assert code == 2 and "f: not a folder" in err
    code, _, err = run(capsys, str(tmp_path / "missing"))
    assert code == 2 and "missing: no such folder" in err


def test_file_urls_of_this_host_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = legacy_group(tmp_path / "s")
    code, out, _ = run(capsys, f"file://localhost{root}", "--dry-run")
    assert code == 0 and "would change a0/zarr.json:" in out
    code, _, err = run(capsys, f"file://elsewhere.example{root}")
    assert code == 2 and "a file URL of another host (elsewhere.example)" in err


@pytest.mark.parametrize("command", ["dtypes", "demo"])
@pytest.mark.parametrize("ml_dtypes_installed", [True, False])
def test_the_data_type_table_keeps_its_columns_and_names_what_needs_ml_dtypes(
    command: str, ml_dtypes_installed: bool
) -> None:
    if ml_dtypes_installed:
        pytest.importorskip("ml_dtypes")
    # as if the extra were missing
    block = "" if ml_dtypes_installed else "sys.modules['ml_dtypes'] = None; "
    code = f"import sys; {block}from numcodecs_bytes.cli import main; sys.exit(main([{command!r}]))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    header, *rows = out[out.index("data type ") :].split("\n\n")[0].splitlines()
    second, third = header.index("numpy, e.g."), header.index("endian orders each")
    for row in rows:  # each column starts where its header does, the widest entry (struct) included
        assert row[second - 2 : second] == "  " and row[second] != " ", row
        assert row[third - 2 : third] == "  " and row[third] != " ", row
    assert [row.split()[0] for row in rows][-17:-15] == ["struct", "bfloat16"]
    assert len(rows) == 36, rows  # every data type the package knows, with the extra or without
    bfloat16 = next(row for row in rows if row.startswith("bfloat16 "))
    assert bfloat16.endswith("element" if ml_dtypes_installed else "needs the ml_dtypes extra"), (
        bfloat16
    )
    assert (
        "16 data types need ml_dtypes: pip install 'numcodecs-bytes[ml_dtypes]'" in out
    ) is not ml_dtypes_installed
