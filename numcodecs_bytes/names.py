"""The codec's names, and how metadata names a codec: the one place that knows them.

A codec in Zarr v2 metadata (a numcodecs config) is named by its ``id``; in
Zarr v3 metadata by its ``name``, or it is that name alone (the short form).
So ``{"id": "zlib", "name": "endian"}`` is a zlib codec with a parameter
called ``name``, wherever it appears. Both codecs, the migration and the v2
to v3 conversion read and write codec entries through these functions.
"""

from __future__ import annotations

from typing import Any

from .swap import Endian

__all__ = [
    "CODEC_ID",
    "CODEC_IDS",
    "LEGACY_CODEC_ID",
    "named",
    "parse_v3_entry",
    "v2_id",
    "v3_entry",
    "v3_name",
]

CODEC_ID = "bytes"
"""The codec's name in Zarr v3 and its id in numcodecs."""
LEGACY_CODEC_ID = "endian"
"""The name an earlier draft of the spec gave the same codec; stores and configs written then use
it."""
CODEC_IDS = (CODEC_ID, LEGACY_CODEC_ID)


def v2_id(config: Any) -> Any:
    """The ``id`` of a Zarr v2 (numcodecs) codec config; None for anything else."""
    return config.get("id") if isinstance(config, dict) else None


def v3_name(entry: Any) -> Any:
    """The ``name`` of a Zarr v3 codec entry, or the entry itself in the short form; None for
    anything else."""
    if isinstance(entry, str):
        return entry
    return entry.get("name") if isinstance(entry, dict) else None


def named(config: Any, name: str) -> bool:
    """Whether a codec config of either form is the codec ``name``: by its ``id`` if it has one,
    else as in v3.

    >>> named({"id": "zlib", "name": "endian"}, "endian"), named({"name": "endian"}, "endian")
    (False, True)
    """
    found = v2_id(config) if isinstance(config, dict) and "id" in config else v3_name(config)
    return isinstance(found, str) and found == name


def parse_v3_entry(metadata: Any) -> tuple[str, Any]:
    """The name and the endian (None if absent; not yet validated) of a Zarr v3 ``bytes`` codec
    entry.

    Accepts the short form ``"bytes"`` and objects with ``name``,
    ``configuration`` (only the key ``endian``) and ``must_understand``; the
    legacy name ``endian`` in each form.

    Raises
    ------
    ValueError
        For another codec name, unknown keys, or a non-boolean ``must_understand``.
    TypeError
        For an entry or configuration that is neither what the spec allows.
    """
    if isinstance(metadata, str):
        metadata = {"name": metadata}
    if not isinstance(metadata, dict):
        raise TypeError(f"a Zarr v3 codec entry is a name or an object, got {metadata!r}")
    name = metadata.get("name")
    if not isinstance(name, str) or name not in CODEC_IDS:
        raise ValueError(f"not a bytes codec: name {name!r} (expected 'bytes' or legacy 'endian')")
    unknown = sorted(set(metadata) - {"name", "configuration", "must_understand"})
    if unknown:
        raise ValueError(f"unknown keys {unknown} in bytes codec metadata")
    if not isinstance(metadata.get("must_understand", True), bool):
        raise TypeError(
            f"must_understand must be true or false, got {metadata['must_understand']!r}"
        )
    configuration = metadata.get("configuration", {})
    if not isinstance(configuration, dict):
        raise TypeError(f"bytes codec configuration must be an object, got {configuration!r}")
    unknown = sorted(set(configuration) - {"endian"})
    if unknown:
        raise ValueError(f"unknown bytes codec configuration keys {unknown}; allowed: endian")
    return name, configuration.get("endian")


def v3_entry(name: str, endian: Endian | None) -> dict[str, Any]:
    """The canonical Zarr v3 codec entry: no ``configuration`` where there is no endian to state."""
    if endian is None:
        return {"name": name}
    return {"name": name, "configuration": {"endian": endian}}
