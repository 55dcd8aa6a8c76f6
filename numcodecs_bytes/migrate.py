"""Upgrade configs written when the spec draft called this codec ``endian``."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["LEGACY_NAME", "is_legacy_config", "migrate_config"]

LEGACY_NAME = "endian"
"""The codec's name in the draft spec, as v2 ``id`` and as v3 ``name``."""

_NAME = "bytes"


def is_legacy_config(config: Any) -> bool:
    """Whether ``config`` is a legacy ``endian`` codec entry (v2 or v3 form)."""
    if isinstance(config, str):
        return config == LEGACY_NAME
    return isinstance(config, dict) and (config.get("id") == LEGACY_NAME or config.get("name") == LEGACY_NAME)


def migrate_config(config: Any) -> Any:
    """Return a copy of a codec config, with a legacy ``endian`` codec made ``bytes``.

    The v2 form ``{"id": "endian", ...}``, the v3 form ``{"name": "endian",
    ...}`` and the v3 short form ``"endian"`` become ``bytes`` with the same
    meaning (the two codecs are the same; only the name changed). Any other
    config comes back unchanged. The input is never mutated.

    Examples
    --------
    >>> from numcodecs_bytes import migrate_config
    >>> migrate_config({"id": "endian", "endian": "big", "dtype": "<i4"})
    {'id': 'bytes', 'endian': 'big', 'dtype': '<i4'}
    >>> migrate_config({"name": "endian", "configuration": {"endian": "little"}})
    {'name': 'bytes', 'configuration': {'endian': 'little'}}
    >>> migrate_config({"id": "zlib", "level": 1})
    {'id': 'zlib', 'level': 1}
    """
    migrated = copy.deepcopy(config)
    if not is_legacy_config(config):
        return migrated
    if isinstance(migrated, str):
        return _NAME
    key = "id" if migrated.get("id") == LEGACY_NAME else "name"
    migrated[key] = _NAME
    return migrated
