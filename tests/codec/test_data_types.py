"""The one table of data types (numcodecs_bytes.data_types): names, spellings, what endian
orders."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from numcodecs_bytes import DATA_TYPES, BytesCodec


@pytest.mark.parametrize(("spec", "message"), [("r12", "got 12"), ("r0", "got 0"), ("r7", "got 7")])
def test_raw_bits_must_be_a_multiple_of_eight(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"positive multiple of 8 up to 17179869176, {message}"):
        BytesCodec(dtype=spec)


@pytest.mark.parametrize("spec", ["numpy.datetime64", "fixed_length_utf32", "struct", "U", "S"])
def test_types_that_need_a_size_or_unit(spec: str) -> None:
    with pytest.raises(ValueError, match=r"size or unit|zero-sized"):
        BytesCodec(endian="little", dtype=spec)


def test_zarr_names_and_numpy_spellings_agree() -> None:
    for name, row in DATA_TYPES.items():
        if not row.family:
            assert BytesCodec(endian="little", dtype=name).dtype == row.dtype
    assert BytesCodec(dtype="r16").dtype == np.dtype("V2")
    assert BytesCodec(endian="big", dtype=np.int16).dtype == np.dtype("<i2")


@pytest.mark.parametrize("name", [n for n in DATA_TYPES if not DATA_TYPES[n].family])
def test_every_named_type_has_a_json_config(name: str) -> None:
    codec = BytesCodec(endian="big", dtype=name)
    assert BytesCodec.from_config(json.loads(json.dumps(codec.get_config()))).dtype == codec.dtype


@pytest.mark.parametrize(
    ("data_type", "expected"),
    [
        (
            {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}},
            "<M8[ns]",
        ),
        (
            {"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": 10}},
            "<m8[10s]",
        ),
        ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 12}}, "<U3"),
        ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}}, "S5"),
        ({"name": "raw_bytes", "configuration": {"length_bytes": 3}}, "V3"),
        ({"name": "r*", "configuration": {"length_bytes": 2}}, "V2"),
        ({"name": "int16"}, "<i2"),
        (
            {
                "name": "structured",
                "configuration": {
                    "fields": [
                        ["a", "uint16"],
                        [
                            "s",
                            {"name": "null_terminated_bytes", "configuration": {"length_bytes": 2}},
                        ],
                    ]
                },
            },
            [("a", "<u2"), ("s", "S2")],
        ),
        (  # zarr-python 3.3+ writes each field as an object
            {
                "name": "struct",
                "configuration": {
                    "fields": [
                        {"name": "a", "data_type": "uint16"},
                        {
                            "name": "s",
                            "data_type": {
                                "name": "null_terminated_bytes",
                                "configuration": {"length_bytes": 2},
                            },
                        },
                    ]
                },
            },
            [("a", "<u2"), ("s", "S2")],
        ),
    ],
)
def test_dtype_accepts_zarr_v3_data_type_objects(data_type: dict[str, Any], expected: Any) -> None:
    assert BytesCodec(endian="big", dtype=data_type).dtype == np.dtype(expected)


@pytest.mark.parametrize(
    ("data_type", "message"),
    [
        ({"name": "float128"}, "unknown Zarr v3 data type 'float128'"),
        (
            {"name": "fixed_length_utf32"},
            "invalid configuration for Zarr v3 data type 'fixed_length_utf32'",
        ),
        (
            {"name": "numpy.datetime64", "configuration": {"scale_factor": 1}},
            "invalid configuration",
        ),
    ],
)
def test_bad_zarr_v3_data_type_objects(data_type: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BytesCodec(endian="big", dtype=data_type)


@pytest.mark.parametrize("alias", ["raw_bytes", "structured"])
def test_zarr_python_names_of_families_need_a_size_too(alias: str) -> None:
    with pytest.raises(ValueError, match="needs a size or unit"):
        BytesCodec(endian="big", dtype=alias)
