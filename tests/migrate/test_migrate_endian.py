"""numcodecs-bytes migrate, the other half of the legacy (issue 48): v3 ``bytes`` codecs of
multi-byte data types that state no ``endian`` get the draft's default, ``"little"``, which
zarr-python before 3.3 read and 3.3 and later require.

The oracles: numpy (the chunks are written here, little endian, from known values), zarr-python in a
fresh interpreter without this package, and ``json.dumps`` (a file written by it in one style is,
once mended, the mended document written by it in the same style).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("zarr", minversion="3", reason="the stores are read with zarr 3")
from support.stack import ZARR_REFUSES_MISSING_ENDIAN

from numcodecs_bytes.cli import main
from numcodecs_bytes.migrate import migrate_metadata, migrate_store, rewrite_text

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

STYLES: dict[str, dict[str, Any]] = {
    "indent 2": {"indent": 2},
    "indent 4": {"indent": 4},
    "tabs": {"indent": "\t"},
    "one line": {},
    "compact": {"separators": (",", ":")},
}


def array_document(
    data_type: Any, codecs: list[Any], shape: int = 8, chunk: int = 8
) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [shape],
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": codecs,
        "attributes": {"endian": "kept: an attribute, not a codec"},
    }


def sharded(inner: list[Any], index: list[Any], inner_chunk: int = 4) -> dict[str, Any]:
    configuration = {
        "chunk_shape": [inner_chunk],
        "codecs": inner,
        "index_codecs": index,
        "index_location": "end",
    }
    return {"name": "sharding_indexed", "configuration": configuration}


def with_endians(codecs: list[Any], endian: str = "little") -> list[Any]:
    """The oracle: each bytes codec given ``endian`` where it states none, shards' indexes
    little."""
    mended = []
    for codec in copy.deepcopy(codecs):
        name = codec if isinstance(codec, str) else codec["name"]
        if name in ("bytes", "endian"):
            configuration = {} if isinstance(codec, str) else codec.get("configuration", {})
            codec = {
                "name": "bytes",
                "configuration": {**configuration, "endian": configuration.get("endian", endian)},
            }
        elif name == "sharding_indexed":
            configuration = codec["configuration"]
            configuration["codecs"] = with_endians(configuration["codecs"], endian)
            configuration["index_codecs"] = with_endians(configuration["index_codecs"], "little")
        mended.append(codec)
    return mended


# -- the rule, document in, document out -----------------------------------------------------------

BYTES_FORMS = st.sampled_from(
    [
        "bytes",
        {"name": "bytes"},
        {"name": "bytes", "configuration": {}},
        {"name": "endian"},
        {"name": "bytes", "configuration": {"endian": "big"}},
    ]
)
DATETIME = {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}}
MULTI_BYTE = st.sampled_from(["int16", "uint32", "float64", "complex128", "float16", DATETIME])


@st.composite
def codec_lists(draw: st.DrawFn, depth: int = 0) -> list[Any]:
    serializer = draw(BYTES_FORMS)
    if depth < 2 and draw(st.booleans()):
        indexes: list[list[Any]] = [
            [{"name": "bytes"}, {"name": "crc32c"}],
            ["bytes"],
            [{"name": "bytes", "configuration": {"endian": "little"}}],
        ]
        index = draw(st.sampled_from(indexes))
        return [sharded(draw(codec_lists(depth + 1)), index)]
    return [
        serializer,
        *draw(st.lists(st.just({"name": "zstd", "configuration": {"level": 1}}), max_size=1)),
    ]


@settings(max_examples=150, deadline=None)
@given(MULTI_BYTE, codec_lists(), st.sampled_from(sorted(STYLES)), st.booleans())
def test_every_missing_endian_is_added_in_the_files_style(
    data_type: Any, codecs: list[Any], style: str, consolidated: bool
) -> None:
    """Multi-byte data types, the bytes codec in every form (short, no configuration, an empty one,
    the legacy name, one that states big), in shards nested two deep, alone or consolidated in a
    root: the mended text is the oracle's document written in the file's own style, byte for
    byte."""
    document = array_document(data_type, codecs)
    expected = {**document, "codecs": with_endians(codecs)}
    if consolidated:

        def root(member: dict[str, Any]) -> dict[str, Any]:
            consolidation = {"kind": "inline", "must_understand": False, "metadata": {"a": member}}
            return {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {},
                "consolidated_metadata": consolidation,
            }

        document, expected = root(document), root(expected)
    text = json.dumps(document, **STYLES[style])
    mended, locations = migrate_metadata(document, "zarr.json")
    assert mended == expected
    assert bool(locations) == (mended != document)
    assert rewrite_text(text, document, "zarr.json") == json.dumps(expected, **STYLES[style])


@pytest.mark.parametrize("data_type", ["int8", "uint8", "bool", "r8", "r16"])
def test_single_byte_and_raw_types_need_no_endian(data_type: str) -> None:
    document = array_document(
        data_type, [{"name": "bytes"}, sharded(["bytes"], [{"name": "bytes"}])]
    )
    mended, locations = migrate_metadata(document, "zarr.json")
    # a shard's index is uint64 whatever the array holds: its bytes codec gets little
    assert locations == ["codecs[1].configuration.index_codecs[0]"]
    assert mended["codecs"][0] == {"name": "bytes"} and mended["codecs"][1]["configuration"][
        "codecs"
    ] == ["bytes"]


def test_a_struct_is_reported_unless_its_order_is_named() -> None:
    struct = [["a", "<i4"], ["b", "<f8"]]
    document = array_document(struct, [{"name": "bytes"}])
    mended, locations = migrate_metadata(document, "zarr.json")
    assert (mended, locations) == (document, [])
    mended, locations = migrate_metadata(document, "zarr.json", struct_endian="big")
    assert locations == ["codecs[0]"] and mended["codecs"] == [
        {"name": "bytes", "configuration": {"endian": "big"}}
    ]


# -- stores ----------------------------------------------------------------------------------------


def strip_endians(document: Any) -> Any:
    """The document with every bytes codec's endian removed (a configuration left empty goes
    too)."""
    if isinstance(document, list):
        return [strip_endians(item) for item in document]
    if not isinstance(document, dict):
        return document
    stripped = {key: strip_endians(value) for key, value in document.items()}
    if stripped.get("name") == "bytes" and isinstance(stripped.get("configuration"), dict):
        configuration = {k: v for k, v in stripped["configuration"].items() if k != "endian"}
        stripped = {k: v for k, v in stripped.items() if k != "configuration"}
        if configuration:
            stripped["configuration"] = configuration
    return stripped


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, dict[str, np.ndarray[Any, Any]]]]:
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    values = {
        "plain": np.arange(8, dtype="<i4") - 3,
        "sharded": np.linspace(-1, 1, 16).astype("<f8"),
        "nested": np.arange(16, dtype="<u2") * 1000,
        "bytes8": np.arange(8, dtype="u1"),
    }
    group.create_array("plain", data=values["plain"], chunks=(4,))
    group.create_array("sharded", data=values["sharded"], chunks=(2,), shards=(8,))
    group.create_array("bytes8", data=values["bytes8"], chunks=(4,))
    nested = zarr.codecs.ShardingCodec(
        chunk_shape=(4,), codecs=[zarr.codecs.ShardingCodec(chunk_shape=(2,))]
    )
    group.create_array(
        "nested", shape=(16,), chunks=(8,), dtype="<u2", serializer=nested, compressors=None
    )[...] = values["nested"]
    zarr.consolidate_metadata(str(root))
    for path in root.rglob("zarr.json"):
        path.write_text(json.dumps(strip_endians(json.loads(path.read_text())), indent=2))
    yield root, values


def read_read_in_a_fresh_process(
    root: Path | str, names: list[str], endpoint: str | None = None
) -> dict[str, Any]:
    """Each array as plain zarr-python reads it (with its own codec classes), or the error it
    raises."""
    options = {"storage_options": {"endpoint_url": endpoint}} if endpoint else {}
    code = f"""
import json, sys, warnings
warnings.simplefilter("ignore")
import zarr
out = {{}}
for name in {names!r}:
    try:
        array = zarr.open_array({str(root)!r} + "/" + name, mode="r", **{options!r})
        out[name] = array[...].tolist()
    except Exception as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
# zarr's own codec: ours not enabled
assert zarr.config.get("codecs.bytes") == "zarr.codecs.bytes.BytesCodec"
print(json.dumps(out))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    read: dict[str, Any] = json.loads(result.stdout)
    return read


def test_a_store_without_endians_reads_on_every_zarr_once_migrated(
    store: tuple[Path, dict[str, np.ndarray[Any, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, values = store
    names = sorted(values)
    before = read_read_in_a_fresh_process(root, names)
    single_byte = (root / "bytes8" / "zarr.json").read_bytes()
    for name in ("plain", "sharded", "nested"):
        if ZARR_REFUSES_MISSING_ENDIAN:  # zarr 3.3 made endian required, as the spec says
            assert "endian" in before[name] and "specified" in before[name], before[name]
        else:  # zarr 3.1 and 3.2 read it as little endian (this machine's order), as the draft said
            assert before[name] == values[name].tolist()

    assert main(["migrate", str(root), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("dry run: 4 files would change (12 codecs) in 5 nodes"), (
        out
    )  # 6, and their copies in the root
    assert main(["migrate", str(root), "--verbose"]) == 0
    out, err = capsys.readouterr()
    assert (
        "  codecs[0].configuration.codecs[0].configuration.index_codecs[0]: endian 'little' added"
        in out
    )
    assert "note: 12 bytes codecs given the endian they did not state" in err
    assert read_read_in_a_fresh_process(root, names) == {
        name: values[name].tolist() for name in names
    }
    assert (root / "bytes8" / "zarr.json").read_bytes() == single_byte  # single-byte: unchanged
    root_document = json.loads((root / "zarr.json").read_text())
    plain = root_document["consolidated_metadata"]["metadata"]["plain"]["codecs"][0]
    assert plain == {"name": "bytes", "configuration": {"endian": "little"}}
    assert main(["migrate", str(root)]) == 0
    assert capsys.readouterr().out.startswith("nothing to do: no legacy codec in 5 nodes")


def test_a_struct_store_is_reported_and_mended_with_its_order_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    root.mkdir()
    document = array_document([["a", "<i4"], ["b", "<f8"]], [{"name": "bytes"}])
    (root / "zarr.json").write_text(json.dumps(document))
    assert main(["migrate", str(root)]) == 1
    err = capsys.readouterr().err
    assert (
        "failed zarr.json: codecs[0]: a struct with multi-byte fields, whose bytes codec states no "
        "endian" in err
    )
    assert json.loads((root / "zarr.json").read_text()) == document
    assert main(["migrate", str(root), "--struct-endian", "little"]) == 0
    assert json.loads((root / "zarr.json").read_text())["codecs"] == [
        {"name": "bytes", "configuration": {"endian": "little"}}
    ]
    with pytest.raises(ValueError, match="struct_endian must be 'little' or 'big', got 'middle'"):
        migrate_store(root, struct_endian="middle")  # type: ignore[arg-type]


def test_on_s3_through_failing_requests(
    store: tuple[Path, dict[str, np.ndarray[Any, Any]]],
    endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The store on S3 (moto) behind the fault proxy: a GET answered 503 twice, a PUT whose answer
    is lost after the server acted (the retry is refused by If-Match and read back: no conflict)."""
    pytest.importorskip("s3fs", reason="object stores need s3fs (the interop extra)")
    from support.s3 import Fault, empty_bucket, fault_proxy

    root, values = store
    s3 = next(empty_bucket(endpoint, monkeypatch, "endians"))
    s3.put(str(root), "endians/s", recursive=True)
    with fault_proxy(endpoint) as proxy:
        proxy.add(
            Fault("error", "GET", r"sharded/zarr\.json$", times=2),
            Fault("lost", "PUT", r"plain/zarr\.json$"),
        )
        code = main(
            ["migrate", "s3://endians/s", "--storage-option", f"endpoint_url={proxy.endpoint}"]
        )
        out, err = capsys.readouterr()
        assert code == 0 and out.startswith("4 files changed (12 codecs) in 5 nodes"), (out, err)
        assert [fault.hits for fault in proxy.faults] == [2, 1]
    names = sorted(values)
    assert read_read_in_a_fresh_process("s3://endians/s", names, endpoint) == {
        n: values[n].tolist() for n in names
    }
    assert main(["migrate", "s3://endians/s", "--storage-option", f"endpoint_url={endpoint}"]) == 0
    assert capsys.readouterr().out.startswith("nothing to do")
