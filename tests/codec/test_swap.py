"""The swap core (numcodecs_bytes.swap) as the codec uses it: what each data type swaps, copies it
makes."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from support.samples import sample_array

from numcodecs_bytes import BytesCodec


@pytest.mark.parametrize("order", ["C", "F"])
def test_no_swap_encode_is_a_view_of_the_input(order: str) -> None:
    data = np.asarray(np.arange(24, dtype="<f8").reshape(2, 3, 4), order=order)  # type: ignore[call-overload]
    encoded = BytesCodec(endian="little").encode(data)
    assert np.shares_memory(encoded, data)
    assert bytes(encoded) == data.tobytes(order="A")


def test_no_swap_decode_is_a_view_of_the_buffer() -> None:
    buf = np.arange(100, dtype="<i2").view(np.uint8)
    decoded = BytesCodec(endian="little", dtype="<i2").decode(buf)
    assert np.shares_memory(decoded, buf)
    big = BytesCodec(endian="big", dtype=">i2").decode(buf)
    assert np.shares_memory(big, buf)


def test_single_byte_types_are_never_copied() -> None:
    for name in ("bool", "uint8", "null_terminated_bytes", "r*"):
        data = sample_array(name, (9,))
        assert np.shares_memory(BytesCodec(endian="big").encode(data), data), name


def test_swapping_decode_into_out_allocates_no_temporary() -> None:
    data = np.arange(1 << 20, dtype="<f8")  # 8 MiB
    codec = BytesCodec(endian="big", dtype="<f8")
    encoded = bytes(codec.encode(data))
    out = np.empty_like(data)
    tracemalloc.start()
    try:
        codec.decode(encoded, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"decode into out allocated {peak} bytes"
    assert np.array_equal(out, data)


def test_swapping_encode_allocates_only_its_output() -> None:
    data = np.arange(1 << 20, dtype="<i4")  # 4 MiB
    codec = BytesCodec(endian="big", dtype="<i4")
    tracemalloc.start()
    try:
        encoded = codec.encode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < data.nbytes + (1 << 20), (
        f"encode allocated {peak} bytes for a {data.nbytes}-byte output"
    )
    assert bytes(encoded) == data.astype(">i4").tobytes()


def test_complex_swaps_each_component() -> None:
    encoded = BytesCodec(endian="big").encode(np.array([1 + 2j], dtype="<c8"))
    assert bytes(encoded).hex() == "3f800000" + "40000000"


def test_utf32_swaps_each_code_unit() -> None:
    encoded = BytesCodec(endian="big").encode(np.array(["h\u00e9"], dtype="<U2"))
    assert bytes(encoded).hex() == "00000068" + "000000e9"


def test_struct_swaps_each_field_and_leaves_bytes_alone() -> None:
    data = np.array([(0x0102, b"ab", 0x03040506)], dtype=[("a", "<u2"), ("s", "S2"), ("b", "<u4")])
    assert bytes(BytesCodec(endian="big").encode(data)).hex() == "0102" + "6162" + "03040506"


@pytest.mark.parametrize(
    ("name", "mask"), [("int2", 0x03), ("int4", 0x0F), ("uint2", 0x03), ("uint4", 0x0F)]
)
def test_sub_byte_integers_ignore_the_upper_bits(name: str, mask: int) -> None:
    pytest.importorskip("ml_dtypes")
    clean = sample_array(name, (5,))
    noisy = bytes(b | (~mask & 0xFF & (0xA5 + i)) for i, b in enumerate(clean.view(np.uint8)))
    codec = BytesCodec(dtype=name)
    decoded = codec.decode(noisy)
    assert decoded.view(np.uint8).tolist() == clean.view(np.uint8).tolist()
    assert decoded.astype(np.int8).tolist() == clean.astype(np.int8).tolist()
    out = np.empty(5, clean.dtype)
    codec.decode(noisy, out=out)
    assert out.view(np.uint8).tolist() == clean.view(np.uint8).tolist()


def test_sub_byte_integer_fields_of_structs_ignore_the_upper_bits() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype([("a", "<i2"), ("b", ml_dtypes.int4), ("c", ml_dtypes.uint2)])
    clean = np.zeros(3, dtype)
    clean["a"], clean["b"], clean["c"] = [-2, 5, 300], [-8, 7, 3], [0, 3, 1]
    noisy = bytearray(clean.astype(dtype.newbyteorder(">")).tobytes())
    for element in range(3):
        noisy[element * 4 + 2] |= 0xA0  # b's upper 4 bits
        noisy[element * 4 + 3] |= 0x5C  # c's upper 6 bits
    codec = BytesCodec(endian="big", dtype=dtype)
    assert codec.decode(bytes(noisy)).tobytes() == clean.tobytes()
    out = np.empty(3, dtype)
    codec.decode(bytes(noisy), out=out)
    assert out.tobytes() == clean.tobytes()
