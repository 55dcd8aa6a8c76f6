"""The committed encoded vectors: any change of output fails here.

In the manner of numcodecs' ``check_backwards_compatibility``, but the files are
never created by the test run: a missing file fails (``python
tests/make_fixtures.py`` writes new ones, checked against the numpy oracle).
"""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
from support.make_fixtures import FIXTURES, fixture_path
from support.stack import needs_ml_dtypes

from numcodecs_bytes import DATA_TYPES
from numcodecs_bytes.data_types import ML_DTYPES_NAMES

# Every data type with a committed fixture: ml_dtypes' types exist only with ml_dtypes installed.
NAMES = [name for name in DATA_TYPES if name not in ML_DTYPES_NAMES] + list(ML_DTYPES_NAMES)


@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=needs_ml_dtypes) if name in ML_DTYPES_NAMES else name
        for name in NAMES
    ],
)
def test_encoded_vectors_are_unchanged(name: str, endian: str) -> None:
    path = fixture_path(name, endian)
    assert path.exists(), f"no fixture for {name} {endian}: run python tests/make_fixtures.py"
    record = json.loads(path.read_text())
    codec = numcodecs.get_codec(record["config"])
    assert codec.get_config() == record["config"]
    values = np.frombuffer(bytes.fromhex(record["values_hex"]), dtype=codec.dtype)
    assert len(values) == record["count"]
    encoded = bytes.fromhex(record["encoded_hex"])

    assert bytes(codec.encode(values)) == encoded
    assert codec.decode(encoded).tobytes() == values.tobytes()
    out = np.empty_like(values)
    codec.decode(encoded, out=out)
    assert out.tobytes() == values.tobytes()
    legacy = numcodecs.get_codec({**record["config"], "id": "endian"})
    assert bytes(legacy.encode(values)) == encoded


def test_no_stray_fixture_files() -> None:
    expected = {fixture_path(name, endian) for name in NAMES for endian in ("little", "big")}
    assert set(FIXTURES.glob("*.json")) == expected
