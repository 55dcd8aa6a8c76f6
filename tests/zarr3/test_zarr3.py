"""numcodecs_bytes.zarr3.BytesCodec in real zarr-python 3 arrays: standard metadata, legacy stores,
byte ranges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

pytest.importorskip("zarr", minversion="3", reason="native Zarr v3 codecs need zarr 3")
from support.samples import array_of
from support.stack import (
    ZARR,
    ZARR_DROPS_AXES_OF_PARTIAL_READS,
    ZARR_HAS_FUSED_PIPELINE,
    ZARR_READS_WHOLE_SHARDS_IN_BULK,
    ZARR_REFUSES_MISSING_ENDIAN,
    ZARR_SWAPS_STRUCT_FIELDS,
    has_module,
)
from zarr.codecs import BytesCodec as ZarrBytesCodec
from zarr.storage import WrapperStore

from numcodecs_bytes import BytesCodec as NumcodecsBytesCodec
from numcodecs_bytes import zarr3
from numcodecs_bytes.data_types import needs_endian
from numcodecs_bytes.zarr3 import BytesCodec

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do

SHAPE, CHUNKS = (5, 7), (2, 3)  # edge chunks on both axes

STRUCT = np.dtype([("id", "<u2"), ("x", "<f4"), ("tag", "S2"), ("z", "<c8")])
DTYPES: list[Any] = [
    *[
        "|b1",
        "|i1",
        "<i2",
        "<i4",
        "<i8",
        "|u1",
        "<u2",
        "<u4",
        "<u8",
        "<f2",
        "<f4",
        "<f8",
        "<c8",
        "<c16",
    ],
    *["<M8[ns]", "<m8[s]", "<U3", "S5", "V3"],
    STRUCT,
]


def sample(dtype: Any) -> np.ndarray[Any, Any]:
    return array_of(dtype, SHAPE)


def chunk_files(where: Path | dict[str, Any]) -> dict[str, bytes]:
    """The chunk files of a store on disk, or of a MemoryStore's dict: key to bytes."""
    if isinstance(where, dict):
        return {
            key: value.to_bytes()
            for key, value in sorted(where.items())
            if not key.endswith("zarr.json")
        }
    return {
        str(p.relative_to(where)): p.read_bytes()
        for p in sorted(where.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def create(store: Path | Any, data: np.ndarray[Any, Any], serializer: Any, **options: Any) -> Any:
    return zarr.create_array(
        store=str(store) if isinstance(store, Path) else store,
        shape=data.shape,
        chunks=CHUNKS,
        dtype=data.dtype,
        serializer=serializer,
        fill_value=np.zeros((), data.dtype)[()] if data.dtype.fields is None else None,
        config={"write_empty_chunks": True, **options.pop("config", {})},
        **options,
    )


# Every data type in both byte orders and both memory orders; sharded (the partial read path) in
# both byte orders, the memory order alternating; zstd after the codec changes nothing of ours,
# so each data type meets it once.
BYTE_IDENTITY_CASES = [
    *(
        pytest.param(dtype, endian, order, "plain", id=f"plain-{order}-{endian}-{dtype}")
        for order in ("C", "F")
        for endian in ("little", "big")
        for dtype in DTYPES
    ),
    *(
        pytest.param(
            dtype, endian, "CF"[i % 2], "sharded", id=f"sharded-{'CF'[i % 2]}-{endian}-{dtype}"
        )
        for endian in ("little", "big")
        for i, dtype in enumerate(DTYPES)
    ),
    *(
        pytest.param(dtype, ("little", "big")[i % 2], "CF"[i // 2 % 2], "zstd", id=f"zstd-{dtype}")
        for i, dtype in enumerate(DTYPES)
    ),
]


@pytest.mark.parametrize(("dtype", "endian", "order", "layout"), BYTE_IDENTITY_CASES)
def test_chunks_are_byte_identical_to_zarr_native(
    dtype: Any, endian: str, order: str, layout: str
) -> None:
    data = sample(dtype)
    stores: dict[str, dict[str, Any]] = {"ours": {}, "native": {}}  # MemoryStores' dicts

    def memory(name: str) -> Any:
        return zarr.storage.MemoryStore(store_dict=stores[name])

    options: dict[str, Any] = {"config": {"order": order}}
    options["compressors"] = None if layout != "zstd" else zarr.codecs.ZstdCodec()
    if layout == "sharded":
        options["shards"] = (4, 6)
    try:
        native = create(memory("native"), data, ZarrBytesCodec(endian=endian), **dict(options))
    except (ValueError, TypeError) as exc:
        pytest.skip(f"zarr {zarr.__version__} cannot create {data.dtype} arrays: {exc}")
    ours = create(memory("ours"), data, BytesCodec(endian=endian), **dict(options))  # type: ignore[arg-type]
    if layout == "sharded" and data.dtype.kind == "V" and (ZARR or ()) < (3, 4):
        # zarr's sharding codec fails on raw bytes and structs before 3.4 (seen on 3.1.6; 3.2 and
        # 3.3 not tested)
        with pytest.raises(TypeError, match="unhashable type"):
            ours[...] = data
        return
    ours[...] = data

    # read with this codec too
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        reopened = zarr.open_array(memory("ours"), mode="r")
        # The codecs read from the metadata: the serializer (zarr's name for a sharded array's inner
        # one), and in a sharded array the sharding codec's own inner codec list.
        read = [reopened.serializer]
        if layout == "sharded":
            (sharding,) = [
                codec
                for codec in reopened.metadata.codecs
                if type(codec).__name__ == "ShardingCodec"
            ]
            read += [
                codec for codec in sharding.codecs if type(codec).__name__.endswith("BytesCodec")
            ]
        assert len(read) == (2 if layout == "sharded" else 1) and all(
            isinstance(c, BytesCodec) for c in read
        ), read
        assert reopened[...].tobytes() == data.tobytes()
        assert reopened[1:4, 2:6].tobytes() == np.ascontiguousarray(data[1:4, 2:6]).tobytes()

    def bytes_entry(store: dict[str, Any]) -> Any:
        entry = json.loads(store["zarr.json"].to_bytes())["codecs"][0]
        return entry["configuration"]["codecs"][0] if layout == "sharded" else entry

    # As zarr writes it: no endian where byte order applies to nothing (single-byte types).
    expected = (
        {"name": "bytes", "configuration": {"endian": endian}}
        if needs_endian(data.dtype)
        else {"name": "bytes"}
    )
    assert bytes_entry(stores["ours"]) == expected
    # zarr < 3.3 drops the endian of structs
    if data.dtype.fields is None or ZARR_SWAPS_STRUCT_FIELDS:
        assert bytes_entry(stores["native"]) == expected
    ours_files = chunk_files(stores["ours"])
    if data.dtype.fields is not None and endian == "big" and not ZARR_SWAPS_STRUCT_FIELDS:
        # zarr-python before 3.3 (PR #4142) writes struct fields native: the numpy oracle instead
        plain = NumcodecsBytesCodec(endian="big", dtype=data.dtype)
        if layout == "plain":
            chunk = np.ascontiguousarray(data[2:4, 3:6])
            assert ours_files["c/1/1"] == bytes(plain.encode(chunk))
        return
    try:
        native[...] = data
    except (ValueError, TypeError) as exc:  # zarr's own failure, not ours: ours was checked above
        pytest.skip(
            f"zarr {zarr.__version__} cannot write {data.dtype} ({layout}) with its own "
            f"codec: {exc!r}"
        )
    assert ours_files == chunk_files(stores["native"])


def test_metadata_forms_and_the_legacy_name() -> None:
    read = BytesCodec.from_dict({"name": "bytes", "configuration": {"endian": "big"}})
    assert read.to_dict() == BytesCodec(endian="big").to_dict()
    # Equal to one made in code, as zarr expects (it compares sharding's inner codecs unevolved),
    # though how it came to be is kept: a missing endian read from metadata evolves as zarr reads
    # it, one made in code is refused.
    assert (
        read == BytesCodec(endian="big")
        and read._from_metadata
        and not BytesCodec(endian="big")._from_metadata
    )
    assert (
        zarr.create_array(store={}, shape=(2,), dtype="<i4", serializer=read).serializer
        == zarr.create_array(
            store={}, shape=(2,), dtype="<i4", serializer=BytesCodec(endian="big")
        ).serializer
    )
    assert BytesCodec.from_dict("bytes").to_dict() == {"name": "bytes"}
    legacy = BytesCodec.from_dict(
        {"name": "endian", "configuration": {"endian": "little"}, "must_understand": True}
    )
    assert legacy.to_dict() == {"name": "endian", "configuration": {"endian": "little"}}
    for bad in (
        {"name": "bytes", "configuration": {"endian": "BIG"}},
        {"name": "bytes", "configuration": {"x": 1}},
    ):
        with pytest.raises(ValueError):
            BytesCodec.from_dict(bad)
    with pytest.raises(TypeError):
        BytesCodec.from_dict({"name": "bytes", "configuration": []})


def test_endian_missing_for_a_multi_byte_type_is_refused_at_creation(tmp_path: Path) -> None:
    for dtype in ("<i4", "<U2", STRUCT):
        with pytest.raises(ValueError, match="endian is required"):
            zarr.create_array(
                store=str(tmp_path / "a.zarr"), shape=(4,), dtype=dtype, serializer=BytesCodec()
            )
    single = zarr.create_array(
        store={}, shape=(4,), dtype="|u1", serializer=BytesCodec(), compressors=None
    )
    single[:] = [1, 2, 3, 4]
    assert single.metadata.to_dict()["codecs"][0] == {"name": "bytes"}
    assert single[:].tolist() == [1, 2, 3, 4]


def test_single_byte_types_are_written_without_endian_but_the_legacy_name_keeps_it() -> None:
    for dtype in ("|u1", "|b1", "|i1", "|S3", "|V2", np.dtype([("a", "u1"), ("b", "S2")])):
        z = zarr.create_array(
            store={}, shape=(2,), dtype=dtype, serializer=BytesCodec(endian="big")
        )
        assert z.metadata.to_dict()["codecs"][0] == {"name": "bytes"}, dtype
    legacy = zarr.create_array(
        store={}, shape=(2,), dtype="|u1", serializer=BytesCodec(endian="big", name="endian")
    )
    assert legacy.metadata.to_dict()["codecs"][0] == {
        "name": "endian",
        "configuration": {"endian": "big"},
    }


def write_struct_as_zarr_31_did(store: dict[str, Any], data: np.ndarray[Any, Any]) -> None:
    """A struct array as zarr-python before 3.3 wrote it: fields little endian, ``{"name":
    "bytes"}``."""
    z = zarr.create_array(
        store=zarr.storage.MemoryStore(store_dict=store),
        shape=data.shape,
        dtype=data.dtype,
        serializer=BytesCodec(endian="little"),
        compressors=None,
        fill_value=None,
    )
    z[...] = data
    metadata = json.loads(store["zarr.json"].to_bytes())
    metadata["codecs"] = [{"name": "bytes"}]
    store["zarr.json"] = zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(
        json.dumps(metadata).encode()
    )


def test_a_struct_written_by_zarr_31_without_endian_opens_as_little_endian_with_a_warning() -> None:
    # the fields' values must not depend on the memory's byte order
    data = sample(STRUCT.newbyteorder(">"))
    store: dict[str, Any] = {}
    write_struct_as_zarr_31_did(store, data)
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        with pytest.warns(
            UserWarning, match="has no endian, as zarr-python before 3.3 wrote structs"
        ):
            opened = zarr.open_array(zarr.storage.MemoryStore(store_dict=store), mode="r")
        assert isinstance(opened.serializer, BytesCodec) and opened.serializer.endian == "little"
        assert opened[...].tolist() == data.tolist()
    # zarr 3.4's own codec reads it the same, with a warning of its own
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (
            zarr.open_array(zarr.storage.MemoryStore(store_dict=store), mode="r")[...].tolist()
            == data.tolist()
        )
    # made in code, the spec's rule holds
    with pytest.raises(ValueError, match="endian is required"):
        zarr.create_array(store={}, shape=(2,), dtype=STRUCT, serializer=BytesCodec())


def test_a_multi_byte_type_without_endian_in_metadata_opens_as_the_installed_zarr_opens_it() -> (
    None
):
    """zarr < 3.3 reads it as the machine's byte order (silently); 3.3+ refuses it, as the spec
    asks.

    Ours reads it as the installed zarr does; on zarr < 3.3 it warns when values are read or written
    under that guess, not when the metadata alone is read (zarr's own suite parses such metadata
    with warnings as errors: ``test_special_float_fill_values``).
    """
    data = np.arange(6, dtype="<f8") * 1.5
    store: dict[str, Any] = {}
    z = zarr.create_array(
        zarr.storage.MemoryStore(store_dict=store),
        shape=(6,),
        dtype="<f8",
        serializer=BytesCodec(endian=sys.byteorder),
        compressors=None,
    )
    z[...] = data
    metadata = json.loads(store["zarr.json"].to_bytes())
    metadata["codecs"] = [{"name": "bytes"}]
    store["zarr.json"] = zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(
        json.dumps(metadata).encode()
    )

    def open_with(codec_class: str) -> Any:
        with zarr.config.set({"codecs.bytes": codec_class}):
            return zarr.open_array(zarr.storage.MemoryStore(store_dict=store), mode="r")

    if ZARR_REFUSES_MISSING_ENDIAN:
        for codec_class in ("zarr.codecs.bytes.BytesCodec", BytesCodec.__module__ + ".BytesCodec"):
            with pytest.raises(ValueError, match="endian"):
                open_with(codec_class)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zarr's own codec: no warning
        assert open_with("zarr.codecs.bytes.BytesCodec")[...].tolist() == data.tolist()
    with warnings.catch_warnings():
        # ours: the metadata alone reads without a word, as zarr's does
        warnings.simplefilter("error")
        opened = open_with(BytesCodec.__module__ + ".BytesCodec")
        assert (
            isinstance(opened.serializer, BytesCodec) and opened.serializer.endian == sys.byteorder
        )
        assert (
            opened.metadata.to_dict()["codecs"]
            == open_with("zarr.codecs.bytes.BytesCodec").metadata.to_dict()["codecs"]
        )
    guess = (
        f"has no endian.*as {sys.byteorder} endian.*{zarr.__version__}.*numcodecs-bytes migrate "
        "writes"
    )
    with pytest.warns(UserWarning, match=guess):  # but values are read under a guess: that is said
        assert opened[...].tolist() == data.tolist()
    with pytest.warns(UserWarning, match=guess):
        assert opened[2:4].tolist() == data[2:4].tolist()  # a partial read, uncompressed
    with zarr.config.set({"codecs.bytes": BytesCodec.__module__ + ".BytesCodec"}):
        writable = zarr.open_array(zarr.storage.MemoryStore(store_dict=store), mode="r+")
    with pytest.warns(UserWarning, match=guess):
        writable[...] = data[::-1]
    assert open_with("zarr.codecs.bytes.BytesCodec")[...].tolist() == data[::-1].tolist()
    # made in code, the spec's rule holds
    with pytest.raises(ValueError, match="endian is required"):
        zarr.create_array(store={}, shape=(2,), dtype="<f8", serializer=BytesCodec())


def test_a_big_endian_struct_warns_at_creation_where_zarrs_own_codec_reads_it_wrong() -> None:
    """zarr-python before 3.3 ignores the byte order of struct fields (fixed by PR #4142)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z = zarr.create_array({}, shape=(2,), dtype=STRUCT, serializer=BytesCodec(endian="big"))
        zarr.create_array({}, shape=(2,), dtype=STRUCT, serializer=BytesCodec(endian="little"))
        zarr.create_array({}, shape=(2,), dtype="<i4", serializer=BytesCodec(endian="big"))
    ours = [str(w.message) for w in caught if "zarr-python before 3.3" in str(w.message)]
    assert len(ours) == (0 if ZARR_SWAPS_STRUCT_FIELDS else 1), ours
    if not ZARR_SWAPS_STRUCT_FIELDS:
        assert "with endian='big'" in ours[0] and zarr.__version__ in ours[0]
    with (
        warnings.catch_warnings(record=True) as caught,
        zarr.config.set({"codecs.bytes": BytesCodec.__module__ + ".BytesCodec"}),
    ):
        warnings.simplefilter("always")
        # opening: the array exists, its readers are what they are
        zarr.open_array(z.store, mode="r")
    assert not [w for w in caught if "zarr-python before 3.3" in str(w.message)]


def test_a_struct_of_single_byte_fields_needs_no_endian_and_reads_back_as_the_struct() -> None:
    """Copied as its byte units: what the codec decodes is viewed as the struct again, whole or in
    part."""
    dtype = np.dtype([("a", "u1"), ("b", "S2"), ("c", "i1")])
    data = np.zeros((4, 5), dtype)
    data["a"], data["b"], data["c"] = (
        np.arange(20).reshape(4, 5),
        b"xy",
        -np.arange(20).reshape(4, 5),
    )
    z = zarr.create_array(
        store={},
        shape=data.shape,
        chunks=(2, 5),
        dtype=dtype,
        serializer=BytesCodec(),
        compressors=None,
        fill_value=None,
    )
    z[...] = data
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        reopened = zarr.open_array(z.store, mode="r")
        assert reopened[...].dtype == dtype and reopened[...].tobytes() == data.tobytes()
        assert reopened[1:3, 2].tobytes() == data[1:3, 2].tobytes()


ZARR_BULK_SHARD_READ = "_decode_full_shard_bulk_if_uncompressed"  # zarr 3.4's whole-shard fast path
# the (opt-in) pipeline that takes it, zarr 3.4
FUSED_PIPELINE = "zarr.core.codec_pipeline.FusedCodecPipeline"


def test_zarrs_whole_shard_fast_path_takes_this_codec_where_no_byte_needs_a_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """zarr 3.4 reads a whole uncompressed shard in bulk where its inner codec is (a subclass of)
    its own bytes codec: ours is taken there, but for bools, whose every byte is checked. Before 3.4
    there is no such path: every inner chunk goes through the codec, bools checked alike."""
    from zarr.codecs import ShardingCodec

    bulk = getattr(ShardingCodec, ZARR_BULK_SHARD_READ, None)
    assert (bulk is not None) == ZARR_READS_WHOLE_SHARDS_IN_BULK, f"zarr {zarr.__version__}"
    taken: list[bool] = []
    if bulk is None:
        whole_shards_read_in_bulk_or_checked(taken, bulk=False)
        return

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = bulk(self, *args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(ShardingCodec, ZARR_BULK_SHARD_READ, recorded)
    with zarr.config.set({"codec_pipeline.path": FUSED_PIPELINE}):
        whole_shards_read_in_bulk_or_checked(taken, bulk=True)


def whole_shards_read_in_bulk_or_checked(taken: list[bool], bulk: bool) -> None:
    """Whole shards of int32 and bool read right, a corrupt bool byte refused; where zarr has the
    bulk path (``bulk``), it is taken for the int32 shard and not for the bool one."""
    cases: list[tuple[str, np.ndarray[Any, Any], Literal["big"] | None]] = [
        (">i4", np.arange(16), "big"),
        ("|b1", np.arange(16) % 3 == 0, "big"),
        ("|b1", np.arange(16) % 3 == 0, None),
    ]
    for dtype, data, endian in cases:
        store: dict[str, Any] = {}
        z = zarr.create_array(
            store=store,
            shape=(16,),
            chunks=(4,),
            shards=(16,),
            dtype=dtype,
            serializer=BytesCodec(endian=endian),
            compressors=None,
        )
        z[...] = data
        # read back from its metadata too: the codec evolved there equals the unevolved one
        with zarr3.enable():
            opened = zarr.open_array(store=store, mode="r")
        for array in (z, opened):
            taken.clear()
            assert array[...].tolist() == data.tolist()
            # a bool shard is read chunk by chunk: checked
            expected = [dtype != "|b1"] if bulk else []
            assert taken == expected, (dtype, endian, taken)
        if dtype == "|b1":
            shard = bytearray(store["c/0"].to_bytes())
            shard[5] = 7
            store["c/0"] = zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(
                bytes(shard)
            )
            for array in (z, opened):
                with pytest.raises(ValueError, match="corrupt bool data: byte 1 is 0x07"):
                    array[...]


@pytest.mark.parametrize("dtype", ["float32", "uint8", ">i2", "complex64"])
def test_a_codec_read_back_or_evolved_equals_the_one_made_with_the_same_configuration(
    dtype: str,
) -> None:
    """Issue 43, item 12: as with zarr's own codec, an array's serializer equals a codec made with
    its configuration (zarr's own suite compares the default serializer so); where bytes are checked
    it cannot (see the next test)."""
    store: dict[str, Any] = {}
    zarrs_own = zarr.create_array(store={}, shape=(10,), dtype=dtype).serializer
    with zarr3.enable():
        created = zarr.create_array(store=store, shape=(10,), dtype=dtype)
        opened = zarr.open_array(store=store, mode="r")
    configuration = zarrs_own.to_dict().get("configuration", {})
    made = BytesCodec(**configuration)
    for serializer in (created.serializer, opened.serializer):
        assert isinstance(serializer, BytesCodec) and isinstance(serializer, ZarrBytesCodec)
        assert serializer == made and hash(serializer) == hash(made), (serializer, made)


def test_a_codec_evolved_for_checked_bytes_is_unequal_to_the_one_it_evolved_from() -> None:
    """Where it checks bytes (bool), the evolved codec compares unequal: zarr's sharding codec keeps
    an unevolved inner codec that equals its evolution, and zarr 3.4 would then read whole shards
    without it, unchecked (see whole_shards_read_in_bulk_or_checked)."""
    with zarr3.enable():
        serializer = zarr.create_array(store={}, shape=(10,), dtype="|b1").serializer
    assert serializer != BytesCodec() and serializer.to_dict() == BytesCodec().to_dict()
    assert not serializer.is_fixed_size and BytesCodec().is_fixed_size


def test_corrupt_bool_chunk_and_wrong_length_chunk_raise(tmp_path: Path) -> None:
    z = zarr.create_array(
        store=str(tmp_path / "b.zarr"),
        shape=(6,),
        chunks=(3,),
        dtype="|b1",
        serializer=BytesCodec(),
        compressors=None,
    )
    z[:] = [True, False, True, False, True, True]
    (tmp_path / "b.zarr" / "c" / "0").write_bytes(b"\x01\x07\x00")
    with pytest.raises(ValueError, match="corrupt bool data: byte 1 is 0x07"):
        z[:3]
    w = zarr.create_array(
        store=str(tmp_path / "w.zarr"),
        shape=(6,),
        chunks=(3,),
        dtype="<i4",
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    w[:] = np.arange(6)
    (tmp_path / "w.zarr" / "c" / "1").write_bytes(b"\x00" * 11)
    with pytest.raises(
        ValueError, match=r"chunk of 11 bytes does not match its shape|chunk too short"
    ):
        w[3:]
    with pytest.raises(
        ValueError, match=r"chunk of 11 bytes does not match its shape|chunk too short"
    ):
        w[...]


# -- legacy stores: written by zarr-python, renamed to the draft's name ----------------------------


def make_legacy_stores(root: Path) -> dict[str, np.ndarray[Any, Any]]:
    """A plain array, sharded arrays with endian as inner and as index codec, and a consolidated
    group."""
    values = {
        "plain": np.arange(24, dtype="<i2").reshape(4, 6),
        "group/sharded": np.arange(64, dtype="<f8").reshape(8, 8),
        "group/inner": np.arange(12, dtype="<u4"),
    }
    zarr.create_array(
        store=str(root / "plain"),
        data=values["plain"],
        chunks=(2, 3),
        serializer=ZarrBytesCodec(endian="big"),
        compressors=None,
    )
    group = zarr.open_group(str(root / "group"), mode="w")
    group.create_array(
        "sharded",
        data=values["group/sharded"],
        chunks=(2, 2),
        shards=(4, 4),
        serializer=ZarrBytesCodec(endian="big"),
        compressors=None,
    )
    group.create_array(
        "inner",
        data=values["group/inner"],
        chunks=(3,),
        compressors=None,
        serializer=ZarrBytesCodec(endian="little"),
    )
    zarr.consolidate_metadata(str(root / "group"))
    for path in root.rglob("zarr.json"):
        text = path.read_text().replace('"name": "bytes"', '"name": "endian"')
        path.write_text(text)
    return values


def test_legacy_stores_open_read_in_a_fresh_process_with_nothing_imported(tmp_path: Path) -> None:
    values = make_legacy_stores(tmp_path)
    legacy_text = {p: p.read_text() for p in tmp_path.rglob("zarr.json")}
    # index codecs too
    assert sum(text.count('"name": "endian"') for text in legacy_text.values()) >= 6
    code = f"""
import json, sys, zarr
import numpy as np
root = {str(tmp_path)!r}
plain = zarr.open_array(root + "/plain", mode="r+")
group = zarr.open_group(root + "/group", mode="r+", use_consolidated=True)
result = {{"plain": plain[...].tolist(), "sharded": group["sharded"][...].tolist()}}
result["inner"] = group["inner"][...].tolist()
plain[0, 0] = plain[0, 0]  # a write: the metadata must stay as it is
group["sharded"][1, 1] = group["sharded"][1, 1]
result["imported"] = "numcodecs_bytes.zarr3" in sys.modules
print(json.dumps(result))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    read = json.loads(result.stdout)
    assert read["plain"] == values["plain"].tolist()
    assert read["sharded"] == values["group/sharded"].tolist()
    assert read["inner"] == values["group/inner"].tolist()
    assert read["imported"], "zarr loaded the codec through its entry point"
    assert {p: p.read_text() for p in tmp_path.rglob("zarr.json")} == legacy_text


def test_a_users_choice_for_the_legacy_name_is_kept() -> None:
    code = (
        "import zarr; zarr.config.set({'codecs.endian': 'my.Codec'});"
        "import numcodecs_bytes.zarr3; print(zarr.config.get('codecs.endian'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "my.Codec"


@pytest.mark.skipif(
    not has_module("zarrs"),
    reason="zarrs (a Rust codec pipeline) is not installed (the interop extra)",
)
def test_legacy_stores_open_with_the_zarrs_pipeline(tmp_path: Path) -> None:
    values = make_legacy_stores(tmp_path)
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
        assert (
            zarr.open_array(str(tmp_path / "plain"), mode="r")[...].tolist()
            == values["plain"].tolist()
        )
        group = zarr.open_group(str(tmp_path / "group"), mode="r")
        assert group["sharded"][...].tolist() == values["group/sharded"].tolist()


@pytest.mark.skipif(
    not has_module("tensorstore"), reason="tensorstore is not installed (the interop extra)"
)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_tensorstore_reads_what_the_codec_wrote(tmp_path: Path, endian: str) -> None:
    import tensorstore as ts

    data = np.arange(35, dtype="<f8").reshape(5, 7) / 3
    z = create(tmp_path / "a.zarr", data, BytesCodec(endian=endian), compressors=None)  # type: ignore[arg-type]
    z[...] = data
    store = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "a.zarr")}}
    ).result()
    assert np.array_equal(store.read().result(), data)


def test_the_fused_pipeline_where_zarr_has_it_and_the_default_one_everywhere(
    tmp_path: Path,
) -> None:
    """zarr 3.3 added the (opt-in) FusedCodecPipeline, which calls codecs synchronously: the codec
    writes and reads through it where it exists, and through the default pipeline on every zarr."""
    from zarr.core import codec_pipeline

    assert hasattr(codec_pipeline, "FusedCodecPipeline") == ZARR_HAS_FUSED_PIPELINE, (
        f"zarr {zarr.__version__}"
    )
    pipelines = [None] + (
        ["zarr.core.codec_pipeline.FusedCodecPipeline"] if ZARR_HAS_FUSED_PIPELINE else []
    )
    data = np.arange(35, dtype="<i4").reshape(5, 7)
    for i, pipeline in enumerate(pipelines):
        with zarr.config.set({"codec_pipeline.path": pipeline} if pipeline else {}):
            z = create(tmp_path / f"{i}.zarr", data, BytesCodec(endian="big"), compressors=None)
            z[...] = data
            assert z[1:4, 2:5].tolist() == data[1:4, 2:5].tolist()
        assert zarr.open_array(str(tmp_path / f"{i}.zarr"))[...].tolist() == data.tolist()


# -- byte-range reads ------------------------------------------------------------------------------


class RecordingStore(WrapperStore[Any]):
    """Records the byte ranges requested of chunk keys (in a class attribute: zarr may copy the
    store)."""

    requests: ClassVar[list[tuple[str, Any]]] = []

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if not key.endswith("zarr.json"):
            self.requests.append((key, byte_range))
        return await self._store.get(key, prototype, byte_range)


def recorded_bytes(requests: list[tuple[str, Any]], chunk_size: int) -> int:
    total = 0
    for _, byte_range in requests:
        total += chunk_size if byte_range is None else byte_range.end - byte_range.start
    return total


@pytest.mark.parametrize(
    ("selection", "most_bytes"),
    [
        ((123, 4067), 4),
        ((slice(10, 12), 5), 4 * (4096 + 1)),
        ((7, slice(None)), 4 * 4096),
        ((slice(None), 3), None),
    ],
)
def test_reading_a_selection_fetches_only_its_span(
    tmp_path: Path, selection: Any, most_bytes: int | None
) -> None:
    shape = (4096, 4096)  # one 64 MiB int32 chunk
    data = np.arange(np.prod(shape), dtype="<i4").reshape(shape)
    zarr.create_array(
        store=str(tmp_path / "a.zarr"),
        data=data,
        chunks=shape,
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    store = RecordingStore(zarr.storage.LocalStore(str(tmp_path / "a.zarr")))
    RecordingStore.requests.clear()
    # read with this codec
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        z = zarr.open_array(store, mode="r+", zarr_format=3)  # (read-only wrappers need zarr 3.1.6)
        assert np.array_equal(z[selection], data[selection])
    fetched = recorded_bytes(store.requests, data.nbytes)
    if most_bytes is None:  # a whole column: the span is the whole chunk but for one row's tail
        assert fetched <= data.nbytes
    else:
        assert fetched <= most_bytes, store.requests


def test_partial_read_of_a_missing_chunk_is_the_fill_value(tmp_path: Path) -> None:
    z = zarr.create_array(
        store=str(tmp_path / "a.zarr"),
        shape=(8,),
        chunks=(4,),
        dtype="<i4",
        fill_value=-1,
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    z[:4] = [1, 2, 3, 4]
    assert z[2:6].tolist() == [3, 4, -1, -1]
    assert z[[0, 5, 3]].tolist() == [1, -1, 4]
    assert z.vindex[[0, 3]].tolist() == [1, 4]


def test_needs_endian_agrees_with_the_codec(tmp_path: Path) -> None:
    for dtype in DTYPES:
        endian_or_none = None if not needs_endian(np.dtype(dtype)) else "big"
        serializer = BytesCodec(endian=endian_or_none)  # type: ignore[arg-type]
        z = zarr.create_array(store={}, shape=(2,), dtype=dtype, serializer=serializer)
        assert z.metadata.to_dict()["codecs"][0]["name"] == "bytes"


def test_as_the_inner_and_the_index_codec_of_sharding(tmp_path: Path) -> None:
    from zarr.codecs import Crc32cCodec, ShardingCodec

    data = np.arange(64, dtype="<f4").reshape(8, 8)
    sharding = ShardingCodec(
        chunk_shape=(2, 2),
        codecs=[BytesCodec(endian="big")],
        index_codecs=[BytesCodec(endian="little"), Crc32cCodec()],
    )
    z = zarr.create_array(
        store=str(tmp_path / "s.zarr"),
        shape=data.shape,
        chunks=(4, 4),
        dtype=data.dtype,
        serializer=sharding,
        compressors=None,
    )
    z[...] = data
    configuration = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())["codecs"][0][
        "configuration"
    ]
    assert configuration["codecs"] == [{"name": "bytes", "configuration": {"endian": "big"}}]
    assert configuration["index_codecs"][0] == {
        "name": "bytes",
        "configuration": {"endian": "little"},
    }
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        assert (
            zarr.open_array(str(tmp_path / "s.zarr"), mode="r")[1:7, 3].tolist()
            == data[1:7, 3].tolist()
        )
    # zarr's own codec
    assert zarr.open_array(str(tmp_path / "s.zarr"), mode="r")[...].tolist() == data.tolist()


def test_enable_selects_this_codec_for_created_opened_and_sharded_arrays_until_it_ends() -> None:
    from zarr.codecs import ShardingCodec

    def codecs_of(z: Any) -> list[Any]:
        found = []
        for codec in z.metadata.codecs:
            found += (
                [*codec.codecs, *codec.index_codecs]
                if isinstance(codec, ShardingCodec)
                else [codec]
            )
        return [codec for codec in found if codec.to_dict()["name"] == "bytes"]

    data = np.arange(16, dtype=">i4").reshape(4, 4)
    stores: dict[str, dict[str, Any]] = {"ours": {}, "zarr": {}}

    with zarr3.enable():
        plain = zarr.create_array(store={}, data=data)
        sharded = zarr.create_array(store=stores["ours"], data=data, chunks=(2, 2), shards=(4, 4))
        made_directly = ShardingCodec(chunk_shape=(2, 2))
        opened = zarr.open_array(stores["ours"], mode="r")
        for z in (plain, sharded, opened):
            assert codecs_of(z) and all(isinstance(codec, BytesCodec) for codec in codecs_of(z)), (
                codecs_of(z)
            )
        assert all(
            isinstance(c, BytesCodec)
            for c in (*made_directly.codecs[:1], made_directly.index_codecs[0])
        )
        assert opened[...].tolist() == data.tolist()
    zarr.create_array(store=stores["zarr"], data=data, chunks=(2, 2), shards=(4, 4))
    assert all(
        type(codec) is ZarrBytesCodec
        for codec in codecs_of(zarr.open_array(stores["zarr"], mode="r"))
    )
    # after the block: zarr's again
    assert type(ShardingCodec(chunk_shape=(2, 2)).codecs[0]) is ZarrBytesCodec
    assert {k: v.to_bytes() for k, v in stores["ours"].items()} == {
        k: v.to_bytes() for k, v in stores["zarr"].items()
    }


def test_the_config_key_set_by_the_environment_selects_it_once_enable_is_called(
    tmp_path: Path,
) -> None:
    code = """
import zarr, numcodecs_bytes.zarr3
numcodecs_bytes.zarr3.enable()
zarr.config.reset()  # as zarr's own tests do around each test: the environment's key stays
z = zarr.create_array(store={}, shape=(4,), dtype="<f8", shards=(4,), chunks=(2,))
sharding = z.metadata.codecs[0]
print({type(c).__module__ for c in (sharding.codecs[0], sharding.index_codecs[0])})
"""
    env = {**os.environ, "ZARR_CODECS__BYTES": "numcodecs_bytes.zarr3.BytesCodec"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "{'numcodecs_bytes.zarr3'}"


def test_installing_the_package_changes_nothing_in_zarr_until_enable(tmp_path: Path) -> None:
    """zarr loads this package's module through its entry points whenever it resolves the name bytes
    (or endian): that registers the codec, and changes none of zarr's functions."""
    store = tmp_path / "a.zarr"
    zarr.create_array(str(store), data=np.arange(4, dtype=">i4"), chunks=(2,), shards=(4,))
    code = f"""
import sys, zarr, zarr.core.array as array
from zarr.codecs.sharding import ShardingCodec
before = (array.default_serializer_v3, ShardingCodec.__init__)
opened = zarr.open_array({str(store)!r}, mode="r")[...]
zarr.create_array(store={{}}, shape=(4,), dtype="<i2", shards=(4,), chunks=(2,))
assert "numcodecs_bytes.zarr3" in sys.modules  # loaded by zarr, through the entry point
assert (array.default_serializer_v3, ShardingCodec.__init__) == before, "changed without enable()"
import numcodecs_bytes.zarr3
with numcodecs_bytes.zarr3.enable():
    pass
print((array.default_serializer_v3, ShardingCodec.__init__) != before)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr


def test_enable_from_many_threads_at_once_changes_zarr_once() -> None:
    """Issue 43, item 8: a threaded application's first enable() calls, at once. Each trial starts
    from zarr's own functions, in a fresh interpreter of its own trials; zarr's functions end
    wrapped once, and sharded arrays are made as before (wrapped twice, every one raised KeyError:
    'index_codecs')."""
    code = """
import sys, threading, zarr, zarr.core.array as array
from zarr.codecs.sharding import ShardingCodec
import numcodecs_bytes.zarr3 as zarr3
sys.setswitchinterval(1e-6)
originals = (array.default_serializer_v3, ShardingCodec.__init__)
wrong = 0
for trial in range(300):
    array.default_serializer_v3, ShardingCodec.__init__ = originals
    start = threading.Barrier(8)
    def first_call():
        start.wait()
        zarr3.enable()
    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wrapped = (array.default_serializer_v3.__wrapped__, ShardingCodec.__init__.__wrapped__)
    try:
        zarr.create_array(store={}, shape=(4,), dtype="<i2", shards=(4,), chunks=(2,))
    except KeyError:
        wrong += 1
    wrong += wrapped != originals
print(wrong)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "0", (
        result.stdout,
        result.stderr[-2000:],
    )


# -- corrupt shards: the values of zarr-python's own codec, or an error where it finds one ---------

INNER = 8  # two inner chunks of 8 int32 in one shard of 16


def shard_store(index: list[int] | None = None, body: bytes | None = None) -> dict[str, Any]:
    """A (16,) int32 array in one shard without an index checksum; its index or body replaced if
    given."""
    from zarr.codecs import ShardingCodec

    store = zarr.storage.MemoryStore()
    sharding = ShardingCodec(
        chunk_shape=(INNER,),
        codecs=[ZarrBytesCodec(endian="little")],
        index_codecs=[ZarrBytesCodec(endian="little")],
    )
    z = zarr.create_array(
        store=store, shape=(16,), chunks=(16,), dtype="<i4", serializer=sharding, compressors=None
    )
    z[:] = np.arange(16, dtype="<i4")
    shard = store._store_dict["c/0"].to_bytes()
    if body is not None:
        shard = body + shard[-32:]
    if index is not None:
        shard = shard[:-32] + np.array(index, "<u8").tobytes()
    store._store_dict["c/0"] = zarr.core.buffer.cpu.Buffer.from_bytes(shard)
    return {"store": store}


def read_with(implementation: str, store: dict[str, Any], selection: Any) -> np.ndarray[Any, Any]:
    with zarr.config.set({"codecs.bytes": implementation}):
        return np.asarray(zarr.open_array(store["store"], mode="r")[selection])


OURS, ZARRS_OWN = "numcodecs_bytes.zarr3.BytesCodec", "zarr.codecs.bytes.BytesCodec"


@pytest.mark.parametrize("selection", [slice(12, 14), slice(11, 16), slice(8, 16), 13, [9, 15]])
def test_a_truncated_inner_chunk_is_an_error_never_other_elements(selection: Any) -> None:
    store = shard_store(index=[0, 32, 32, 8])  # inner chunk 1: 8 bytes instead of 32
    with pytest.raises(ValueError):
        read_with(ZARRS_OWN, store, selection)
    with pytest.raises(ValueError, match="chunk of 8 bytes does not match its shape"):
        read_with(OURS, store, selection)


def test_a_truncated_chunk_fetched_by_range_is_an_error(tmp_path: Path) -> None:
    z = zarr.create_array(
        store=str(tmp_path / "a.zarr"),
        shape=(16,),
        chunks=(16,),
        dtype="<i4",
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    z[:] = np.arange(16)
    chunk = tmp_path / "a.zarr" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:50])  # elements 12.5 onwards are gone
    assert z[1:12].tolist() == list(range(1, 12))  # what the range asks for is all there
    with pytest.raises(
        ValueError,
        match=r"chunk of 6 bytes does not match its shape \(16,\) of int32: "
        r"12 bytes expected from byte 44",
    ):
        z[11:14]


def test_a_truncated_chunk_is_an_error_naming_its_length_on_every_read_path(tmp_path: Path) -> None:
    """The whole chunk, a contiguous block and a span inside a block: each checks the exact length
    it read."""
    z = zarr.create_array(
        store=str(tmp_path / "a.zarr"),
        shape=(4, 4),
        chunks=(4, 4),
        dtype="<i4",
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    z[...] = np.arange(16).reshape(4, 4)
    chunk = tmp_path / "a.zarr" / "c" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:30])
    message = (
        "^chunk of {} bytes does not match its shape \\(4, 4\\) of int32: {} bytes expected{}$"
    )
    with pytest.raises(ValueError, match=message.format(30, 64, "")):
        z[...]
    with pytest.raises(ValueError, match=message.format(14, 32, " from byte 16")):
        z[1:3]  # rows 1 and 2: a contiguous block
    with pytest.raises(ValueError, match=message.format(10, 20, " from byte 20")):
        z[1:3, 1]  # elements 5 and 9: the span 5..9 inside the block of rows 1 and 2


def test_constructor_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"^endian must be 'little', 'big' or None, got 'BIG'$"):
        BytesCodec(endian="BIG")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^name must be 'bytes' or the legacy 'endian', got 'byte'$"
    ):
        BytesCodec(name="byte")


@given(
    index=st.lists(
        st.sampled_from([0, 4, 8, 28, 32, 36, 64, 68, 2**64 - 1]), min_size=4, max_size=4
    ),
    cut=st.integers(0, 64),
    start=st.integers(0, 15),
    length=st.integers(1, 16),
)
@settings(max_examples=150, deadline=None)
# zarr's shard index arithmetic
@pytest.mark.filterwarnings("ignore:overflow encountered in scalar add:RuntimeWarning")
def test_fuzz_corrupt_shards_give_zarrs_values_or_an_error(
    index: list[int], cut: int, start: int, length: int
) -> None:
    body = np.arange(16, dtype="<i4").tobytes()[:cut]
    store = shard_store(index=index, body=body)
    selection = slice(start, min(start + length, 16))
    try:
        expected = read_with(ZARRS_OWN, store, selection)
    except (ValueError, IndexError, TypeError):
        event("invalid: zarr's own codec raises")
        with pytest.raises(ValueError):
            read_with(OURS, store, selection)
        return
    event("valid: values compared")
    assert read_with(OURS, store, selection).tolist() == expected.tolist()


@st.composite
def chunk_selections(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """A chunk shape and a selection of the kinds zarr passes to a codec: ints, slices, integer or
    bool arrays."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    selection: list[Any] = []
    for length in shape:
        kind = draw(st.sampled_from(["int", "slice", "ints", "bools"]))
        if kind == "int":
            selection.append(draw(st.integers(-length, length - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-length - 1, length + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-length - 1, length + 1)))
            selection.append(slice(start, stop, draw(st.integers(1, 3))))
        elif kind == "ints":
            selection.append(
                np.array(draw(st.lists(st.integers(-length, length - 1), min_size=1, max_size=4)))
            )
        else:
            selection.append(
                np.array(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
            )
    return shape, tuple(selection)


@given(case=chunk_selections())
@settings(max_examples=300, deadline=None)
def test_the_block_of_a_selection_holds_exactly_its_elements(
    case: tuple[tuple[int, ...], tuple[Any, ...]],
) -> None:
    from numcodecs_bytes.chunk_bytes import block as _block

    shape, selection = case
    if sum(isinstance(index, np.ndarray) for index in selection) > 1:
        event("several arrays: not compared")  # numpy indexes them jointly, zarr orthogonally
        return
    chunk = np.arange(int(np.prod(shape))).reshape(shape)
    expected = chunk[selection]
    block = _block(shape, selection)
    assert block is not None
    if block.elements == 0:
        assert expected.size == 0
        event("selects nothing")
        return
    flat = chunk.reshape(-1)[block.first : block.first + block.elements].reshape(block.shape)
    got = flat[block.selection]
    assert got.shape == expected.shape and got.tolist() == expected.tolist()
    assert expected.size == 0 or (
        block.span[0] <= expected.min() and expected.max() <= block.span[1]
    )
    event("whole chunk" if block.elements == chunk.size else "a block")


def test_the_block_is_not_worked_out_for_selections_zarr_does_not_pass() -> None:
    from numcodecs_bytes.chunk_bytes import block as _block

    assert _block((4,), slice(1, 3)) == _block((4,), (slice(1, 3),))  # a bare index is one axis's
    assert _block((4, 4), (slice(None),)) is None  # fewer indices than axes
    assert _block((), ()) is None
    assert _block((4,), (slice(None, None, -1),)) is None
    assert _block((4,), (np.array([1.0, 2.0]),)) is None  # floats are no positions
    assert _block((4, 4), (np.array([[1]]), slice(None))) is None  # nor is a 2-d array
    empty = _block((4, 5), (slice(2, 2), slice(None)))
    assert empty is not None and empty.elements == 0


def test_a_selection_of_nothing_reads_nothing(tmp_path: Path) -> None:
    """zarr itself never asks a codec for no elements (it skips such chunks); the codec answers
    without a read."""
    import asyncio

    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.dtype import parse_dtype
    from zarr.storage import LocalStore, StorePath

    dtype = parse_dtype("<i4", zarr_format=3)
    spec = ArraySpec(
        shape=(6, 5),
        dtype=dtype,
        fill_value=dtype.default_scalar(),
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    # a read would find nothing: None
    missing = StorePath(LocalStore(str(tmp_path)), "no-such-chunk")
    for selection in ((slice(2, 2), slice(None)), (slice(None), np.array([], dtype=np.intp))):
        got = asyncio.run(BytesCodec(endian="big")._decode_partial_single(missing, selection, spec))
        assert got is not None
        assert got.as_ndarray_like().shape == np.empty((6, 5))[selection].shape
        assert got.as_ndarray_like().dtype == np.dtype("<i4")


@pytest.fixture(scope="module")
def one_chunk_array(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, np.ndarray[Any, Any]]:
    data = np.arange(5 * 6 * 7, dtype="<i4").reshape(5, 6, 7)
    path = tmp_path_factory.mktemp("partial") / "a.zarr"
    zarr.create_array(
        store=str(path),
        data=data,
        chunks=data.shape,
        serializer=BytesCodec(endian="big"),
        compressors=None,
    )
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        array = zarr.open_array(str(path), mode="r")
    assert isinstance(array.metadata.codecs[0], BytesCodec)  # this package's codec reads it
    return array, data


@given(case=chunk_selections())
@settings(max_examples=150, deadline=None)
def test_orthogonal_selections_read_by_byte_range_equal_numpy(
    one_chunk_array: tuple[Any, np.ndarray[Any, Any]], case: tuple[tuple[int, ...], tuple[Any, ...]]
) -> None:
    array, data = one_chunk_array
    _, drawn = case
    selection = tuple(
        (np.flatnonzero(np.resize(index, n)) if index.dtype == np.bool_ else index % n)
        if isinstance(index, np.ndarray)
        else index % n
        # drawn for another length: brought in range
        if isinstance(index, int) and not -n <= index < n
        else index
        for index, n in zip((*drawn, slice(None), slice(None))[:3], data.shape, strict=True)
    )
    arrays = [np.asarray(index) if isinstance(index, np.ndarray) else None for index in selection]
    if any(a is not None and a.size == 0 for a in arrays):
        return  # zarr refuses empty integer selections
    if not ZARR_DROPS_AXES_OF_PARTIAL_READS and any(isinstance(index, int) for index in selection):
        return  # zarr < 3.1.6 keeps the dropped axis on the partial-read path (see stack.py)
    expected = data[
        np.ix_(
            *(
                np.arange(n)[index] if not isinstance(index, int) else [index % n]
                for index, n in zip(selection, data.shape, strict=True)
            )
        )
    ]
    expected = expected.reshape(
        [
            s
            for s, index in zip(expected.shape, selection, strict=True)
            if not isinstance(index, int)
        ]
    )
    with zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}):
        got = array.oindex[selection]
    assert got.tolist() == expected.tolist()
