"""BytesCodec: round trips, oracles, zero copy, errors, config and registry."""

from __future__ import annotations

import array
import copy
import json
import pickle
import subprocess
import sys
import warnings
from typing import Any

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from support.samples import (
    ML_DTYPES_NAMES,
    NUMPY_NATIVE,
    expected_bytes,
    sample_array,
    sample_dtype,
)
from support.stack import HAS_STRING_DTYPE, ZARR_SWAPS_STRUCT_FIELDS, needs_ml_dtypes

from numcodecs_bytes import DATA_TYPES, BytesCodec, migrate_config
from numcodecs_bytes.data_types import leaves, needs_endian, unit_dtype

SHAPES = [(), (0,), (7,), (2, 3), (3, 1, 4)]
# Each memory layout once: F order differs from C only with two axes longer than 1.
LAYOUTS = [
    (shape, order)
    for shape in SHAPES
    for order in "CF"
    if order == "C" or sum(n > 1 for n in shape) >= 2
]
NAMES = list(DATA_TYPES)


def endians(name: str) -> list[str | None]:
    """The endian values valid for a data type: None only where byte order does not apply."""
    return ["little", "big"] if needs_endian(sample_dtype(name)) else ["little", "big", None]


CASES = [(name, endian) for name in NAMES for endian in endians(name)]


# -- round trips against the numpy oracle ----------------------------------------------------------


@pytest.mark.parametrize(("name", "endian"), CASES)
def test_round_trip_matches_numpy(name: str, endian: str | None) -> None:
    """Every memory layout of the data type (a loop: one test item per type keeps the suite
    fast)."""
    for shape, order in LAYOUTS:
        layout = f"shape {shape}, order {order}"
        data = sample_array(name, shape, order)
        before = data.copy(order="K")
        codec = BytesCodec(endian=endian, dtype=data.dtype)  # type: ignore[arg-type]
        encoded = codec.encode(data)
        assert bytes(encoded) == expected_bytes(data, endian), layout
        assert data.tobytes(order="A") == before.tobytes(order="A"), (
            f"encode modified its input: {layout}"
        )

        decoded = codec.decode(encoded)
        assert decoded.dtype == data.dtype and decoded.shape == (data.size,), layout
        assert decoded.tobytes() == data.tobytes(order="A"), layout

        out = np.zeros(shape, dtype=data.dtype, order=order)  # type: ignore[call-overload]
        assert codec.decode(bytes(encoded), out=out) is out, layout
        assert out.tobytes(order="A") == data.tobytes(order="A"), layout


@pytest.mark.parametrize(("name", "endian"), CASES)
def test_dtype_from_the_data_when_not_configured(name: str, endian: str | None) -> None:
    data = sample_array(name, (2, 3))
    codec = BytesCodec(endian=endian)  # type: ignore[arg-type]
    encoded = codec.encode(data)
    assert bytes(encoded) == expected_bytes(data, endian)
    out = np.empty_like(data)
    codec.decode(encoded, out=out)
    assert out.tobytes() == data.tobytes()


@pytest.mark.parametrize("name", NUMPY_NATIVE)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_in_memory_byte_order_does_not_change_the_output(name: str, endian: str) -> None:
    data = sample_array(name, (5,))
    big_in_memory = data.astype(data.dtype.newbyteorder(">"))
    # Without a dtype the codec takes each array's own; the bytes are the same either way.
    free = BytesCodec(endian=endian)  # type: ignore[arg-type]
    assert (
        bytes(free.encode(big_in_memory))
        == bytes(free.encode(data))
        == expected_bytes(data, endian)
    )
    # With one, decode returns that dtype: data in the other byte order would come back as other
    # values where it is viewed as its own dtype (a Zarr v2 array does): refused, never written.
    codec = BytesCodec(endian=endian, dtype=data.dtype)  # type: ignore[arg-type]
    assert bytes(codec.encode(data)) == expected_bytes(data, endian)
    if unit_dtype(big_in_memory.dtype) != unit_dtype(data.dtype):
        with pytest.raises(ValueError, match=r"in the other byte order: decode returns"):
            codec.encode(big_in_memory)
    # decoding into either byte order is exact: out says which
    out = np.empty(5, big_in_memory.dtype)
    codec.decode(codec.encode(data), out=out)
    assert out.tobytes() == big_in_memory.tobytes()


@pytest.mark.parametrize("endian", ["little", "big"])
def test_strided_input_is_encoded_in_c_order(endian: str) -> None:
    data = np.arange(60, dtype="<c8").reshape(3, 4, 5).transpose(2, 0, 1)[::2, :, 1:]
    assert not data.flags.forc
    codec = BytesCodec(endian=endian, dtype="<c8")  # type: ignore[arg-type]
    assert bytes(codec.encode(data)) == data.astype(
        {"little": "<c8", "big": ">c8"}[endian]
    ).tobytes(order="C")


@needs_ml_dtypes
def test_strided_ml_dtypes_input() -> None:
    data = sample_array("bfloat16", (4, 6))[:, ::2]
    codec = BytesCodec(endian="big", dtype="bfloat16")
    assert bytes(codec.encode(data)) == expected_bytes(np.ascontiguousarray(data), "big")


@pytest.mark.parametrize("step", [2, -1, -3])
@pytest.mark.parametrize(
    ("name", "endian"),
    [
        ("int32", "big"),
        ("int32", "little"),
        ("bool", None),
        ("fixed_length_utf32", "big"),
        ("struct", "big"),
    ],
)
def test_flat_strided_input_is_gathered(name: str, endian: str | None, step: int) -> None:
    # A flat array is used as it is when contiguous; a strided or reversed one must be gathered,
    # also where no byte is swapped (the result would otherwise be a view with gaps).
    data = sample_array(name, (12,))[::step]
    codec = BytesCodec(endian=endian, dtype=data.dtype)  # type: ignore[arg-type]
    encoded = codec.encode(data)
    assert encoded.flags.c_contiguous
    assert bytes(encoded) == expected_bytes(np.ascontiguousarray(data), endian or "little")
    assert codec.decode(encoded).tobytes() == np.ascontiguousarray(data).tobytes()


# -- every kind of input buffer --------------------------------------------------------------------


def buffer_kinds(data: np.ndarray[Any, Any]) -> dict[str, Any]:
    """The same bytes in every kind of buffer a caller may pass."""
    raw = data.tobytes()
    as_uint8 = np.frombuffer(raw, np.uint8)
    kinds: dict[str, Any] = {
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "uint8 array": as_uint8,
        "ndarray subclass": as_uint8.view(_Sub),
    }
    if len(raw) % 2 == 0 and len(raw) > 2:
        # memory order is still raw's
        kinds["2-d F-order array"] = as_uint8.reshape(-1, 2, order="F")
    if data.dtype.kind in "iuf" and data.dtype.char in array.typecodes:
        kinds["array.array"] = array.array(data.dtype.char, data.tolist())
    return kinds


class _Sub(np.ndarray):
    """An ndarray subclass, like the ones zarr-any-numcodecs passes."""


@pytest.mark.parametrize(
    "name",
    [
        "int32",
        "float64",
        "complex64",
        "bool",
        "fixed_length_utf32",
        "struct",
        pytest.param("bfloat16", marks=needs_ml_dtypes),
    ],
)
def test_every_kind_of_input_buffer(name: str) -> None:
    data = sample_array(name, (6,))
    codec = BytesCodec(endian="big", dtype=data.dtype)
    want = expected_bytes(data, "big")
    for kind, buf in buffer_kinds(data).items():
        if isinstance(buf, np.ndarray):  # an array of another dtype is a mistake, not raw bytes
            with pytest.raises(ValueError, match="the array to encode has dtype uint8"):
                codec.encode(buf)
        else:
            assert bytes(codec.encode(buf)) == want, kind
    stored = {
        kind: buf
        for kind, buf in buffer_kinds(np.frombuffer(want, np.uint8)).items()
        if kind != "array.array"
    }
    for kind, buf in stored.items():
        assert codec.decode(buf).tobytes() == data.tobytes(), kind
        out = np.empty_like(data)
        codec.decode(buf, out=out)
        assert out.tobytes() == data.tobytes(), kind


def test_ndarray_subclass_in_and_out() -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    data = np.arange(6, dtype="<i4").reshape(2, 3).view(_Sub)
    encoded = codec.encode(data)
    out = np.zeros((2, 3), "<i4").view(_Sub)
    assert codec.decode(encoded, out=out) is out
    assert np.array_equal(out, data)


# -- independent oracle: zarr-python's own BytesCodec ----------------------------------------------

ZARR_CASES = [
    (name, endian) for name in NAMES if name not in ML_DTYPES_NAMES for endian in ("little", "big")
]


@pytest.mark.parametrize(("name", "endian"), ZARR_CASES)
def test_matches_zarr_python_bytes_codec(name: str, endian: str) -> None:
    zarr = pytest.importorskip("zarr")
    from zarr.codecs import BytesCodec as ZarrBytesCodec
    from zarr.storage import MemoryStore

    data = sample_array(name, (3, 4))
    if name == "struct":  # zarr-python 3.1 cannot create arrays of nested structs: a flat one
        flat = np.dtype([("id", "<u2"), ("x", "<f4"), ("tag", "S2"), ("z", "<c8")])
        data = np.array(
            [(i * 4099, i / 3, b"ab"[: i % 3], complex(i, -i)) for i in range(12)], flat
        ).reshape(3, 4)
    chunks: dict[str, Any] = {}
    z = zarr.create_array(
        store=MemoryStore(chunks),
        shape=data.shape,
        chunks=data.shape,
        dtype=data.dtype,
        serializer=ZarrBytesCodec(endian=endian),
        compressors=None,
        config={"write_empty_chunks": True},
    )
    z[...] = data
    zarr_bytes = chunks["c/0/0"].to_bytes()
    ours = BytesCodec(endian=endian, dtype=data.dtype)  # type: ignore[arg-type]
    if name == "struct" and endian == "big" and not ZARR_SWAPS_STRUCT_FIELDS:
        # zarr-python before 3.3 (fixed by PR #4142) ignores endian for structs: native, little
        # endian fields
        assert zarr_bytes == bytes(BytesCodec(endian="little", dtype=data.dtype).encode(data))
        assert zarr_bytes != bytes(ours.encode(data))
        return
    assert bytes(ours.encode(data)) == zarr_bytes
    assert ours.decode(zarr_bytes).tobytes() == data.tobytes()


# -- zero copy, one pass, no temporaries -----------------------------------------------------------


def test_caller_array_is_never_modified_even_when_read_only() -> None:
    data = np.arange(10, dtype="<u4")
    data.setflags(write=False)
    encoded = BytesCodec(endian="big").encode(data)
    assert np.array_equal(data, np.arange(10))
    assert bytes(encoded) == np.arange(10, dtype=">u4").tobytes()


# -- data-type specific rules ----------------------------------------------------------------------


@pytest.mark.parametrize("corrupt", [2, 0x80, 0xFF])
def test_corrupt_bool_bytes_raise_and_leave_out_untouched(corrupt: int) -> None:
    codec = BytesCodec(dtype="bool")
    buf = bytes([0, 1, 1, corrupt, 0])
    with pytest.raises(ValueError, match=rf"corrupt bool data: byte 3 is 0x{corrupt:02x}"):
        codec.decode(buf)
    out = np.array([True, False, True, False, True])
    with pytest.raises(ValueError, match="corrupt bool"):
        codec.decode(buf, out=out)
    assert out.tolist() == [True, False, True, False, True]


def test_bools_in_an_array_of_structs_field_are_checked_where_they_are() -> None:
    inner = np.dtype([("x", "<i2"), ("flag", "?")])
    dtype = np.dtype([("id", "<u4"), ("items", inner, (3,))])  # flags at bytes 6, 9 and 12 of 13
    data = np.zeros(2, dtype)
    data["items"]["flag"] = [[True, False, True], [False, True, False]]
    codec = BytesCodec(endian="big", dtype=dtype)
    stored = bytearray(codec.encode(data))
    assert codec.decode(bytes(stored)).tobytes() == data.tobytes()
    stored[13 + 9] = 7  # the second element's second flag
    with pytest.raises(ValueError, match=r"corrupt bool data: byte 22 is 0x07"):
        codec.decode(bytes(stored))


def test_decoding_into_a_buffer_returns_an_array_over_it() -> None:
    codec = BytesCodec(endian="big", dtype="<u2")
    out = bytearray(4)
    decoded = codec.decode(b"\x01\x02\x03\x04", out=out)
    assert isinstance(decoded, np.ndarray) and decoded.tolist() == [0x0102, 0x0304]
    decoded[0] = 0xFFFF  # a view of out's memory, not a copy
    assert out[:2] == b"\xff\xff"


def test_struct_with_an_ml_dtypes_field() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype([("x", ml_dtypes.bfloat16), ("n", "<i2")])
    data = np.array([(1.5, 258)], dtype=dtype)
    codec = BytesCodec(endian="big", dtype=dtype)
    assert bytes(codec.encode(data)).hex() == "3fc0" + "0102"
    assert codec.decode(codec.encode(data)).tobytes() == data.tobytes()
    assert BytesCodec.from_config(json.loads(json.dumps(codec.get_config()))) == codec


# -- bad input: clear errors, nothing lost ---------------------------------------------------------


@pytest.mark.parametrize("endian", ["BIG", "Little", "<", ">", "", 1, True, b"big", ["big"]])
def test_invalid_endian(endian: Any) -> None:
    with pytest.raises(ValueError, match=r"endian must be 'little', 'big' or None, got"):
        BytesCodec(endian=endian)


@pytest.mark.parametrize(
    "dtype",
    [
        "int16",
        "<f8",
        "complex64",
        "<U4",
        [("a", "u1"), ("b", "<i2")],
        pytest.param("bfloat16", marks=needs_ml_dtypes),
    ],
)
def test_endian_is_required_for_multi_byte_types(dtype: Any) -> None:
    with pytest.raises(ValueError, match="endian is required for data type"):
        BytesCodec(dtype=dtype)


@pytest.mark.parametrize(
    "dtype",
    [
        *["bool", "int8", "uint8", "r24", "S7", [("a", "u1"), ("b", "S3")]],
        *[pytest.param(name, marks=needs_ml_dtypes) for name in ("float8_e4m3fn", "int4")],
    ],
)
@pytest.mark.parametrize("endian", [None, "little", "big"])
def test_endian_is_optional_and_inert_for_single_byte_types(dtype: Any, endian: Any) -> None:
    codec = BytesCodec(endian=endian, dtype=dtype)
    data = np.zeros(3, codec.dtype)
    assert bytes(codec.encode(data)) == data.tobytes()


@pytest.mark.parametrize(
    "dtype",
    [
        *[object, "O", [("a", "<i4"), ("b", "O")]],
        pytest.param(
            "T",
            marks=pytest.mark.skipif(
                not HAS_STRING_DTYPE, reason="StringDType is new in numpy 2.0"
            ),
        ),
    ],
)
def test_object_and_variable_length_dtypes_raise_type_error(dtype: Any) -> None:
    with pytest.raises(TypeError, match="fixed-size"):
        BytesCodec(endian="little", dtype=dtype)


def test_encode_rejects_another_dtype() -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    with pytest.raises(
        ValueError, match=r"the array to encode has dtype float32, but the codec's dtype is int32"
    ):
        codec.encode(np.zeros(3, "<f4"))
    with pytest.raises(ValueError, match="codec's dtype is"):
        BytesCodec(dtype="r16").encode(np.zeros(3, "V4"))


@needs_ml_dtypes
def test_encode_rejects_raw_bytes_for_an_ml_dtypes_codec() -> None:
    with pytest.raises(ValueError, match="codec's dtype is"):
        BytesCodec(endian="big", dtype="bfloat16").encode(np.zeros(3, "V2"))


def test_encode_of_object_array_raises_type_error() -> None:
    with pytest.raises(TypeError, match="Python objects"):
        BytesCodec(endian="big").encode(np.array([1, "a"], dtype=object))


def test_encode_multi_byte_without_endian_raises() -> None:
    with pytest.raises(ValueError, match="endian is required for data type int64"):
        BytesCodec().encode(np.arange(3, dtype="<i8"))


def test_encode_raw_buffer_needs_a_dtype_and_whole_elements() -> None:
    with pytest.raises(TypeError, match="needs the codec's dtype"):
        BytesCodec(endian="big").encode(b"\x00\x01")
    with pytest.raises(
        ValueError, match="buffer of 6 bytes is not a whole number of 4-byte elements"
    ):
        BytesCodec(endian="big", dtype="<i4").encode(b"\x00" * 6)


@pytest.mark.parametrize("size", [1, 3, 7, 9])
def test_decode_rejects_partial_elements(size: int) -> None:
    with pytest.raises(
        ValueError, match=f"buffer of {size} bytes is not a whole number of 4-byte elements"
    ):
        BytesCodec(endian="big", dtype="<f4").decode(b"\x00" * size)


def test_decode_size_mismatch_with_out_names_both_sizes_and_leaves_out_untouched() -> None:
    out = np.full(3, 7, "<i4")
    with pytest.raises(
        ValueError, match=r"buffer of 8 bytes does not match out: 3 elements of int32 are 12 bytes"
    ):
        BytesCodec(endian="big", dtype="<i4").decode(b"\x00" * 8, out=out)
    with pytest.raises(ValueError, match=r"buffer of 16 bytes does not match out"):
        BytesCodec(endian="big").decode(b"\x00" * 16, out=out)
    assert out.tolist() == [7, 7, 7]


def test_decode_into_out_of_another_type_raises_and_leaves_out_untouched() -> None:
    out = np.full(2, 7, "<f4")
    with pytest.raises(ValueError, match="out has dtype float32, but the codec's dtype is int32"):
        BytesCodec(endian="big", dtype="<i4").decode(b"\x00" * 8, out=out)
    assert out.tolist() == [7, 7]


def test_decode_into_bad_out() -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    with pytest.raises(TypeError, match="Python objects"):
        codec.decode(b"\x00" * 8, out=np.empty(1, dtype=object))
    with pytest.raises(TypeError, match="out must be a numpy array or a writable buffer, got str"):
        codec.decode(b"\x00" * 8, out="12345678")
    with pytest.raises(ValueError, match=r"out is read-only \(bytes\)"):
        codec.decode(b"\x00" * 8, out=bytes(8))
    with pytest.raises(ValueError, match="C- or F-contiguous"):
        codec.decode(b"\x00" * 8, out=np.zeros(4, "<i4")[::2])
    read_only = np.zeros(2, "<i4")
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        codec.decode(b"\x00" * 8, out=read_only)


def test_decode_needs_a_dtype() -> None:
    with pytest.raises(ValueError, match="decode needs a dtype"):
        BytesCodec(endian="big").decode(b"\x00" * 8)


def test_decode_of_non_buffers_and_object_arrays() -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    with pytest.raises(TypeError, match="expected a buffer"):
        codec.decode([1, 2, 3])
    with pytest.raises(TypeError, match="Python objects"):
        codec.decode(np.array([b"abcd"], dtype=object))
    with pytest.raises(ValueError, match="contiguous"):
        codec.decode(np.zeros(16, np.uint8)[::2])


# -- config, equality, pickling --------------------------------------------------------------------

CONFIG_CASES = [
    BytesCodec(),
    BytesCodec(endian="little"),
    BytesCodec(endian="big", dtype="<i4"),
    BytesCodec(endian="big", dtype=">c16"),
    BytesCodec(dtype="r24"),
    BytesCodec(endian="little", dtype="<M8[ns]"),
    BytesCodec(endian="big", dtype="<U5"),
    BytesCodec(endian="big", dtype=sample_dtype("struct")),
    BytesCodec(
        endian="big", dtype={"names": ["a"], "formats": ["<u4"], "offsets": [4], "itemsize": 12}
    ),
]


@pytest.mark.parametrize("codec", CONFIG_CASES, ids=repr)
def test_config_round_trips(codec: BytesCodec) -> None:
    # such a config decodes only into out: taken for a Zarr v2 filter, never readable
    if codec.dtype is None:
        with pytest.warns(
            UserWarning, match=r"has no dtype: .* could be written but not read\); give dtype="
        ):
            config = codec.get_config()
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            config = codec.get_config()
    assert config["id"] == "bytes"
    assert set(config) == {"id"} | {
        key for key in ("endian", "dtype") if getattr(codec, key) is not None
    }
    from_json = json.loads(json.dumps(config))
    assert BytesCodec.from_config(from_json) == codec
    assert numcodecs.get_codec(from_json) == codec
    assert numcodecs.get_codec({**from_json, "id": "endian"}) == codec
    again = BytesCodec.from_config(from_json)
    assert again.dtype == codec.dtype and hash(again) == hash(codec)
    assert eval(repr(codec), {"BytesCodec": BytesCodec}) == codec
    assert pickle.loads(pickle.dumps(codec)) == codec
    assert copy.deepcopy(codec) == codec


def test_repr_and_equality() -> None:
    assert repr(BytesCodec(endian="big", dtype="<i4")) == "BytesCodec(endian='big', dtype='<i4')"
    assert repr(BytesCodec()) == "BytesCodec()"
    assert BytesCodec(endian="big") != BytesCodec(endian="little")
    assert BytesCodec(endian="big", dtype="<i4") != BytesCodec(endian="big", dtype=">i4")
    assert BytesCodec(endian="big", dtype="int32") == BytesCodec(
        endian="big", dtype=np.dtype("<i4")
    )
    assert BytesCodec(endian="big") != object()
    assert len({BytesCodec(endian="big"), BytesCodec(endian="big"), BytesCodec()}) == 2


def test_configuration_is_read_only() -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    with pytest.raises(AttributeError):
        codec.endian = "little"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        codec.dtype = np.dtype("<f8")  # type: ignore[misc]
    assert bytes(codec.encode(np.array([1], "<i4"))) == b"\x00\x00\x00\x01"


def test_from_config_rejects_unknown_keys_and_ids() -> None:
    with pytest.raises(ValueError, match=r"unknown bytes codec config keys \['order'\]"):
        BytesCodec.from_config({"endian": "big", "order": "C"})
    with pytest.raises(ValueError, match="not a bytes codec config: id 'zlib'"):
        BytesCodec.from_config({"id": "zlib"})
    with pytest.raises(ValueError, match="endian must be"):
        numcodecs.get_codec({"id": "bytes", "endian": "middle"})


# -- Zarr v3 metadata ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bytes", "endian"])
def test_from_v3_accepts_every_form(name: str) -> None:
    big = BytesCodec(endian="big", dtype="<i4")
    assert (
        BytesCodec.from_v3({"name": name, "configuration": {"endian": "big"}}, dtype="<i4") == big
    )
    assert (
        BytesCodec.from_v3(
            {"name": name, "configuration": {"endian": "big"}, "must_understand": True},
            dtype="int32",
        )
        == big
    )
    assert (
        BytesCodec.from_v3(
            {"name": name, "configuration": {"endian": "big"}, "must_understand": False},
            dtype="<i4",
        )
        == big
    )
    assert BytesCodec.from_v3(name) == BytesCodec()
    assert BytesCodec.from_v3(name, dtype="uint8") == BytesCodec(dtype="u1")
    assert BytesCodec.from_v3({"name": name}) == BytesCodec()
    assert BytesCodec.from_v3({"name": name, "must_understand": False}) == BytesCodec()
    assert BytesCodec.from_v3({"name": name, "configuration": {}}) == BytesCodec()


def test_from_v3_rejects_others() -> None:
    with pytest.raises(ValueError, match="not a bytes codec: name 'zstd'"):
        BytesCodec.from_v3({"name": "zstd", "configuration": {"level": 1}})
    with pytest.raises(ValueError, match="not a bytes codec: name 'transpose'"):
        BytesCodec.from_v3("transpose")
    with pytest.raises(ValueError, match=r"unknown bytes codec configuration keys \['order'\]"):
        BytesCodec.from_v3({"name": "bytes", "configuration": {"endian": "big", "order": "C"}})
    with pytest.raises(ValueError, match=r"unknown keys \['extra'\]"):
        BytesCodec.from_v3({"name": "bytes", "extra": 1})
    with pytest.raises(ValueError, match="endian must be"):
        BytesCodec.from_v3({"name": "bytes", "configuration": {"endian": "BIG"}})
    with pytest.raises(ValueError, match="endian is required"):
        BytesCodec.from_v3({"name": "bytes"}, dtype="<f8")


def test_to_v3() -> None:
    assert BytesCodec(endian="big", dtype="<i4").to_v3() == {
        "name": "bytes",
        "configuration": {"endian": "big"},
    }
    assert BytesCodec(endian="little").to_v3() == {
        "name": "bytes",
        "configuration": {"endian": "little"},
    }
    assert BytesCodec(dtype="u1").to_v3() == {"name": "bytes"}
    for codec in CONFIG_CASES:
        assert BytesCodec.from_v3(codec.to_v3(), dtype=codec.dtype) == codec


def test_to_v3_matches_zarr_python() -> None:
    pytest.importorskip("zarr")
    from zarr.codecs import BytesCodec as ZarrBytesCodec

    for endian in ("little", "big"):
        assert BytesCodec(endian=endian).to_v3() == ZarrBytesCodec(endian=endian).to_dict()
    assert BytesCodec().to_v3() == ZarrBytesCodec(endian=None).to_dict()


# -- the legacy endian id --------------------------------------------------------------------------


def test_migrate_config() -> None:
    v2 = {"id": "endian", "endian": "big", "dtype": "<i4"}
    v3 = {"name": "endian", "configuration": {"endian": "little"}, "must_understand": True}
    assert migrate_config(v2) == {"id": "bytes", "endian": "big", "dtype": "<i4"}
    assert migrate_config(v3) == {
        "name": "bytes",
        "configuration": {"endian": "little"},
        "must_understand": True,
    }
    assert migrate_config("endian") == "bytes"
    assert v2["id"] == "endian" and v3["name"] == "endian", "migrate_config mutated its input"
    for other in (
        {"id": "zlib", "level": 1},
        {"name": "bytes"},
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        "crc32c",
    ):
        migrated = migrate_config(other)
        assert migrated == other
    nested: dict[str, Any] = {"id": "endian", "endian": "big", "extra": {"list": [1]}}
    migrated = migrate_config(nested)
    migrated["extra"]["list"].append(2)
    assert nested["extra"]["list"] == [1], "migrate_config must return a new, independent config"
    assert numcodecs.get_codec(migrate_config(v2)) == numcodecs.get_codec(v2)


def test_both_ids_resolve_read_in_a_fresh_process_that_never_imported_the_package() -> None:
    script = """
import sys, numcodecs
assert "numcodecs_bytes" not in sys.modules
new = numcodecs.get_codec({"id": "bytes", "endian": "big", "dtype": "<i4"})
old = numcodecs.get_codec({"id": "endian", "endian": "big", "dtype": "<i4"})
assert "numcodecs_bytes" in sys.modules
assert type(new).__module__.startswith("numcodecs_bytes")
assert new == old and old.get_config()["id"] == "bytes", (new, old)
print(bytes(new.encode(__import__("numpy").arange(2, dtype="<i4"))).hex())
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0000000000000001"


def test_importing_registers_both_ids() -> None:
    from numcodecs.registry import codec_registry

    assert codec_registry["bytes"] is BytesCodec
    assert codec_registry["endian"] is BytesCodec


# -- property-based --------------------------------------------------------------------------------

numeric_dtypes = st.sampled_from(
    ["<i2", ">i4", "<u8", ">u2", "<f2", ">f4", "<f8", ">c8", "<c16", "<M8[us]", ">m8[D]", "?", "i1"]
)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    dtype=numeric_dtypes,
    endian=st.sampled_from(["little", "big"]),
    order=st.sampled_from("CF"),
)
def test_random_arrays_round_trip_and_match_numpy(
    data: st.DataObject, dtype: str, endian: str, order: str
) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    values = data.draw(hnp.arrays(np.dtype(dtype), shape))
    values = np.asarray(values, order=order)  # type: ignore[call-overload]
    codec = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    encoded = codec.encode(values)
    assert bytes(encoded) == expected_bytes(values, endian)
    out = np.empty(shape, dtype, order=order)  # type: ignore[call-overload]
    codec.decode(encoded, out=out)
    assert out.tobytes(order="A") == values.tobytes(order="A")


@st.composite
def views(draw: st.DrawFn, dtype: str) -> np.ndarray[Any, Any]:
    """Any view numpy makes of an array of ``dtype``: C or F order, axes permuted, steps of either
    sign."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    base = np.asarray(
        draw(hnp.arrays(np.dtype(dtype), shape)), dtype, order=draw(st.sampled_from("CF"))
    )
    view = base.transpose(draw(st.permutations(range(base.ndim))))
    steps = draw(
        st.lists(st.sampled_from([1, 1, 2, -1, -3]), min_size=view.ndim, max_size=view.ndim)
    )
    # with ...: 0-d stays an array
    index: tuple[Any, ...] = (..., *(slice(None, None, step) for step in steps))
    sliced: np.ndarray[Any, Any] = view[index]
    return sliced


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from(["<i2", "<u4", "<i8", "<f2", "<f4", "<f8", "<c8", "<c16", ">i4", ">f8"]),
)
def test_any_view_of_a_numeric_array_and_stored_bytes_match_numpy(
    data: st.DataObject, dtype: str
) -> None:
    """Numeric types in the other byte order: the codec calls numpy's copy itself for small native
    arrays."""
    view = data.draw(views(dtype))
    endian = "big" if dtype[0] == "<" else "little"
    # the memory order, else C
    order = "F" if view.flags.f_contiguous and not view.flags.c_contiguous else "C"
    before = view.tobytes(order="A")
    codec = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    encoded = codec.encode(view)
    assert encoded.ndim == 1 and encoded.flags.c_contiguous
    assert bytes(encoded) == expected_bytes(view, endian)
    assert view.tobytes(order="A") == before, "encode modified its input"
    raw = bytes(encoded)
    decoded = codec.decode(raw)
    assert decoded.dtype == np.dtype(dtype) and decoded.shape == (view.size,)
    assert decoded.tobytes() == view.tobytes(order=order)  # type: ignore[arg-type]
    out = np.full(view.shape, 7, dtype, order=order)  # type: ignore[call-overload]
    assert codec.decode(raw, out=out) is out
    assert out.tobytes(order="A") == view.tobytes(order=order)  # type: ignore[arg-type]
    read_only = np.zeros(view.shape, dtype)
    read_only.setflags(write=False)
    bad_outs = [np.zeros(view.size + 1, dtype), read_only]
    if view.size > 1:
        bad_outs.append(np.zeros(2 * view.size, dtype)[::2])  # strided
    for bad_out in bad_outs:
        kept = bad_out.tobytes()
        with pytest.raises(ValueError, match=r"does not match out|read-only|contiguous"):
            codec.decode(raw, out=bad_out)
        assert bad_out.tobytes() == kept


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(
        [n for n in NAMES if not DATA_TYPES[n].bool_bytes and DATA_TYPES[n].value_bits is None]
    ),
    endian=st.sampled_from(["little", "big"]),
    raw=st.binary(max_size=96),
)
def test_any_stored_bytes_decode_and_encode_back_unchanged(
    name: str, endian: str, raw: bytes
) -> None:
    dtype = sample_dtype(name)
    raw = raw[: len(raw) - len(raw) % dtype.itemsize]
    codec = BytesCodec(endian=endian, dtype=dtype)  # type: ignore[arg-type]
    stored = np.frombuffer(raw, np.uint8).reshape(-1, dtype.itemsize)
    bool_bytes = [
        offset + i
        for offset, count, row in leaves(dtype)
        if row.name == "bool"
        for i in range(count)
    ]
    # the sample struct's bool field
    if bool_bytes and stored.size and int(stored[:, bool_bytes].max()) > 1:
        with pytest.raises(ValueError, match="corrupt bool data"):
            codec.decode(raw)
        return
    assert bytes(codec.encode(codec.decode(raw))) == raw
    out = np.empty(len(raw) // dtype.itemsize, dtype)
    assert bytes(codec.encode(codec.decode(raw, out=out))) == raw


# -- Zarr v3 data type objects (the zarr.json form) ------------------------------------------------
