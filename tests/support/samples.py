"""One sample array per data type, with the values that show a layout's edges.

Shared by the round-trip tests, the oracle tests and the fixture generator.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from numcodecs_bytes import DATA_TYPES

__all__ = [
    "ML_DTYPES_NAMES",
    "NUMPY_NATIVE",
    "array_of",
    "expected_bytes",
    "sample",
    "sample_dtype",
]
from numcodecs_bytes.data_types import ML_DTYPES_NAMES

# For each family row: the representative numpy dtype the tests use.
FAMILY_DTYPES = {
    "numpy.datetime64": "<M8[ns]",
    "numpy.timedelta64": "<m8[s]",
    "r*": "V3",
    "null_terminated_bytes": "S5",
    "fixed_length_utf32": "<U3",
    "struct": [
        ("id", "<u2"),
        ("pos", "<f4", (2,)),
        ("tag", "S2"),
        ("inner", [("flag", "?"), ("z", "<c8")]),
    ],
}


def sample_dtype(name: str) -> np.dtype[Any]:
    row = DATA_TYPES[name]
    return np.dtype(FAMILY_DTYPES[name]) if row.family else row.dtype  # type: ignore[call-overload]


def sample(name: str) -> np.ndarray[Any, Any]:
    """A 1-d sample array of data type ``name``, little endian in memory."""
    dtype = sample_dtype(name)
    kind = dtype.kind
    if name in ML_DTYPES_NAMES:  # values in the type's range, through its float or int constructor
        floats: list[float] = [0, 1, -1, -2, 1] if name.startswith("int") else [0, 1, 2, 3, 1]
        if not name.startswith(("int", "uint")):
            floats = (
                [0.0, 1.0, -1.5, 0.25, 3.0, -0.5]
                if name != "float8_e8m0fnu"
                else [1.0, 2.0, 0.5, 1024.0]
            )
        return np.array(floats, dtype=np.float64).astype(dtype)
    if name == "bool":
        return np.array([True, False, True, True, False, False, True], dtype=dtype)
    if kind in "iu":
        info = np.iinfo(dtype)
        return np.array(
            [info.min, info.max, 0, 1, info.max // 3, info.min // 5 + 1, 0x1234 % (info.max + 1)],
            dtype=dtype,
        )
    if kind == "f":
        return np.array(
            [
                0.0,
                -0.0,
                1.5,
                -2.25,
                np.inf,
                -np.inf,
                np.nan,
                np.finfo(dtype).tiny,
                np.finfo(dtype).max,
            ],
            dtype=dtype,
        )
    if kind == "c":
        return np.array(
            [1 - 2j, complex(np.inf, -0.0), complex(np.nan, 3.5), 0j, -1.25e-3 + 7j], dtype=dtype
        )
    if kind in "Mm":
        values = np.array(
            [0, 1, -1, 1_600_000_000_123_456_789, np.iinfo(np.int64).min], dtype="<i8"
        )
        return values.view(dtype)  # the last one is NaT
    if kind == "U":
        return np.array(["", "a", "\u00e9t\u00e9", "\U0001f600x", "abc"], dtype=dtype)
    if kind == "S":
        return np.array([b"", b"a", b"abcde", b"\x00\x01", b"\xff"], dtype=dtype)
    if dtype.fields is not None:
        out = np.zeros(3, dtype=dtype)
        out["id"] = [1, 0x1234, 0xFFFF]
        out["pos"] = [[1.0, -2.0], [np.inf, 0.5], [3.25, -0.0]]
        out["tag"] = [b"ab", b"", b"z"]
        out["inner"]["flag"] = [True, False, True]
        out["inner"]["z"] = [1 + 2j, -3j, 0.5]
        return out
    if kind == "V" and name == "r*":
        return np.frombuffer(bytes(range(0, 60, 4)), dtype=dtype).copy()
    raise AssertionError(f"no sample for {name}")


def expected_bytes(data: np.ndarray[Any, Any], endian: str | None) -> bytes:
    """The oracle: numpy with an explicit byte order, in memory order (C for strided input)."""
    order: Literal["C", "F"] = (
        "F" if data.flags.f_contiguous and not data.flags.c_contiguous else "C"
    )
    if endian is None:
        return data.tobytes(order=order)
    char: Literal["<", ">"] = "<" if endian == "little" else ">"
    if data.dtype.names is None and data.dtype.name in ML_DTYPES_NAMES:
        # numpy has no byte order for ml_dtypes types: swap them as same-width unsigned integers
        units = data.view(f"u{data.dtype.itemsize}")
        return units.astype(units.dtype.newbyteorder(char)).tobytes(order=order)
    return data.astype(data.dtype.newbyteorder(char)).tobytes(order=order)


NUMPY_NATIVE = [name for name in DATA_TYPES if name not in ML_DTYPES_NAMES]
"""The data types numpy itself can put in either byte order: the numpy oracle covers these."""


def array_of(dtype: Any, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """An array of ``dtype`` and ``shape`` with varied values (for numpy dtypes: the zarr tests'
    arrays).

    Structs are those of fields ``id`` (u2), ``x`` (f4), ``tag`` (S2) and ``z`` (c8).
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    base = np.arange(count, dtype=np.int64) * 2_654_435_761 % 100_003 - 50_000
    data: np.ndarray[Any, Any]
    if dtype.fields is not None:
        data = np.zeros(count, dtype)
        data["id"], data["x"], data["tag"], data["z"] = base % 65_000, base / 7, b"ab", base + 1j
    elif dtype.kind == "b":
        data = base % 3 == 0
    elif dtype.kind in "iu":
        data = (base % min(int(np.iinfo(dtype).max), 1 << 62)).astype(dtype)
    elif dtype.kind in "fc":
        data = (base / 7).astype(dtype)
    elif dtype.kind in "Mm":
        data = base.astype("<i8").view(dtype)
    elif dtype.kind == "U":
        data = np.array([f"{v % 997:x}"[: dtype.itemsize // 4] for v in base], dtype)
    elif dtype.kind == "S":
        data = np.array([f"s{v % 9973}".encode()[: dtype.itemsize] for v in base], dtype)
    else:
        data = np.frombuffer(np.abs(base).astype("<u8").tobytes()[: count * dtype.itemsize], dtype)
    return data.reshape(shape)


def sample_array(name: str, shape: tuple[int, ...], order: str = "C") -> np.ndarray[Any, Any]:
    """A sample array of data type ``name`` with the given shape and memory order."""
    base = sample(name)
    size = int(np.prod(shape))
    flat = base[np.arange(size) % len(base)] if size else base[:0]
    result: np.ndarray[Any, Any] = np.asarray(flat.reshape(shape, order=order), order=order)  # type: ignore[call-overload]
    return result
