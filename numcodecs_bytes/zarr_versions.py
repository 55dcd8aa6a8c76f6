"""What differs between the zarr-python releases this package supports: the one place that knows it.

Each fact is the first release that has it, with the upstream change. The
installed version is read from the package's metadata: this module imports
no zarr (the store tools and the numcodecs codec ask it without zarr).

>>> version_numbers("3.1.6"), version_numbers("3.4.0rc1")
((3, 1, 6), (3, 4, 0))
"""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError, version

__all__ = [
    "FILTERS_GET_NATIVE_ARRAYS",
    "REFUSES_MISSING_ENDIAN",
    "STRUCT_FIELDS_BY_ENDIAN",
    "installed_zarr",
    "release",
    "version_numbers",
    "zarr_has",
]

STRUCT_FIELDS_BY_ENDIAN = (3, 3)
"""zarr-python 3.3 (PR #4142) orders each struct field by the bytes codec's ``endian``; before, it
wrote ``{"name": "bytes"}`` and read and wrote the fields in native order."""
REFUSES_MISSING_ENDIAN = (3, 3)
"""zarr-python 3.3 refuses a multi-byte type whose bytes codec has no ``endian``; before, its
``from_dict`` filled in the machine's byte order without a word."""
FILTERS_GET_NATIVE_ARRAYS = (3, 4)
"""zarr-python 3.4 hands the array-to-array codecs before the bytes codec native arrays on decode;
before, a view in the stored byte order, which numcodecs' Delta or Quantize read as native."""


def version_numbers(text: str) -> tuple[int, ...]:
    """The leading numbers of a version string (at most three): ``"3.4.0rc1"`` is ``(3, 4, 0)``."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@cache
def installed_zarr() -> tuple[int, ...] | None:
    """The installed zarr-python's version as numbers, None where it is not installed."""
    try:
        return version_numbers(version("zarr"))
    except PackageNotFoundError:
        return None


def zarr_has(fact: tuple[int, ...]) -> bool:
    """Whether the installed zarr-python has ``fact`` (one of this module's constants)."""
    installed = installed_zarr()
    return installed is not None and installed >= fact


def release(fact: tuple[int, ...]) -> str:
    """A fact's first release, as people write it: ``"3.3"``."""
    return ".".join(map(str, fact))
