"""``numcodecs-bytes demo`` and ``numcodecs-bytes dtypes``: the codec on sample data, and the data
type table."""

from __future__ import annotations

import numcodecs
import numpy as np

from .. import BytesCodec
from ..data_types import DATA_TYPES, ML_DTYPES_NAMES, example_dtype

__all__ = ["data_type_table", "demo", "dtypes"]

# Built-in sample data for the demo: one value per data type that shows its byte layout.
_DEMO_SAMPLES: tuple[tuple[str, object], ...] = (
    ("int32", [1, -2]),
    ("uint16", [0x0102]),
    ("float64", [1.5]),
    ("complex64", [1 - 2j]),
    ("<U2", ["hi"]),
    ("bool", [True, False]),
)


def data_type_table() -> str:
    """The `DATA_TYPES` table as aligned text; the ml_dtypes types as needing the extra where it is
    missing."""
    rows = [("data type", "numpy, e.g.", "endian orders each")]
    rows += [(row.name, example_dtype(row), row.swap.value) for row in DATA_TYPES.values()]
    missing = [name for name in ML_DTYPES_NAMES if name not in DATA_TYPES]
    rows += [(name, "-", "needs the ml_dtypes extra") for name in missing]
    widths = [max(len(row[column]) for row in rows) for column in (0, 1)]
    lines = [
        f"{name:<{widths[0]}}  {example:<{widths[1]}}  {orders}" for name, example, orders in rows
    ]
    if missing:
        lines.append(
            f"\n{len(missing)} data types need ml_dtypes: pip install 'numcodecs-bytes[ml_dtypes]'"
        )
    return "\n".join(lines)


def demo() -> int:
    """Show both byte orders of sample data, resolve both ids, round-trip."""
    print("Zarr v3 bytes codec: each element in little or big endian\n")
    for dtype, values in _DEMO_SAMPLES:
        array = np.array(values, dtype=dtype)
        for endian in ("little", "big"):
            codec = numcodecs.get_codec({"id": "bytes", "endian": endian, "dtype": array.dtype.str})
            encoded = codec.encode(array)
            assert np.array_equal(codec.decode(encoded), array), "round trip failed"
            print(f"{dtype:<10} {endian:<7} {array!s:<22} -> {bytes(encoded).hex(' ')}")
    legacy = numcodecs.get_codec({"id": "endian", "endian": "big", "dtype": "<i4"})
    print(f"\nlegacy id 'endian' resolves to {legacy!r}")
    same = legacy == BytesCodec(endian="big", dtype="<i4")
    print(f"its config is {legacy.get_config()}  (equal to the bytes codec: {same})")
    print("\n" + data_type_table())
    return 0


def dtypes() -> int:
    """Print the data type table."""
    print(data_type_table())
    return 0
