"""The rename of the draft's ``endian`` codec to ``bytes``: codec configs and metadata documents in, out.

Pure: nothing here reads or writes a store. A codec is ours by its ``id`` in
v2 metadata and by its ``name`` in v3 metadata (``{"id": "zlib", "name":
"endian"}`` is a zlib codec). In a file's text only the name's own string
token is replaced, located from the text's structure in one pass.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from ..names import CODEC_ID, LEGACY_CODEC_ID, named, v2_id, v3_name

__all__ = [
    "LEGACY_NAME",
    "METADATA_FILES",
    "RENAME",
    "Change",
    "is_legacy_config",
    "legacy_codecs",
    "migrate_config",
    "migrate_metadata",
    "migrated_file",
    "rewrite_text",
]

LEGACY_NAME = LEGACY_CODEC_ID
"""The codec's name in the draft spec, as v2 ``id`` and as v3 ``name``."""

_NAME = CODEC_ID
METADATA_FILES = (".zarray", ".zmetadata", "zarr.json")
"""The metadata files that can name a codec (``.zgroup`` and ``.zattrs`` cannot)."""
RENAME = f"{LEGACY_NAME!r} -> {_NAME!r}"
"""How a change is spelled in reports: ``'endian' -> 'bytes'``."""


def is_legacy_config(config: Any) -> bool:
    """Whether ``config`` is a legacy ``endian`` codec entry.

    A v2 codec (numcodecs) is named by its ``id`` alone, a v3 codec by its
    ``name`` (or is the bare name): ``{"id": "zlib", "name": "endian"}`` is a
    zlib codec with a parameter called ``name``, not ours.
    """
    return named(config, LEGACY_NAME)


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
    >>> migrate_config({"id": "zlib", "level": 1, "name": "endian"})
    {'id': 'zlib', 'level': 1, 'name': 'endian'}
    """
    migrated = copy.deepcopy(config)
    if not is_legacy_config(config):
        return migrated
    if isinstance(migrated, str):
        return _NAME
    migrated["id" if "id" in migrated else "name"] = _NAME
    return migrated


# -- one metadata document ------------------------------------------------------------------------------

JsonPath = tuple[str | int, ...]  # a JSON path: object keys and array indices


@dataclass(frozen=True)
class Change:
    """One codec renamed: where in which file."""

    file: str
    location: str  # a JSON path, e.g. "codecs[0].configuration.codecs[1]"

    def __str__(self) -> str:
        return f"{self.file}: {self.location}: {RENAME}"


def migrate_metadata(document: Any, filename: str) -> tuple[Any, list[str]]:
    """Migrate the codecs of one parsed metadata file.

    Parameters
    ----------
    document : object
        The parsed JSON of a ``.zarray``, ``.zmetadata`` or ``zarr.json``.
    filename : str
        Which of these it is.

    Returns
    -------
    (object, list of str)
        The migrated document (a new object; the input is not mutated) and the
        JSON paths of the codecs that were renamed.
    """
    found = legacy_codecs(document, filename)
    return _renamed(document, found), [location for location, _ in found]


def legacy_codecs(document: Any, filename: str) -> list[tuple[str, JsonPath]]:
    """The legacy codecs of one parsed metadata file: (readable location, JSON path of the name string)."""
    found: list[tuple[str, JsonPath]] = []
    if filename == ".zarray":
        _zarray(document, (), "", found)
    elif filename == ".zmetadata":
        metadata = document.get("metadata") if isinstance(document, dict) else None
        for key, node in metadata.items() if isinstance(metadata, dict) else ():
            if isinstance(key, str) and key.endswith(".zarray"):
                _zarray(node, ("metadata", key), f"metadata[{key!r}].", found)
    elif filename == "zarr.json":
        _v3_node(document, (), "", found)
    return found


def _zarray(node: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    if not isinstance(node, dict):
        return
    compressor = node.get("compressor")
    if v2_id(compressor) == LEGACY_NAME:
        found.append((f"{where}compressor", (*path, "compressor", "id")))
    filters = node.get("filters")
    for index, codec in enumerate(filters if isinstance(filters, list) else ()):
        if v2_id(codec) == LEGACY_NAME:
            found.append((f"{where}filters[{index}]", (*path, "filters", index, "id")))


def _v3_node(node: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    if not isinstance(node, dict):
        return
    _v3_codecs(node.get("codecs"), (*path, "codecs"), f"{where}codecs", found)
    consolidated = node.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        for key, child in consolidated["metadata"].items():
            child_path = (*path, "consolidated_metadata", "metadata", key)
            _v3_node(child, child_path, f"{where}consolidated_metadata.metadata[{key!r}].", found)


def _v3_codecs(codecs: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    """Legacy codecs in a v3 codec list, and in the codec lists nested in its codecs (sharding)."""
    if not isinstance(codecs, list):
        return
    for index, codec in enumerate(codecs):
        if v3_name(codec) == LEGACY_NAME:  # the name is the entry itself in the short form
            found.append((f"{where}[{index}]", (*path, index) if isinstance(codec, str) else (*path, index, "name")))
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if isinstance(configuration, dict):
            for nested in ("codecs", "index_codecs"):
                nested_path = (*path, index, "configuration", nested)
                _v3_codecs(configuration.get(nested), nested_path, f"{where}[{index}].configuration.{nested}", found)


def _renamed(document: Any, found: list[tuple[str, JsonPath]]) -> Any:
    """A copy of ``document`` with the name at each path of ``found`` made ``bytes``."""
    renamed = copy.deepcopy(document)
    for _, path in found:
        node = renamed
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = _NAME
    return renamed


# One JSON token: a string, a structural character, a scalar, or white space.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+|\s+', re.S)


def _name_token_spans(text: str, paths: set[JsonPath]) -> dict[JsonPath, tuple[int, int]]:
    """Where in ``text`` the string values at ``paths`` stand: one pass over the tokens, no recursion.

    The text must be valid JSON (it was parsed before). Of repeated keys the
    last one counts, as for ``json.loads``.
    """
    spans: dict[JsonPath, tuple[int, int]] = {}
    frames: list[list[Any]] = []  # per open container: [is_object, current key or index, expecting a key]
    for token in _TOKEN.finditer(text):
        char = token.group(0)[0]
        if char in " \t\r\n":
            continue
        top = frames[-1] if frames else None
        if char in "{[":
            frames.append([char == "{", None if char == "{" else 0, char == "{"])
        elif char in "}]":
            frames.pop()
        elif char == ":":
            assert top is not None
            top[2] = False
        elif char == ",":
            assert top is not None
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
        elif top is not None and top[0] and top[2]:  # an object key
            raw = token.group(0)
            top[1] = json.loads(raw) if "\\" in raw else raw[1:-1]
        elif char == '"':
            path = tuple(frame[1] for frame in frames)
            if path in paths:
                spans[path] = token.span()
    return spans


def rewrite_text(text: str, document: Any, filename: str) -> str:
    """The file's text with only the legacy codec names replaced by ``"bytes"``.

    The tokens are located from the structure of the text itself, in one pass:
    key order, indentation, number spellings, escapes and line endings
    elsewhere stay exactly as they were; a name written with escapes
    (``"\\u0065ndian"``) is written plainly.

    Raises
    ------
    ValueError
        If the result would not parse to the migrated document (never expected).
    """
    return _rewrite(text, document, legacy_codecs(document, filename))


def _rewrite(text: str, document: Any, found: list[tuple[str, JsonPath]]) -> str:
    """`rewrite_text` for the legacy codecs already ``found`` in ``document``."""
    paths = {path for _, path in found}
    pieces, last = [], 0
    for start, end in sorted(_name_token_spans(text, paths).values()):
        pieces += [text[last:start], f'"{_NAME}"']
        last = end
    result = "".join(pieces) + text[last:]
    if json.loads(result) != _renamed(document, found):
        raise ValueError("the renamed text does not parse to the migrated document")
    return result


def migrated_file(name: str, data: bytes) -> tuple[Any, list[tuple[str, JsonPath]], bytes]:
    """One metadata file's parsed document, its legacy codecs, and its bytes with them renamed (``data`` itself
    where there is none). A UTF-8 byte order mark is kept (zarr reads it).

    Raises what parsing raises: UnicodeDecodeError, json.JSONDecodeError, RecursionError.
    """
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
    text = data[len(bom) :].decode("utf-8")
    document = json.loads(text)
    found = legacy_codecs(document, name)
    renamed = bom + _rewrite(text, document, found).encode("utf-8") if found else data
    return document, found, renamed
