"""The draft's legacy in metadata, mended: the codec name ``endian`` renamed to ``bytes``, and a
missing ``endian`` added to the v3 ``bytes`` codecs of multi-byte data types. Codec configs and
metadata documents in, out.

Pure: nothing here reads or writes a store. A codec is ours by its ``id`` in
v2 metadata and by its ``name`` in v3 metadata (``{"id": "zlib", "name":
"endian"}`` is a zlib codec). The draft said that data is little endian where
nothing says otherwise, and zarr-python before 3.3 read a v3 ``bytes`` codec
without ``endian`` so; zarr 3.3 made it required, as the spec does. So a
missing ``endian`` becomes ``"little"`` for every multi-byte data type but
structs (whose fields zarr's releases read differently: reported, unless the
caller names their order); a shard's index is little endian always. In a
file's text only what changes is written (`text`): the name's own string
token, the member added in the file's own style.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..data_types import needs_endian, parse_dtype
from ..names import CODEC_ID, LEGACY_CODEC_ID, named, v2_id, v3_name
from .text import JsonPath, member_added, spans, value_text

__all__ = [
    "ENDIAN_ADDED",
    "LEGACY_NAME",
    "METADATA_FILES",
    "RENAME",
    "Change",
    "Mended",
    "is_legacy_config",
    "legacy_codecs",
    "migrate_config",
    "migrate_metadata",
    "migrated_file",
    "missing_endians",
    "rewrite_text",
]

LEGACY_NAME = LEGACY_CODEC_ID
"""The codec's name in the draft spec, as v2 ``id`` and as v3 ``name``."""

_NAME = CODEC_ID
METADATA_FILES = (".zarray", ".zmetadata", "zarr.json")
"""The metadata files that can name a codec (``.zgroup`` and ``.zattrs`` cannot)."""
RENAME = f"{LEGACY_NAME!r} -> {_NAME!r}"
"""How a change is spelled in reports: ``'endian' -> 'bytes'``."""
ENDIAN_ADDED = "endian {!r} added"
"""How an added byte order is spelled in reports: ``endian 'little' added``."""
DRAFT_DEFAULT = "little"
"""The byte order the draft gave data where nothing said otherwise, and zarr-python before 3.3
read."""


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


# -- one metadata document -------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One codec mended: where in which file, and what changed (`RENAME`, or an `ENDIAN_ADDED`)."""

    file: str
    location: str  # a JSON path, e.g. "codecs[0].configuration.codecs[1]"
    what: str = RENAME

    def __str__(self) -> str:
        return f"{self.file}: {self.location}: {self.what}"


class _Addition(NamedTuple):
    """An ``endian`` to add: to the codec at ``path`` (a short-form string, or an object without
    configuration), or to its configuration object."""

    location: str
    path: JsonPath  # the codec
    form: Literal["short", "object", "configuration"]
    endian: str


class Mended(NamedTuple):
    """One metadata file mended: its document as parsed, the changes (location, what), its new bytes
    (the same bytes where nothing changes), and what could not be mended, in words."""

    document: Any
    changes: list[tuple[str, str]]
    data: bytes
    problems: list[str]


def migrate_metadata(
    document: Any, filename: str, struct_endian: Literal["little", "big"] | None = None
) -> tuple[Any, list[str]]:
    """Mend the codecs of one parsed metadata file.

    Parameters
    ----------
    document : object
        The parsed JSON of a ``.zarray``, ``.zmetadata`` or ``zarr.json``.
    filename : str
        Which of these it is.
    struct_endian : {"little", "big"}, optional
        The byte order of struct arrays' fields, where their ``bytes`` codec
        states none (left as it is without it).

    Returns
    -------
    (object, list of str)
        The mended document (a new object; the input is not mutated) and the
        JSON paths of the codecs that were renamed or given an ``endian``.
    """
    found = legacy_codecs(document, filename)
    additions, _ = missing_endians(document, filename, struct_endian)
    return _mended(document, found, additions), [location for location, _ in found] + [
        a.location for a in additions
    ]


def legacy_codecs(document: Any, filename: str) -> list[tuple[str, JsonPath]]:
    """The legacy codecs of one parsed metadata file: (readable location, JSON path of the name
    string)."""
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
            found.append(
                (
                    f"{where}[{index}]",
                    (*path, index) if isinstance(codec, str) else (*path, index, "name"),
                )
            )
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if isinstance(configuration, dict):
            for nested in ("codecs", "index_codecs"):
                nested_path = (*path, index, "configuration", nested)
                _v3_codecs(
                    configuration.get(nested),
                    nested_path,
                    f"{where}[{index}].configuration.{nested}",
                    found,
                )


# -- a missing endian ------------------------------------------------------------------------------


def missing_endians(
    document: Any, filename: str, struct_endian: Literal["little", "big"] | None = None
) -> tuple[list[_Addition], list[str]]:
    """The v3 ``bytes`` codecs (under either name) of multi-byte data types that state no
    ``endian``, with the one to add; and the ones that cannot be mended, in words (a struct without
    ``struct_endian``, a data type this package does not know)."""
    additions: list[_Addition] = []
    problems: list[str] = []
    if filename == "zarr.json":
        _v3_endians(document, (), "", additions, problems, struct_endian)
    return additions, problems


def _v3_endians(
    node: Any,
    path: JsonPath,
    where: str,
    additions: list[_Addition],
    problems: list[str],
    struct_endian: str | None,
) -> None:
    if not isinstance(node, dict):
        return
    if "data_type" in node:
        need = _endian_for(node["data_type"], struct_endian)
        _codec_endians(
            node.get("codecs"), (*path, "codecs"), f"{where}codecs", need, additions, problems
        )
    consolidated = node.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        for key, child in consolidated["metadata"].items():
            child_path = (*path, "consolidated_metadata", "metadata", key)
            child_where = f"{where}consolidated_metadata.metadata[{key!r}]."
            _v3_endians(child, child_path, child_where, additions, problems, struct_endian)


def _endian_for(data_type: Any, struct_endian: str | None) -> tuple[str | None, str | None]:
    """The ``endian`` a data type's ``bytes`` codec gets where it states none (None: none needed),
    or why none can be given."""
    try:
        dtype = parse_dtype(data_type)
    except (TypeError, ValueError):
        return None, f"data type {data_type!r} is not one this package knows: no endian added"
    if not needs_endian(dtype):
        return None, None
    if dtype.fields is not None and struct_endian is None:
        return None, (
            "a struct with multi-byte fields, whose bytes codec states no endian: zarr-python's "
            "releases read such fields differently (before 3.3 in the machine's order); "
            "struct_endian names their order"
        )
    return struct_endian if dtype.fields is not None else DRAFT_DEFAULT, None


def _codec_endians(
    codecs: Any,
    path: JsonPath,
    where: str,
    need: tuple[str | None, str | None],
    additions: list[_Addition],
    problems: list[str],
) -> None:
    """The ``bytes`` codecs without ``endian`` in a v3 codec list and the lists nested in its
    codecs: a shard's inner codecs serialize the array's data type, its index codecs little-endian
    uint64."""
    if not isinstance(codecs, list):
        return
    endian, problem = need
    for index, codec in enumerate(codecs):
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if v3_name(codec) in (_NAME, LEGACY_NAME):
            form: Literal["short", "object", "configuration"] | None = (
                "short"
                if isinstance(codec, str)
                else "object"
                if "configuration" not in codec
                else "configuration"
                if isinstance(configuration, dict) and "endian" not in configuration
                else None
            )
            if form is not None and endian is not None:
                additions.append(_Addition(f"{where}[{index}]", (*path, index), form, endian))
            elif form is not None and problem is not None:
                problems.append(f"{where}[{index}]: {problem}")
        if isinstance(configuration, dict):
            for nested, nested_need in (("codecs", need), ("index_codecs", (DRAFT_DEFAULT, None))):
                nested_path = (*path, index, "configuration", nested)
                nested_where = f"{where}[{index}].configuration.{nested}"
                _codec_endians(
                    configuration.get(nested),
                    nested_path,
                    nested_where,
                    nested_need,
                    additions,
                    problems,
                )


# -- the document and its text ---------------------------------------------------------------------


def _mended(document: Any, found: list[tuple[str, JsonPath]], additions: list[_Addition]) -> Any:
    """A copy of ``document`` with the name at each path of ``found`` made ``bytes`` and each
    addition made."""
    mended = copy.deepcopy(document)
    for _, path in found:
        _at(mended, path[:-1])[path[-1]] = _NAME
    for addition in additions:
        parent, key = _at(mended, addition.path[:-1]), addition.path[-1]
        if addition.form == "short":
            parent[key] = {"name": _NAME, "configuration": {"endian": addition.endian}}
        elif addition.form == "object":
            parent[key]["configuration"] = {"endian": addition.endian}
        else:
            parent[key]["configuration"]["endian"] = addition.endian
    return mended


def _at(document: Any, path: JsonPath) -> Any:
    node = document
    for key in path:
        node = node[key]
    return node


def rewrite_text(
    text: str, document: Any, filename: str, struct_endian: Literal["little", "big"] | None = None
) -> str:
    """The file's text with only the legacy codec names replaced by ``"bytes"``, and each missing
    ``endian`` added (`missing_endians`).

    The places are located from the structure of the text itself, in one pass:
    key order, indentation, number spellings, escapes and line endings
    elsewhere stay exactly as they were; an added member follows the file's
    style (one a line at its neighbours' indentation, or inline); a name
    written with escapes (``"\\u0065ndian"``) is written plainly.

    Raises
    ------
    ValueError
        If the result would not parse to the mended document (never expected).
    """
    additions, _ = missing_endians(document, filename, struct_endian)
    return _rewrite(text, document, legacy_codecs(document, filename), additions)


def _rewrite(
    text: str, document: Any, found: list[tuple[str, JsonPath]], additions: list[_Addition]
) -> str:
    """`rewrite_text` for the legacy codecs ``found`` and the ``additions`` already known in
    ``document``: names first, then the additions (each in a codec or a configuration of its own:
    none overlaps another)."""
    short = {addition.path for addition in additions if addition.form == "short"}
    renames = {path: f'"{_NAME}"' for _, path in found if path not in short}
    located = spans(text, set(renames), set())
    text = _edited(text, [(*located.strings[path], new) for path, new in renames.items()])
    objects = {
        a.path if a.form == "object" else (*a.path, "configuration")
        for a in additions
        if a.form != "short"
    }
    located = spans(text, short, objects)
    edits = []
    for addition in additions:
        if addition.form == "short":
            configured = {"name": _NAME, "configuration": {"endian": addition.endian}}
            start, end = located.strings[addition.path]
            edits.append((start, end, value_text(text, start, configured)))
        elif addition.form == "object":
            start, end = located.objects[addition.path]
            edits.append(
                (
                    start,
                    end,
                    member_added(text, start, end, "configuration", {"endian": addition.endian}),
                )
            )
        else:
            start, end = located.objects[(*addition.path, "configuration")]
            edits.append((start, end, member_added(text, start, end, "endian", addition.endian)))
    result = _edited(text, edits)
    if json.loads(result) != _mended(document, found, additions):
        raise ValueError("the mended text does not parse to the mended document")
    return result


def _edited(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with each (start, end, new) span replaced; the spans do not overlap."""
    pieces, last = [], 0
    for start, end, new in sorted(edits):
        pieces += [text[last:start], new]
        last = end
    return "".join(pieces) + text[last:]


def migrated_file(
    name: str, data: bytes, struct_endian: Literal["little", "big"] | None = None
) -> Mended:
    """One metadata file mended: its parsed document, its changes, its bytes with them made
    (``data`` itself where there is none), and what could not be mended. A UTF-8 byte order mark is
    kept (zarr reads it).

    Raises what parsing raises: UnicodeDecodeError, json.JSONDecodeError, RecursionError.
    """
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
    text = data[len(bom) :].decode("utf-8")
    document = json.loads(text)
    found = legacy_codecs(document, name)
    additions, problems = missing_endians(document, name, struct_endian)
    changes = [(location, RENAME) for location, _ in found]
    changes += [(addition.location, ENDIAN_ADDED.format(addition.endian)) for addition in additions]
    mended = bom + _rewrite(text, document, found, additions).encode("utf-8") if changes else data
    return Mended(document, changes, mended, problems)
