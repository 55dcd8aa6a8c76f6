"""The Zarr v3 ``bytes`` codec for numcodecs.

Each element of an array in little or big endian, in order. Registered with
numcodecs under the id ``bytes``, and under ``endian``, the name an earlier
draft of the spec gave it: configs written then load as ``bytes`` codecs.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from numcodecs.registry import register_codec

from . import _threads
from ._threads import get_nthreads, set_nthreads
from .codec import BytesCodec, Endian
from .data_types import DATA_TYPES, DataType, Swap
from .names import LEGACY_CODEC_ID

__all__ = [
    "DATA_TYPES",
    "BytesCodec",
    "DataType",
    "Endian",
    "Swap",
    "get_nthreads",
    "migrate_config",
    "set_nthreads",
    "use_threads",
]

__version__ = "0.1.0"

use_threads: bool | None = None
"""From which threads large copies may be split over threads: None (the default)
only from the main thread, as numcodecs' Blosc (zarr-python and dask call codecs
from other threads, in parallel already); True from any thread; False never."""


class _Package(types.ModuleType):
    """This package as a module: ``use_threads`` set on it goes where the thread rule reads it
    (`_threads.use_threads`), checked first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "use_threads":
            if not (value is None or isinstance(value, bool)):
                raise TypeError(f"use_threads must be None, True or False, got {value!r}")
            _threads.use_threads = value
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
register_codec(BytesCodec)
register_codec(BytesCodec, codec_id=LEGACY_CODEC_ID)


def __getattr__(name: str) -> Any:
    # The store tools load when used, not with every import of the codec (each dask worker imports
    # it).
    if name == "migrate_config":
        from .migrate import migrate_config

        return migrate_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
