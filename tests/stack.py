"""The installed stack: upstream versions and optional packages some tests depend on.

Behaviour that differs by an upstream version is named here once, with the
upstream change, and the tests state each version's behaviour.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

import pytest


def version_of(distribution: str) -> tuple[int, ...] | None:
    """The installed version of ``distribution`` as numbers, or None if it is not installed."""
    try:
        text = version(distribution)
    except PackageNotFoundError:
        return None
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


ZARR = version_of("zarr")
NUMPY = version_of("numpy") or (0,)

ZARR_REFUSES_MISSING_ENDIAN = ZARR is not None and ZARR >= (3, 3)
"""zarr-python 3.3: a multi-byte type whose bytes codec has no ``endian`` is refused when read.

Before 3.3, zarr-python's ``BytesCodec.from_dict`` filled a missing ``endian``
with ``sys.byteorder``: such metadata (which the spec does not allow) opened
as the machine's byte order, without a warning.
"""

ZARR_SWAPS_STRUCT_FIELDS = ZARR is not None and ZARR >= (3, 3)
"""zarr-python PR #4142 (released in 3.3): struct fields are written in the configured byte order.

Before 3.3, zarr-python dropped ``endian`` for structured data: it wrote
``{"name": "bytes"}`` and the fields in native (little endian) order.
"""

ZARR_DROPS_AXES_OF_PARTIAL_READS = ZARR is not None and ZARR >= (3, 1, 6)
"""zarr-python 3.1.6 squeezes the axes an integer index drops (orthogonal selections) on the
partial-read path too; before, reading such a selection through a codec with partial decoding
fails inside zarr's pipeline ("could not broadcast input array from shape (5,1,7)")."""

HAS_STRING_DTYPE = NUMPY >= (2,)
"""numpy 2.0 added the variable-length ``StringDType`` ('T')."""


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_ml_dtypes = pytest.mark.skipif(
    not has_module("ml_dtypes"), reason="needs ml_dtypes (the ml_dtypes extra): its data types exist only with it"
)


def benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py``, loaded as a module (the benchmarks are scripts, not a package)."""
    folder = Path(__file__).parents[1] / "benchmarks"
    if str(folder) not in sys.path:  # the scripts import their helpers (machine, interleave) as a script would
        sys.path.append(str(folder))
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
