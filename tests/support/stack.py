"""The installed stack: upstream versions and optional packages some tests depend on.

Behaviour that differs by an upstream version is named here once, with the
upstream change, and the tests state each version's behaviour.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

import pytest

from numcodecs_bytes import zarr_versions
from numcodecs_bytes.zarr_versions import version_numbers


def version_of(distribution: str) -> tuple[int, ...] | None:
    """The installed version of ``distribution`` as numbers, or None if it is not installed."""
    try:
        return version_numbers(version(distribution))
    except PackageNotFoundError:
        return None


ZARR = zarr_versions.installed_zarr()
NUMPY = version_of("numpy") or (0,)

# The package's own facts about zarr releases (numcodecs_bytes.zarr_versions), as the tests ask
# them.
ZARR_REFUSES_MISSING_ENDIAN = zarr_versions.zarr_has(zarr_versions.REFUSES_MISSING_ENDIAN)
ZARR_SWAPS_STRUCT_FIELDS = zarr_versions.zarr_has(zarr_versions.STRUCT_FIELDS_BY_ENDIAN)
ZARR_HANDS_FILTERS_NATIVE_ARRAYS = zarr_versions.zarr_has(zarr_versions.FILTERS_GET_NATIVE_ARRAYS)

ZARR_DROPS_AXES_OF_PARTIAL_READS = ZARR is not None and ZARR >= (3, 1, 6)
"""zarr-python 3.1.6 squeezes the axes an integer index drops (orthogonal selections) on the
partial-read path too; before, reading such a selection through a codec with partial decoding
fails inside zarr's pipeline ("could not broadcast input array from shape (5,1,7)")."""

ZARR_READS_WHOLE_SHARDS_IN_BULK = ZARR is not None and ZARR >= (3, 4)
"""zarr-python 3.4 decodes a whole uncompressed shard in one piece where the inner codec is its
``BytesCodec`` (``ShardingCodec._decode_full_shard_bulk_if_uncompressed``); before, every inner
chunk goes through the codec."""

ZARR_HAS_FUSED_PIPELINE = ZARR is not None and ZARR >= (3, 3)
"""zarr-python 3.3 added the opt-in ``FusedCodecPipeline``, which calls codecs synchronously."""

HAS_STRING_DTYPE = NUMPY >= (2,)
"""numpy 2.0 added the variable-length ``StringDType`` ('T')."""


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_ml_dtypes = pytest.mark.skipif(
    not has_module("ml_dtypes"),
    reason="needs ml_dtypes (the ml_dtypes extra): its data types exist only with it",
)


def benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py``, loaded as a module (the benchmarks are scripts, not a package)."""
    # on pytest's pythonpath: the scripts import their helpers
    folder = Path(__file__).parents[2] / "benchmarks"
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
