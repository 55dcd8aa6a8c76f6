"""Zarr v2 stores that use the bytes filter, as standard Zarr v3 stores: metadata only.

A v2 array of ``<i4`` whose last filter is this codec with ``endian="big"``
stores exactly what a v2 array of ``>i4`` with no filter stores. So the filter
is folded: dropped, its byte order given to the v2 data type, and zarr-python's
own v2-to-v3 mapping does the rest (``order="F"`` as a ``transpose`` codec, the
``v2`` chunk key encoding, fill value, compressors), giving the serializer
``{"name": "bytes", "configuration": {"endian": "big"}}``. Every node gets a
``zarr.json`` beside its v2 files; no chunk is read or written. Any v3 reader
opens the result with no numcodecs-bytes installed.

What `convert_store` (and ``numcodecs-bytes to-v3``) guarantees: it never
overwrites a ``zarr.json`` (one that says what it would write is kept, so a
second run is quiet); each ``zarr.json`` is created atomically, with the same
store lock and fsspec URLs as `migrate`; a consolidated v2 store is
consolidated again in v3 form once every node converted (the root's
``zarr.json`` written last); ``--remove-v2-metadata`` removes the v2 metadata
files only after writing. What cannot be converted is reported with the reason
and left as it is, and the rest converts: this codec in any filter position but
the last (the filters after it work on swapped values), a filter or fill value
zarr-python cannot convert (a null fill value of ``S`` or ``V`` data, filters
that are not array-to-array codecs), an existing different ``zarr.json``,
unreadable metadata, and struct data types with a byte order under zarr-python
before 3.3 (which would read their fields in native order). Exit codes as
`migrate`.

zarr-python is imported inside the functions that need it (``pip install
'numcodecs-bytes[zarr]'``). Its mapping is private API
(``zarr.metadata.migrate_v3._convert_array_metadata``); the tests pin it on every
zarr version the project supports, and a zarr without it is a clear ImportError.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from .codec import BytesCodec, _same_type
from .data_types import dtype_from_json, needs_endian
from .names import CODEC_ID, CODEC_IDS, v2_id, v3_entry, v3_name
from .stores import TEMP_SUFFIX, Files, open_store, relative_path, store_lock
from .swap import ENDIANS, Endian

__all__ = ["V2_METADATA_FILES", "ConversionReport", "NodeResult", "convert_store", "v3_document"]

V2_METADATA_FILES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
"""The v2 metadata files ``remove_v2_metadata`` removes (never a chunk)."""


class UnconvertibleError(ValueError):
    """A node that cannot be converted as it is (the message says why)."""


@dataclass(frozen=True)
class NodeResult:
    """One node converted: its path in the store and what was done."""

    path: str  # relative to the store, "" for the root
    kind: str  # "array" or "group"
    folded: str | None = None  # e.g. "filters[0] 'bytes' (endian big)", where the filter was folded
    unchanged: bool = False  # its zarr.json existed already with this very content


@dataclass
class ConversionReport:
    """What `convert_store` did (or, in a dry run, would do)."""

    converted: list[NodeResult] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (node or file, reason)
    removed: list[str] = field(default_factory=list)  # v2 metadata files removed
    notes: list[tuple[str, str]] = field(default_factory=list)  # (node, zarr's warning)
    consolidated: bool = False
    leftovers_removed: list[str] = field(default_factory=list)  # temporary files of killed runs


@cache
def _zarr() -> Any:
    """zarr-python's v2-to-v3 pieces (imported once), or an ImportError that says what is missing."""
    try:
        import zarr
        from zarr.core.buffer.core import default_buffer_prototype
        from zarr.core.group import GroupMetadata
        from zarr.core.metadata.v2 import ArrayV2Metadata
        from zarr.metadata.migrate_v3 import _convert_array_metadata
    except ImportError as exc:
        raise ImportError(
            f"to-v3 needs zarr-python 3.1.3 or later with its v2-to-v3 converter "
            f"(pip install 'numcodecs-bytes[zarr]'): {exc}"
        ) from None

    class Zarr:
        version = zarr.__version__
        swaps_struct_fields = tuple(int(part) for part in re.findall(r"\d+", zarr.__version__)[:2]) >= (3, 3)
        prototype = default_buffer_prototype()
        group = GroupMetadata
        array_v2 = ArrayV2Metadata
        convert_array = staticmethod(_convert_array_metadata)
        consolidate = staticmethod(zarr.consolidate_metadata)
        memory_store = zarr.storage.MemoryStore

    return Zarr


class _Fold(NamedTuple):
    description: str  # e.g. "filters[0] 'bytes' (endian big)"
    endian: Endian | None  # what the v3 serializer must say: None where nothing is ordered


def _folded(zarray: dict[str, Any]) -> tuple[dict[str, Any], _Fold | None]:
    """``zarray`` with this codec's filter folded into its data type, and what was folded."""
    filters = zarray.get("filters") or []
    if not isinstance(filters, list):
        raise UnconvertibleError(f"filters must be a list, got {filters!r}")
    ours = [i for i, f in enumerate(filters) if v2_id(f) in CODEC_IDS]
    if not ours:
        return zarray, None
    position = ours[0]
    if ours != [len(filters) - 1]:
        raise UnconvertibleError(
            f"filters[{position}] is the bytes codec but not the last filter: the filters after it work on "
            "swapped values, which no Zarr v3 codec chain expresses"
        )
    try:
        codec = BytesCodec.from_config(filters[position])
        dtype = dtype_from_json(zarray.get("dtype"))
    except (TypeError, ValueError) as exc:
        raise UnconvertibleError(f"filters[{position}]: {exc}") from None
    if codec.dtype is not None and not _same_type(codec.dtype, dtype):
        raise UnconvertibleError(f"filters[{position}] has dtype {codec.dtype}, but the array's dtype is {dtype}")
    if codec.endian is None and needs_endian(dtype):
        raise UnconvertibleError(f"filters[{position}] has no endian, which data type {dtype} needs")
    stored = dtype if codec.endian is None else dtype.newbyteorder(ENDIANS[codec.endian])
    fold = _Fold(
        f"filters[{position}] {filters[position]['id']!r} (endian {codec.endian or 'none'})",
        codec.endian if needs_endian(dtype) else None,
    )
    return {**zarray, "filters": filters[:position] or None, "dtype": _v2_dtype(stored)}, fold


def _v2_dtype(dtype: np.dtype[Any]) -> Any:
    """A dtype as ``.zarray`` spells it: a string, or a list of fields for structs."""
    return dtype.str if dtype.fields is None else json.loads(json.dumps(dtype.descr))


def _serializer_endian(document: dict[str, Any]) -> Any:
    for codec in document.get("codecs", ()):
        if isinstance(codec, dict) and v3_name(codec) == CODEC_ID:
            return (codec.get("configuration") or {}).get("endian")
    return None


def v3_document(
    zarray: dict[str, Any] | None, zattrs: dict[str, Any], notes: list[str] | None = None
) -> tuple[dict[str, Any], str | None]:
    """The ``zarr.json`` document of one v2 node (a group where ``zarray`` is None) and what was folded.

    Raises
    ------
    UnconvertibleError
        If the node cannot be converted as it is: this codec's filter not
        last, a filter or data type zarr-python cannot convert, bad metadata.
    ImportError
        If zarr-python 3 (with its v2-to-v3 converter) is not installed.
    """
    zarr = _zarr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if zarray is None:
            metadata = zarr.group(attributes=zattrs, zarr_format=3)
            folded: _Fold | None = None
        else:
            source, folded = _folded(zarray)
            try:
                metadata = zarr.convert_array(zarr.array_v2.from_dict({**source, "attributes": zattrs}))
            except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
                raise UnconvertibleError(f"zarr-python {zarr.version} cannot convert it: {exc}") from None
        document: dict[str, Any] = json.loads(metadata.to_buffer_dict(zarr.prototype)["zarr.json"].to_bytes())
    if notes is not None:
        notes += sorted({str(warning.message) for warning in caught})
    if folded is None:
        return document, None
    if _serializer_endian(document) != folded.endian:
        # zarr's converter takes the byte order from the data type, which has none for structs.
        # From zarr 3.3 (PR #4142) its bytes codec orders each struct field by the codec's
        # endian, so the fold can say it; before, zarr would read such fields native: refused.
        if not (isinstance(source["dtype"], list) and zarr.swaps_struct_fields):
            raise UnconvertibleError(
                f"zarr-python {zarr.version} maps data type {source['dtype']!r} without byte order"
            )
        serializer = next(c for c in document["codecs"] if isinstance(c, dict) and v3_name(c) == CODEC_ID)
        serializer.clear()
        serializer.update(v3_entry(CODEC_ID, folded.endian))
    return document, folded.description


def _read_json(files: Files, path: str) -> Any:
    try:
        return json.loads(files.read(path).decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise UnconvertibleError(f"{path.rsplit('/', 1)[-1]}: not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise UnconvertibleError(f"{path.rsplit('/', 1)[-1]}: not valid JSON ({exc})") from None


def _node(files: Files, folder: str, names: list[str], notes: list[str]) -> tuple[str, dict[str, Any], str | None]:
    """The kind, ``zarr.json`` document and folded filter of the v2 node in ``folder``."""
    zattrs = _read_json(files, f"{folder}/.zattrs") if ".zattrs" in names else {}
    if not isinstance(zattrs, dict):
        raise UnconvertibleError(f".zattrs must be an object, got {type(zattrs).__name__}")
    if ".zarray" in names:
        zarray = _read_json(files, f"{folder}/.zarray")
        if not isinstance(zarray, dict) or zarray.get("zarr_format") != 2:
            raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
        document, folded = v3_document(zarray, zattrs, notes)
        return "array", document, folded
    document, _ = v3_document(None, zattrs, notes)
    return "group", document, None


def _encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2, allow_nan=True).encode("utf-8")


def convert_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    remove_v2_metadata: bool = False,
    on_node: Callable[[NodeResult], None] | None = None,
) -> ConversionReport:
    """Write a Zarr v3 ``zarr.json`` for every node of a Zarr v2 store, folding the bytes filter.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would be written; write nothing.
    remove_v2_metadata : bool
        After a node's ``zarr.json`` is in place, remove its ``.zarray``,
        ``.zgroup`` and ``.zattrs`` (and the root's ``.zmetadata`` at the end);
        never a chunk. By default they stay, so v2 readers keep working.
    on_node : callable, optional
        Called with each node converted, as it goes.

    Returns
    -------
    ConversionReport
        Nodes that cannot be converted (this codec's filter not last, a filter
        or data type zarr-python cannot convert, an existing different
        ``zarr.json``, unreadable metadata) are listed with the reason and left
        as they are; the rest is converted. A v2 store with consolidated
        metadata (``.zmetadata``) is consolidated again in v3 form when every
        node converted.

    Raises
    ------
    stores.NotAStoreError
        If ``location`` is not a folder holding Zarr metadata, or cannot be reached.
    stores.StoreBusyError
        If another run is working on the same local store.
    ImportError
        If zarr-python 3 is not installed.
    """
    _zarr()  # before touching the store: a missing zarr is a usage error
    files, root = open_store(location)
    with nullcontext() if dry_run else store_lock(files, root):
        return _convert(files, root, _Options(dry_run, remove_v2_metadata, on_node))


class _Options(NamedTuple):
    dry_run: bool
    remove_v2_metadata: bool
    on_node: Callable[[NodeResult], None] | None


def _convert(files: Files, root: str, options: _Options) -> ConversionReport:
    report = ConversionReport()
    skipped: list[tuple[str, str]] = []
    documents: dict[str, dict[str, Any]] = {}  # every node converted, by path: for consolidating
    root_node: tuple[str, list[str], str, dict[str, Any]] | None = None
    for folder, subfolders, names in files.walk(skipped):
        if ".zarray" in names:
            subfolders.clear()  # an array holds chunks, not nodes: never list them
        for name in (name for name in names if name.endswith(TEMP_SUFFIX)):  # a killed run's (we hold the lock)
            if not options.dry_run:
                files.remove(f"{folder}/{name}")
            report.leftovers_removed.append(relative_path(f"{folder}/{name}", root))
        if ".zarray" not in names and ".zgroup" not in names:
            continue
        path = relative_path(folder, root)
        notes: list[str] = []
        try:
            kind, document, folded = _node(files, folder, names, notes)
        except UnconvertibleError as exc:
            report.failures.append((path or ".", str(exc)))
            continue
        except OSError as exc:
            report.failures.append((path or ".", exc.strerror or str(exc)))
            continue
        report.notes += [(path or ".", note) for note in notes]
        documents[path] = document
        if path == "" and ".zmetadata" in names and kind == "group":
            root_node = (folder, names, kind, document)  # written last, consolidated
            continue
        _write_node(files, folder, names, NodeResult(path, kind, folded), document, options, report)
    report.failures += [(relative_path(path, root) or ".", reason) for path, reason in skipped]
    if root_node is not None:
        folder, names, kind, document = root_node
        if not report.failures:
            document = _consolidated(documents)
            report.consolidated = True
        _write_node(files, folder, names, NodeResult("", kind), document, options, report)
    return report


def _write_node(
    files: Files,
    folder: str,
    names: list[str],
    result: NodeResult,
    document: dict[str, Any],
    options: _Options,
    report: ConversionReport,
) -> None:
    """Create the node's ``zarr.json`` (never over another one), then remove its v2 files if asked."""
    where = result.path or "."
    target = f"{folder}/zarr.json"
    try:
        if "zarr.json" in names:
            existing = _read_json(files, target)
            result = NodeResult(result.path, result.kind, result.folded, unchanged=True)
        elif not options.dry_run:
            files.create(target, _encoded(document))
    except UnconvertibleError as exc:
        report.failures.append((where, str(exc)))
        return
    except OSError as exc:
        report.failures.append((where, exc.strerror or str(exc)))
        return
    if result.unchanged and existing != json.loads(_encoded(document)):
        report.failures.append((where, "zarr.json exists already and says something else: not overwritten"))
        return
    report.converted.append(result)
    if options.on_node is not None:
        options.on_node(result)
    if not options.remove_v2_metadata:
        return
    for name in V2_METADATA_FILES:
        if name in names and (name != ".zmetadata" or result.path == ""):
            path = f"{folder}/{name}"
            try:
                if not options.dry_run:
                    files.remove(path)
            except OSError as exc:
                report.failures.append((f"{result.path}/{name}".lstrip("/"), exc.strerror or str(exc)))
            else:
                report.removed.append(f"{result.path}/{name}".lstrip("/"))


def _consolidated(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The root group's document with every node's metadata consolidated, as zarr-python writes it."""
    zarr = _zarr()
    buffer = zarr.prototype.buffer
    keys = {f"{path}/zarr.json".lstrip("/"): buffer.from_bytes(_encoded(doc)) for path, doc in documents.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "consolidated metadata is not part of the v3 spec": asked for here
        zarr.consolidate(zarr.memory_store(keys), zarr_format=3)  # a MemoryStore works on the dict it is given
    document: dict[str, Any] = json.loads(keys["zarr.json"].to_bytes())
    return document
