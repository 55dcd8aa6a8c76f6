"""The pieces of zarr-python the store tools use, behind one shim (imported when first asked for).

Some are private API (``zarr.metadata.migrate_v3``'s mapping); the tests pin
them on every zarr version the project supports, and a zarr without them is
a clear ImportError that says what to install.
"""

from __future__ import annotations

from functools import cache
from typing import Any

__all__ = ["zarr_api"]


@cache
def zarr_api() -> Any:
    """zarr-python's v2-to-v3 pieces (imported once), or an ImportError that says what is
    missing."""
    try:
        import zarr
        from zarr.api.asynchronous import open_array as open_array_in_loop
        from zarr.core.buffer.core import default_buffer_prototype
        from zarr.core.common import concurrent_map as at_once
        from zarr.core.dtype import get_data_type_from_native_dtype
        from zarr.core.group import GroupMetadata
        from zarr.core.metadata.v2 import ArrayV2Metadata
        from zarr.core.metadata.v3 import ArrayV3Metadata
        from zarr.core.sync import sync as run_in_loop
        from zarr.metadata.migrate_v3 import (
            _convert_array_metadata,
            _convert_compressor,
            _convert_filters,
        )
    except ImportError as exc:
        raise ImportError(
            f"to-v3 needs zarr-python 3.1.3 or later with its v2-to-v3 converter "
            f"(pip install 'numcodecs-bytes[zarr]'): {exc}"
        ) from None

    class Zarr:
        version = zarr.__version__
        prototype = default_buffer_prototype()
        group = GroupMetadata
        array_v2 = ArrayV2Metadata
        array_v3 = ArrayV3Metadata
        convert_array = staticmethod(_convert_array_metadata)
        convert_filters = staticmethod(_convert_filters)
        convert_compressor = staticmethod(_convert_compressor)
        data_type = staticmethod(get_data_type_from_native_dtype)
        consolidate = staticmethod(zarr.consolidate_metadata)
        memory_store = zarr.storage.MemoryStore
        open_group = staticmethod(zarr.open_group)
        open_array_async = staticmethod(open_array_in_loop)
        sync = staticmethod(run_in_loop)
        concurrent_map = staticmethod(at_once)
        config = zarr.config

    return Zarr
