"""Zarr v2 stores, with or without the bytes filter, as standard Zarr v3 stores: metadata only.

A v2 array of ``<i4`` whose last filter is this codec with ``endian="big"``
stores exactly what a v2 array of ``>i4`` with no filter stores. So the filter
is folded: dropped, its byte order given to the v2 data type, and zarr-python's
own v2-to-v3 mapping does the rest (``order="F"`` as a ``transpose`` codec, the
``v2`` chunk key encoding, fill value, compressors), giving the serializer
``{"name": "bytes", "configuration": {"endian": "big"}}``. Every node gets a
``zarr.json`` beside its v2 files; no chunk is written. Any v3 reader opens the
result with no numcodecs-bytes installed. To write a dataset again as a new
v3 store with xarray instead (every chunk rewritten), `v3_encoding` gives each
variable's encoding in v3 terms.

What `convert_store` (and ``numcodecs-bytes to-v3``) guarantees:

- Every array v2 readers reach reads the same values as v3, or stays v2 and
  is reported. Before an array's ``zarr.json`` is written, a sample is read
  through zarr-python's v2 path and through its v3 path with zarr-python's
  own codecs (chunk 0 where it exists, and the fill value of a missing chunk)
  and compared exactly (bytes of each element, so NaNs and -0.0 too); a
  difference is reported and nothing is written (``verify=False``,
  ``--no-verify``, skips it). Arrays whose ``.zarray`` says the same are read
  by the same two pipelines, whatever their data: once one of them has shown
  the mapping right, the others are not read (they are read in rounds of
  one, two, four, ... arrays until one does). A sample shows it only
  where a wrong mapping would show in it (where byte order applies, an
  element that changes when swapped; with two axes or more, elements that
  differ): an array of zeros vouches for no other. Arrays of objects, whose
  reads depend on the data, are each checked.
- A group's ``zarr.json`` is written only after every node below it
  converted, the root's last: zarr-python opens a node as v3 where it finds a
  ``zarr.json``, so a group over a member that failed stays v2 and v2 readers
  keep reaching that member. Folders that lead to nodes without being groups
  in v2 (zarr 2 reads through them) become groups. A consolidated v2 store
  (``.zmetadata`` at the root) is consolidated again in v3 form, with every
  node, those converted by earlier runs included.
- It never overwrites a ``zarr.json``: one that says what it would write is
  kept (so a rerun is quiet and finishes an interrupted run); the root's may
  only get its consolidated metadata brought up to date. Each ``zarr.json`` is
  created atomically, with the same store lock, fsspec URLs and batches as
  `migrate`; on S3 only where none exists (``If-None-Match``), so of two runs
  at once each file is written by one and the other reports it.
- ``remove_v2_metadata`` removes the v2 metadata files only once every node
  converted, ``.zmetadata`` last; never a chunk.

What cannot be converted is reported with the reason and left as it is, and
the rest converts: this codec in any filter position but the last (the filters
after it work on swapped values), a filter dtype in the other byte order than
the array's (v2 readers view the decoded values in the array's), a filter or
fill value zarr-python cannot convert, an array inside another array (Zarr v3
arrays hold no nodes), struct fields in mixed byte orders, struct fields or
filter chains in an order the installed zarr-python would read wrong (before
3.3 it reads struct fields native; before 3.4 it hands the filters swapped
data), an existing different ``zarr.json``, unreadable metadata. A null
``fill_value`` (kerchunk writes it for netCDF3) becomes the data type's
default, as zarr 3 uses when none is given, with a note per array. Exit codes
as `migrate`.

zarr-python is imported inside the functions that need it (``pip install
'numcodecs-bytes[zarr]'``). Its mapping is private API
(``zarr.metadata.migrate_v3._convert_array_metadata``); the tests pin it on every
zarr version the project supports, and a zarr without it is a clear ImportError.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from .codec import BytesCodec, _same_type
from .data_types import dtype_from_json, needs_endian
from .names import CODEC_ID, CODEC_IDS, v2_id, v3_entry, v3_name
from .stores import (
    BATCH,
    JOBS,
    Files,
    Folder,
    Replacement,
    Walked,
    open_store,
    prune_array_folder,
    relative_path,
    remove_leftovers,
    store_lock,
)
from .swap import ENDIANS, Endian

__all__ = ["V2_METADATA_FILES", "ConversionReport", "NodeResult", "convert_store", "v3_document", "v3_encoding"]

V2_METADATA_FILES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
"""The v2 metadata files ``remove_v2_metadata`` removes (never a chunk)."""
_NATIVE: Endian = "little" if sys.byteorder == "little" else "big"


class UnconvertibleError(ValueError):
    """A node that cannot be converted as it is (the message says why)."""


@dataclass(frozen=True)
class NodeResult:
    """One node converted: its path in the store and what was done."""

    path: str  # relative to the store, "" for the root
    kind: str  # "array" or "group"
    folded: str | None = None  # e.g. "filters[0] 'bytes' (endian big)", where the filter was folded
    unchanged: bool = False  # its zarr.json existed already with this very content
    implicit: bool = False  # a folder without v2 metadata that leads to nodes: made a group
    document: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # its zarr.json


@dataclass
class ConversionReport:
    """What `convert_store` did (or, in a dry run, would do)."""

    converted: list[NodeResult] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (node or file, reason)
    removed: list[str] = field(default_factory=list)  # v2 metadata files removed
    notes: list[tuple[str, str]] = field(default_factory=list)  # (node, zarr's warning or what was assumed)
    consolidated: bool = False  # the root's zarr.json holds every node's metadata
    leftovers_removed: list[str] = field(default_factory=list)  # temporary files of killed runs


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


@cache
def _zarr() -> Any:
    """zarr-python's v2-to-v3 pieces (imported once), or an ImportError that says what is missing."""
    try:
        import zarr
        from zarr.api.asynchronous import open_array as open_array_in_loop
        from zarr.core.buffer.core import default_buffer_prototype
        from zarr.core.dtype import get_data_type_from_native_dtype
        from zarr.core.group import GroupMetadata
        from zarr.core.metadata.v2 import ArrayV2Metadata
        from zarr.core.sync import sync as run_in_loop
        from zarr.metadata.migrate_v3 import _convert_array_metadata, _convert_compressor, _convert_filters
    except ImportError as exc:
        raise ImportError(
            f"to-v3 needs zarr-python 3.1.3 or later with its v2-to-v3 converter "
            f"(pip install 'numcodecs-bytes[zarr]'): {exc}"
        ) from None

    class Zarr:
        version = zarr.__version__
        # zarr-python 3.3 (PR #4142) orders each struct field by the bytes codec's endian; before, native.
        swaps_struct_fields = _version(zarr.__version__) >= (3, 3)
        # zarr-python 3.4 hands array-to-array codecs native arrays on decode; 3.1 a view in the stored order.
        filters_get_native_arrays = _version(zarr.__version__) >= (3, 4)
        prototype = default_buffer_prototype()
        group = GroupMetadata
        array_v2 = ArrayV2Metadata
        convert_array = staticmethod(_convert_array_metadata)
        convert_filters = staticmethod(_convert_filters)
        convert_compressor = staticmethod(_convert_compressor)
        data_type = staticmethod(get_data_type_from_native_dtype)
        consolidate = staticmethod(zarr.consolidate_metadata)
        memory_store = zarr.storage.MemoryStore
        open_array_async = staticmethod(open_array_in_loop)
        sync = staticmethod(run_in_loop)
        config = zarr.config

    return Zarr


class _Fold(NamedTuple):
    description: str  # e.g. "filters[0] 'bytes' (endian big)"
    endian: Endian | None  # what the v3 serializer must say: None where nothing is ordered


def _folded(zarray: dict[str, Any]) -> tuple[dict[str, Any], _Fold | None]:
    """``zarray`` with this codec's filter folded into its data type, and what was folded."""
    filters = zarray.get("filters") or []
    if not isinstance(filters, list):
        raise UnconvertibleError(f"filters must be a list, got {filters!r}")
    position = _position_of_this_codec([v2_id(f) for f in filters])
    if position is None:
        return zarray, None
    try:
        codec = BytesCodec.from_config(filters[position])
        dtype = dtype_from_json(zarray.get("dtype"))
        ordered = needs_endian(dtype)
    except (TypeError, ValueError) as exc:
        raise UnconvertibleError(f"filters[{position}]: {exc}") from None
    if codec.dtype is not None and codec.dtype != dtype:
        # zarr views what the filter decodes as the array's dtype: in another byte order, other values.
        other = " in the other byte order" if _same_type(codec.dtype, dtype) else ""
        raise UnconvertibleError(
            f"filters[{position}] has dtype {codec.dtype.str if codec.dtype.fields is None else codec.dtype}, "
            f"but the array's dtype is {dtype.str if dtype.fields is None else dtype}{other}: v2 readers view "
            "the decoded values as the array's dtype"
        )
    if codec.endian is None and ordered:
        raise UnconvertibleError(f"filters[{position}] has no endian, which data type {dtype} needs")
    stored = dtype if codec.endian is None else dtype.newbyteorder(ENDIANS[codec.endian])
    fold = _Fold(
        f"filters[{position}] {filters[position]['id']!r} (endian {codec.endian or 'none'})",
        codec.endian if ordered else None,
    )
    folded = {**zarray, "filters": filters[:position] or None, "dtype": _v2_dtype(stored)}
    if dtype.fields is not None and isinstance(zarray.get("fill_value"), str):
        # A struct's v2 fill value is the base64 of one element in the v2 dtype's layout: the same
        # value in the stored layout has other bytes.
        element = np.frombuffer(base64.b64decode(zarray["fill_value"]), dtype, count=1)
        folded["fill_value"] = base64.b64encode(element.astype(stored).tobytes()).decode("ascii")
    return folded, fold


def _position_of_this_codec(filter_ids: list[Any]) -> int | None:
    """Where this codec is among v2 filters (by id): None if not there; only the last filter folds."""
    ours = [i for i, codec_id in enumerate(filter_ids) if codec_id in CODEC_IDS]
    if ours and ours != [len(filter_ids) - 1]:
        raise UnconvertibleError(
            f"filters[{ours[0]}] is the bytes codec but not the last filter: the filters after it work on "
            "swapped values, which no Zarr v3 codec chain expresses"
        )
    return ours[0] if ours else None


def _v2_dtype(dtype: np.dtype[Any]) -> Any:
    """A dtype as ``.zarray`` spells it: a string, or a list of fields for structs."""
    return dtype.str if dtype.fields is None else json.loads(json.dumps(dtype.descr))


def _field_orders(dtype: np.dtype[Any]) -> set[Endian]:
    """The byte orders of a struct's multi-byte fields, nested ones included."""
    if dtype.fields is not None:
        return set().union(*(_field_orders(dtype.fields[name][0]) for name in dtype.names or ()))
    if dtype.subdtype is not None:
        return _field_orders(dtype.subdtype[0])
    if not needs_endian(dtype):
        return set()
    return {"big" if dtype.byteorder == ">" else "little" if dtype.byteorder == "<" else _NATIVE}


def _struct_endian(v2_dtype: Any) -> Endian | None:
    """The serializer's endian for a v2 struct data type: its fields' one byte order (None if none applies)."""
    zarr = _zarr()
    orders = _field_orders(dtype_from_json(v2_dtype))
    if len(orders) > 1:
        raise UnconvertibleError(
            f"the fields of data type {v2_dtype!r} are in both byte orders: a Zarr v3 bytes codec has one endian"
        )
    endian = next(iter(orders), None)
    if endian not in (None, _NATIVE) and not zarr.swaps_struct_fields:
        raise UnconvertibleError(
            f"zarr-python {zarr.version} reads struct fields in native order, but data type {v2_dtype!r} is "
            f"{endian} endian (zarr-python 3.3 reads it right)"
        )
    return endian


def _serializer(document: dict[str, Any]) -> dict[str, Any] | None:
    for codec in document.get("codecs", ()):
        if isinstance(codec, dict) and v3_name(codec) == CODEC_ID:
            return codec
    return None


def _check_integer_fill_value(source: dict[str, Any]) -> None:
    """An integer type's fill value is a whole number in its range (numpy < 2 wraps the others silently)."""
    fill_value, spelled = source.get("fill_value"), source.get("dtype")
    if not isinstance(spelled, str) or isinstance(fill_value, bool) or not isinstance(fill_value, int | float):
        return
    dtype = np.dtype(spelled)
    if dtype.kind not in "iuMm":
        return
    limits = np.iinfo(dtype if dtype.kind in "iu" else np.int64)
    if not math.isfinite(fill_value) or fill_value != int(fill_value) or not limits.min <= fill_value <= limits.max:
        raise UnconvertibleError(
            f"fill_value {fill_value!r} is not a whole number in the range of data type {dtype.str} "
            f"({limits.min}..{limits.max})"
        )


def _default_fill_value(source: dict[str, Any]) -> Any:
    """The v2 spelling of the data type's default scalar: what zarr 3 fills with when given none."""
    data_type = _zarr().array_v2.from_dict({**source, "fill_value": None}).dtype
    return data_type.to_json_scalar(data_type.default_scalar(), zarr_format=2)


def v3_document(
    zarray: dict[str, Any] | None, zattrs: dict[str, Any], notes: list[str] | None = None
) -> tuple[dict[str, Any], str | None]:
    """The ``zarr.json`` document of one v2 node (a group where ``zarray`` is None) and what was folded.

    Raises
    ------
    UnconvertibleError
        If the node cannot be converted as it is: this codec's filter not
        last or in another dtype than the array's, a filter, data type or
        fill value zarr-python cannot convert or would read wrong, bad metadata.
    ImportError
        If zarr-python 3 (with its v2-to-v3 converter) is not installed.
    """
    zarr = _zarr()
    assumed: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if zarray is None:
            metadata = zarr.group(attributes=zattrs, zarr_format=3)
            folded: _Fold | None = None
        else:
            source, folded = _folded(zarray)
            _check_integer_fill_value(source)
            try:
                if source.get("fill_value") is None:
                    source = {**source, "fill_value": _default_fill_value(source)}
                    assumed.append(
                        f"fill_value null (v2 leaves missing chunks undefined): Zarr v3 needs one, so "
                        f"{json.dumps(source['fill_value'])} (the data type's default) is written"
                    )
                metadata = zarr.convert_array(zarr.array_v2.from_dict({**source, "attributes": zattrs}))
            except (ValueError, TypeError, KeyError, NotImplementedError, OverflowError) as exc:
                raise UnconvertibleError(f"zarr-python {zarr.version} cannot convert it: {exc}") from None
        document: dict[str, Any] = json.loads(metadata.to_buffer_dict(zarr.prototype)["zarr.json"].to_bytes())
    if notes is not None:
        notes += sorted({str(warning.message) for warning in caught}) + assumed
    if zarray is None:
        return document, None
    serializer = _serializer(document)
    if isinstance(source["dtype"], list):
        # zarr's converter takes the byte order from the data type, which has none for structs.
        endian = _struct_endian(source["dtype"])
        if serializer is not None:
            serializer.clear()
            serializer.update(v3_entry(CODEC_ID, endian))
    elif folded is not None and (serializer or {}).get("configuration", {}).get("endian") != folded.endian:
        raise UnconvertibleError(f"zarr-python {zarr.version} maps data type {source['dtype']!r} without byte order")
    if folded is not None and source["filters"] and folded.endian not in (None, _NATIVE):
        if not zarr.filters_get_native_arrays:
            raise UnconvertibleError(
                f"zarr-python {zarr.version} hands the filters before the bytes codec its {folded.endian} endian "
                "data as it is stored, which they would read as native (zarr-python 3.4 reads it right)"
            )
    return document, None if folded is None else folded.description


def v3_encoding(encoding: Mapping[str, Any]) -> dict[str, Any]:
    """An xarray variable's encoding from a Zarr v2 store, for writing it as Zarr v3.

    A dataset opened from a v2 store keeps that store's numcodecs codecs in
    each variable's ``encoding``, and zarr-python refuses them for a Zarr v3
    array: ``ds.to_zarr(path, zarr_format=3)`` raises a TypeError
    (zarr-python #2964, xarray #10032). This returns the encoding with its
    codecs in Zarr v3 form: this codec's filter (the last filter) becomes the
    serializer, `numcodecs_bytes.zarr3.BytesCodec` in the same byte order;
    the other filters and the compressors are mapped by zarr-python's own
    v2-to-v3 conversion. Every other key is kept. The chunks are rewritten
    when the dataset is written; `convert_store` converts a store in place
    instead, with no chunk written.

    Parameters
    ----------
    encoding : mapping
        ``dataset[name].encoding`` of a variable read from a Zarr v2 store;
        its ``dtype`` (the stored data type) sizes blosc's ``typesize``.

    Returns
    -------
    dict
        The encoding for ``to_zarr(..., zarr_format=3)``; ``filters`` is
        None where this codec was the only filter.

    Raises
    ------
    UnconvertibleError
        A ValueError: this codec is a filter but not the last (the filters
        after it work on swapped values, which no Zarr v3 chain expresses).
    TypeError, ValueError
        zarr-python's own, for a filter or compressor it has no Zarr v3
        codec for.
    ImportError
        If zarr-python 3 is not installed.

    Examples
    --------
    >>> import numcodecs, numpy as np
    >>> from numcodecs_bytes import BytesCodec
    >>> from numcodecs_bytes.to_v3 import v3_encoding
    >>> encoding = {"dtype": np.dtype("<f8"), "chunks": (4,), "compressors": (numcodecs.GZip(level=5),),
    ...             "filters": (BytesCodec(endian="big", dtype="<f8"),)}
    >>> v3 = v3_encoding(encoding)
    >>> v3["serializer"], v3["filters"], v3["compressors"], v3["chunks"]
    (BytesCodec(endian='big'), None, (GzipCodec(level=5),), (4,))
    """
    zarr = _zarr()
    from .zarr3 import BytesCodec as Serializer

    filters = list(encoding.get("filters") or ())
    v3 = dict(encoding)
    if _position_of_this_codec([getattr(f, "codec_id", None) for f in filters]) is not None:
        v3["serializer"] = Serializer(endian=filters.pop().endian)
    v3["filters"] = tuple(zarr.convert_filters(tuple(filters))) or None
    if encoding.get("compressors"):
        data_type = zarr.data_type(np.dtype(encoding["dtype"]))
        v3["compressors"] = tuple(zarr.convert_compressor(c, data_type) for c in encoding["compressors"])
    return v3


# -- checking a conversion by reading a sample both ways ----------------------------------------------------


async def _read_sample(files: dict[str, bytes], zarr_format: int, region: tuple[slice, ...]) -> np.ndarray[Any, Any]:
    """``region`` of the array whose metadata and chunks are ``files``, read by zarr-python."""
    zarr = _zarr()
    store = zarr.memory_store({key: zarr.prototype.buffer.from_bytes(data) for key, data in files.items()})
    array = await zarr.open_array_async(store=store, mode="r", zarr_format=zarr_format)
    return np.asarray(await array.getitem(region))


def _read_samples(reads: list[tuple[dict[str, bytes], int]], region: tuple[slice, ...]) -> list[Any]:
    """Each read of `_read_sample` (a value, or the exception it raised), in one trip to zarr's event loop."""
    zarr = _zarr()

    async def all_reads() -> list[Any]:
        results: list[Any] = []
        for files, zarr_format in reads:  # in memory: nothing to wait for, so one after another
            try:
                results.append(await _read_sample(files, zarr_format, region))
            except Exception as exc:
                results.append(exc)
        return results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. zarr 3.4 on a struct without endian: what it assumes is compared
        with zarr.config.set({"codecs.bytes": "zarr.codecs.bytes.BytesCodec"}):  # zarr's own codec, whatever is set
            return list(zarr.sync(all_reads()))


def _difference(v2: np.ndarray[Any, Any], v3: np.ndarray[Any, Any]) -> str | None:
    """How two reads of one sample differ (None if they do not): compared by the bytes of each element."""
    if v2.shape != v3.shape:
        return f"shape {v2.shape} in v2, {v3.shape} in v3"
    if v2.dtype.kind in "OT" or v3.dtype.kind in "OT":  # strings of any length: compared as Python values
        left, right = v2.ravel().tolist(), v3.ravel().tolist()
        differing = [i for i, (a, b) in enumerate(zip(left, right, strict=True)) if type(a) is not type(b) or a != b]
    else:
        if not _same_type(v2.dtype, v3.dtype):
            return f"dtype {v2.dtype} in v2, {v3.dtype} in v3"
        native = v2.dtype.newbyteorder("=")
        left_bytes = np.ascontiguousarray(v2, native).reshape(-1).view(np.uint8).reshape(v2.size, -1)
        right_bytes = np.ascontiguousarray(v3, native).reshape(-1).view(np.uint8).reshape(v3.size, -1)
        differing = np.flatnonzero((left_bytes != right_bytes).any(axis=1)).tolist()
    if not differing:
        return None
    first = np.unravel_index(differing[0], v2.shape) if v2.ndim else ()
    index = tuple(int(i) for i in first)
    return f"{len(differing)} of {v2.size} elements differ, first at {index}: v2 reads {v2[index]!r}, v3 {v3[index]!r}"


def _readable(zarray: dict[str, Any]) -> dict[str, Any]:
    """``zarray`` with the array's dtype given to a filter of ours without one, as the fold reads it.

    Such a filter writes, but zarr cannot read through it (it passes no ``out``): v3 is
    what makes the array readable, and it is checked against what the filter means.
    """
    filters = [
        {**f, "dtype": zarray.get("dtype")} if v2_id(f) in CODEC_IDS and f.get("dtype") is None else f
        for f in zarray.get("filters") or ()
    ]
    return {**zarray, "filters": filters or None}


def _chunk_zero(zarray: dict[str, Any]) -> str | None:
    """The key of an array's first chunk, None where the array has no element."""
    shape = zarray["shape"]
    return (zarray.get("dimension_separator") or ".").join("0" for _ in shape) or "0" if all(shape) else None


def _pipelines(zarray: dict[str, Any]) -> str | None:
    """What decides how an array is read, as v2 and as v3: its whole ``.zarray`` (arrays whose ``.zarray`` says
    the same are read by the same two pipelines). None for data types holding objects, whose reads depend on
    the data as well."""
    return None if "|O" in json.dumps(zarray.get("dtype")) else json.dumps(zarray, sort_keys=True)


def _telling(sample: np.ndarray[Any, Any]) -> bool:
    """Whether a sample read alike as v2 and as v3 shows the mapping between them right: where byte order applies,
    some element changes when swapped (a byte order mistake would show); with two axes or more, not every
    element is the same (a transposed one would show)."""
    if needs_endian(sample.dtype) and sample.tobytes() == sample.byteswap().tobytes():
        return False
    elements = np.ascontiguousarray(sample).reshape(-1).view(np.uint8).reshape(sample.size, -1)
    return sample.ndim < 2 or bool((elements != elements[:1]).any())


def _verify(zarray: dict[str, Any], document: dict[str, Any], chunk: bytes | Exception | None) -> bool:
    """Read chunk 0 (``chunk``: what reading it gave, None where not stored) and a missing chunk's fill value as
    v2 and as v3; raise if they differ. Whether chunk 0 was read and `_telling`."""
    if isinstance(chunk, Exception):
        raise chunk
    zarr = _zarr()
    shape, chunks = zarray["shape"], zarray["chunks"]
    region = tuple(slice(0, min(extent, size)) for extent, size in zip(shape, chunks, strict=True))
    key = _chunk_zero(zarray)
    samples: list[tuple[str, dict[str, bytes]]] = []
    if chunk is not None and key is not None:
        samples.append(("chunk 0", {key: chunk}))
    chunk_read = bool(samples)
    if zarray.get("fill_value") is not None:  # a null one leaves v2's missing chunks undefined: nothing to compare
        samples.append(("the fill value of a missing chunk", {}))
    v2_files, v3_files = {".zarray": _encoded(_readable(zarray))}, {"zarr.json": _encoded(document)}
    reads = [(files_, zarr_format) for _, chunk_files in samples for files_, zarr_format in (
        ({**v2_files, **chunk_files}, 2), ({**v3_files, **chunk_files}, 3))]  # fmt: skip
    results = _read_samples(reads, region)
    for (what, _), expected, got in zip(samples, results[::2], results[1::2], strict=True):
        if isinstance(expected, Exception):
            raise UnconvertibleError(
                f"its conversion cannot be checked: reading {what} as Zarr v2 fails "
                f"({type(expected).__name__}: {expected}); --no-verify converts without the check"
            )
        if isinstance(got, Exception):
            raise UnconvertibleError(
                f"zarr-python {zarr.version} cannot read {what} through the converted metadata "
                f"({type(got).__name__}: {got})"
            )
        difference = _difference(expected, got)
        if difference is not None:
            raise UnconvertibleError(f"the converted metadata reads {what} otherwise than v2: {difference}")
    return chunk_read and _telling(results[0])


# -- the store ------------------------------------------------------------------------------------------------


def _parsed(data: bytes | Exception, path: str) -> Any:
    """A metadata file's JSON from what reading it gave (its bytes, or the error raised here)."""
    if isinstance(data, Exception):
        raise data
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise UnconvertibleError(f"{path.rsplit('/', 1)[-1]}: not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise UnconvertibleError(f"{path.rsplit('/', 1)[-1]}: not valid JSON ({exc})") from None


def _encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2, allow_nan=True).encode("utf-8")


class _Node(NamedTuple):
    """A node found in the store and the ``zarr.json`` it gets."""

    folder: str
    path: str
    names: list[str]
    kind: str  # "array" or "group"
    document: dict[str, Any]
    folded: str | None = None
    origin: str = "v2"  # "v2"; "v3": only a zarr.json (converted before); "implicit": a folder that leads to nodes
    existing: bytes | None = None  # the zarr.json found beside v2 metadata (an earlier run's), as read
    zarray: dict[str, Any] | None = None  # a v2 array's metadata, for the check


_IMPLICIT_GROUP: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": {}}
_READ = (".zattrs", ".zarray", "zarr.json")  # the files a node's zarr.json is made from, or compared with


def _node(folder: Folder, path: str, read: dict[str, bytes | Exception], notes: list[str]) -> _Node:
    """The node in ``folder`` and its ``zarr.json`` document, from its files as ``read`` (by path)."""
    names = folder.files

    def parsed(name: str) -> Any:
        return _parsed(read[f"{folder.path}/{name}"], name)

    existing = read.get(f"{folder.path}/zarr.json")
    if ".zarray" not in names and ".zgroup" not in names:
        if "zarr.json" in names:  # its v2 files removed by an earlier run: it stays as it is
            document = parsed("zarr.json")
            if not isinstance(document, dict) or document.get("zarr_format") != 3:
                raise UnconvertibleError("zarr.json is not Zarr v3 metadata, and there is no v2 metadata")
            kind = "array" if document.get("node_type") == "array" else "group"
            return _Node(folder.path, path, names, kind, document, origin="v3")
        # The root with only .zmetadata: zarr 2's open_consolidated opens it as a group.
        return _Node(folder.path, path, names, "group", dict(_IMPLICIT_GROUP), origin="implicit")
    if isinstance(existing, Exception):
        raise existing
    zattrs = parsed(".zattrs") if ".zattrs" in names else {}
    if not isinstance(zattrs, dict):
        raise UnconvertibleError(f".zattrs must be an object, got {type(zattrs).__name__}")
    if ".zarray" not in names:
        document, _ = v3_document(None, zattrs, notes)
        return _Node(folder.path, path, names, "group", document, existing=existing)
    zarray = parsed(".zarray")
    if not isinstance(zarray, dict) or zarray.get("zarr_format") != 2:
        raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
    document, folded = v3_document(zarray, zattrs, notes)
    return _Node(folder.path, path, names, "array", document, folded, existing=existing, zarray=zarray)


def _parents(path: str) -> Iterator[str]:
    """The folders above a node, nearest first, up to the store's root ``""``."""
    while path:
        path = path.rpartition("/")[0]
        yield path


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnconvertibleError):
        return str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, RecursionError):
        return "its metadata is nested too deeply to convert"
    return f"cannot be converted: {type(exc).__name__}: {exc}"


def convert_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    remove_v2_metadata: bool = False,
    verify: bool = True,
    on_node: Callable[[NodeResult], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    jobs: int = JOBS,
    storage_options: dict[str, Any] | None = None,
) -> ConversionReport:
    """Write a Zarr v3 ``zarr.json`` for every node of a Zarr v2 store, folding the bytes filter.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would be written; write nothing (the checks still run).
    remove_v2_metadata : bool
        Once every node has its ``zarr.json``, remove the ``.zarray``,
        ``.zgroup``, ``.zattrs`` and ``.zmetadata`` files; never a chunk. By
        default they stay, so v2 readers keep working.
    verify : bool
        Before writing an array's ``zarr.json``, read chunk 0 and the fill
        value both as v2 and through the new metadata as v3 with zarr-python's
        own codecs, and convert only what reads the same (once per ``.zarray``
        where a sample shows the mapping right: see the module's docstring).
    on_node : callable, optional
        Called with each node converted, as it goes.
    on_progress : callable, optional
        Called after each batch of folders with (folders walked, folders found so far).
    jobs : int
        Requests in flight at most on an object store.
    storage_options : dict, optional
        Passed to fsspec with a URL (``endpoint_url``, ``profile``, ``anon``, ...).

    Returns
    -------
    ConversionReport
        What cannot be converted (see the module's docstring) is listed with
        the reason and left as it is, and so are the groups above it; the rest
        is converted. A v2 store with consolidated metadata (``.zmetadata``) is
        consolidated again in v3 form when every node converted.

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
    files, root = open_store(location, jobs=jobs, storage_options=storage_options)
    with nullcontext() if dry_run else store_lock(files, root):
        return _convert(files, root, _Options(dry_run, remove_v2_metadata, verify, on_node, on_progress))


class _Options(NamedTuple):
    dry_run: bool
    remove_v2_metadata: bool
    verify: bool
    on_node: Callable[[NodeResult], None] | None
    on_progress: Callable[[int, int], None] | None


def _convert(files: Files, root: str, options: _Options) -> ConversionReport:
    report = ConversionReport()
    skipped: list[tuple[str, str]] = []
    nodes: dict[str, _Node] = {}  # every node that converts (or was converted), by path
    arrays: set[str] = set()  # paths of arrays: a node below one is not part of the hierarchy
    failed: set[str] = set()  # paths that stay as they are
    shown: set[str] = set()  # the pipelines (`_pipelines`) a check has shown right
    walked = Walked()

    def fail(path: str, reason: str) -> None:
        failed.add(path)
        report.failures.append((path or ".", reason))

    for batch in files.walk(skipped):
        _remove_leftovers(files, root, batch, options, report)
        found: list[tuple[Folder, str]] = []  # the batch's nodes and their paths
        for folder in batch:
            path, names = relative_path(folder.path, root), folder.files
            if not ({".zarray", ".zgroup", "zarr.json"} & set(names) or (path == "" and ".zmetadata" in names)):
                continue  # not a node; a group in v3 if nodes lie below it
            if ".zarray" in names:
                prune_array_folder(folder.subfolders, 2)
            container = next((parent for parent in _parents(path) if parent in arrays), None)
            if container is not None:
                arrays.add(path)
                fail(path, f"a node inside the array {container or '.'}: Zarr v3 arrays hold no nodes; left as v2")
                continue
            found.append((folder, path))
        read = files.read(f"{folder.path}/{name}" for folder, _ in found for name in _READ if name in folder.files)
        built: list[_Node] = []
        for folder, path in found:
            notes: list[str] = []
            try:
                node = _node(folder, path, read, notes)
            except Exception as exc:  # one node's problem, whatever it is, is reported; the rest converts
                fail(path, _reason(exc))
                if ".zarray" in folder.files:
                    arrays.add(path)
                continue
            report.notes += [(path or ".", note) for note in notes]
            if node.kind == "array":
                arrays.add(path)
                if node.origin == "v3":
                    prune_array_folder(folder.subfolders, 3)
            built.append(node)
        built = _checked([node for node in built if node.kind == "array"], files, options, fail, shown) + [
            node for node in built if node.kind == "group"
        ]
        failed.update(_write_nodes(files, [(n, n.document) for n in built if n.kind == "array"], options, report))
        for node in built:  # kept to the end for the groups and the consolidation: what those need only
            nodes[node.path] = (
                node._replace(zarray=None) if node.kind == "group" else node._replace(zarray=None, existing=None)
            )
        walked.add(batch)
        if options.on_progress is not None:
            options.on_progress(walked.done, walked.found)
    failed.update(relative_path(path, root) for path, _ in skipped)
    report.failures += [(relative_path(path, root) or ".", reason) for path, reason in skipped]
    _write_groups(root, nodes, arrays, failed, files, options, report)
    if options.remove_v2_metadata and not report.failures:
        _remove_v2_metadata(files, nodes, options, report)
    return report


def _remove_leftovers(
    files: Files, root: str, batch: list[Folder], options: _Options, report: ConversionReport
) -> None:
    """The temporary files of killed runs in ``batch``, removed and reported."""
    leftovers, failures = remove_leftovers(files, batch, options.dry_run)
    report.leftovers_removed += [relative_path(path, root) for path in leftovers if path not in failures]
    report.failures += [(relative_path(path, root), _reason(exc)) for path, exc in failures.items()]


def _checked(
    arrays: list[_Node], files: Files, options: _Options, fail: Callable[[str, str], None], shown: set[str]
) -> list[_Node]:
    """The arrays whose check passes (`_verify`); the others fail.

    An array read by the same pipelines as one whose chunk 0 has shown the mapping right (`_pipelines`, kept
    in ``shown``) passes unread. The others are checked in rounds, each round's chunks read in one batch: per
    pipelines one array, then two, four, ... until one shows them right (few rounds where samples of zeros
    come first; every array read where none shows anything).
    """
    if not options.verify:
        return arrays
    failed: set[str] = set()
    waiting = [(node, node.zarray, _pipelines(node.zarray)) for node in arrays if node.zarray is not None]
    size = 1
    while waiting := [(node, zarray, pipelines) for node, zarray, pipelines in waiting if pipelines not in shown]:
        taken: dict[str, int] = {}
        checking = []
        for check in waiting:
            group = check[2] or check[0].path
            taken[group] = taken.get(group, 0) + 1
            if taken[group] <= size:
                checking.append(check)
        keys = {node.path: _chunk_zero(zarray) for node, zarray, _ in checking}
        chunks = files.read_data(f"{node.folder}/{keys[node.path]}" for node, _, _ in checking if keys[node.path])
        for node, zarray, pipelines in checking:
            key = keys[node.path]
            try:
                told = _verify(zarray, node.document, None if key is None else chunks[f"{node.folder}/{key}"])
            except Exception as exc:
                fail(node.path, _reason(exc))
                failed.add(node.path)
                continue
            if told and pipelines is not None:
                shown.add(pipelines)
        done = {node.path for node, _, _ in checking}
        waiting = [check for check in waiting if check[0].path not in done]
        size *= 2
    return [node for node in arrays if node.path not in failed]


def _write_groups(
    root: str,
    nodes: dict[str, _Node],
    arrays: set[str],
    failed: set[str],
    files: Files,
    options: _Options,
    report: ConversionReport,
) -> None:
    """Every group's ``zarr.json``, deepest first (a batch per depth), each only once everything below it
    converted; the root last."""
    for path in [*nodes, *failed]:
        for parent in _parents(path):
            if parent in nodes or parent in arrays or parent in failed:
                break
            folder = f"{root}/{parent}" if parent else root
            nodes[parent] = _Node(folder, parent, [], "group", dict(_IMPLICIT_GROUP), origin="implicit")
    blocked = {parent for path in failed for parent in _parents(path)}
    root_node = nodes.get("")
    groups = [node for node in nodes.values() if node.kind == "group"]
    for depth in sorted({_depth(node.path) for node in groups}, reverse=True):
        writes = []
        for node in (node for node in groups if _depth(node.path) == depth):
            if node.path in blocked:
                below = sum(path.startswith(f"{node.path}/") or not node.path for path in failed)
                if node.origin == "v2":
                    report.failures.append(
                        (node.path or ".", f"left as Zarr v2: {below} path(s) below it could not be converted")
                    )
                continue
            document = node.document
            if node is root_node and ".zmetadata" in node.names:
                document = _consolidated({path: n.document for path, n in nodes.items()})
            writes.append((node, document))
        not_written = _write_nodes(files, writes, options, report)
        failed |= not_written
        blocked |= {parent for path in not_written for parent in _parents(path)}
        if root_node is not None and depth == 0 and ".zmetadata" in root_node.names and not not_written:
            report.consolidated = any(node is root_node for node, _ in writes)


def _depth(path: str) -> int:
    """A node's depth: 0 for the root, 1 for its members, ..."""
    return path.count("/") + 1 if path else 0


def _write_nodes(
    files: Files, writes: list[tuple[_Node, dict[str, Any]]], options: _Options, report: ConversionReport
) -> set[str]:
    """Create each node's ``zarr.json`` in one batch (never over another, but the root's consolidated
    metadata); the paths of the nodes not written."""
    unchanged: dict[str, bool] = {}
    failures: dict[str, Exception] = {}
    creates: dict[str, bytes] = {}
    replacements: list[Replacement] = []
    by_target = {f"{node.folder}/zarr.json": node.path for node, _ in writes}
    for node, document in writes:
        target = f"{node.folder}/zarr.json"
        try:
            if node.origin == "v3":
                unchanged[node.path] = True
            elif node.existing is not None:
                replacement = _update(node, target, document)
                unchanged[node.path] = replacement is None
                if replacement is not None:
                    replacements.append(replacement)
            else:
                unchanged[node.path] = False
                creates[target] = _encoded(document)
        except Exception as exc:
            failures[node.path] = exc
    if not options.dry_run:
        written = {**files.create(creates), **files.replace(replacements)}
        failures |= {by_target[target]: exc for target, exc in written.items()}
    for node, document in writes:
        if node.path in failures:
            report.failures.append((node.path or ".", _reason(failures[node.path])))
            continue
        result = NodeResult(
            node.path, node.kind, node.folded, unchanged[node.path], node.origin == "implicit", document
        )
        report.converted.append(result)
        if options.on_node is not None:
            options.on_node(result)
    return set(failures)


def _update(node: _Node, target: str, document: dict[str, Any]) -> Replacement | None:
    """None where the existing ``zarr.json`` says ``document`` already; the root's consolidation brought up to
    date (only if the file still holds what was read); any other difference raises."""
    assert node.existing is not None
    existing = _parsed(node.existing, target)
    wanted = json.loads(_encoded(document))
    if existing == wanted:
        return None
    if not _only_consolidation_differs(node, existing, wanted):
        raise UnconvertibleError("zarr.json exists already and says something else: not overwritten")
    return Replacement(target, _encoded(document), node.existing)


def _only_consolidation_differs(node: _Node, existing: Any, wanted: dict[str, Any]) -> bool:
    """The root group's zarr.json, but for its consolidated metadata (a rerun brings that up to date)."""
    if node.path != "" or ".zmetadata" not in node.names or not isinstance(existing, dict):
        return False
    return {**existing, "consolidated_metadata": None} == {**wanted, "consolidated_metadata": None}


def _remove_v2_metadata(files: Files, nodes: dict[str, _Node], options: _Options, report: ConversionReport) -> None:
    """The v2 metadata files of every node, in batches, ``.zmetadata`` last (v2 readers of it find the chunks
    to the end)."""
    for last in (False, True):
        paths = {
            f"{node.folder}/{name}": f"{node.path}/{name}".lstrip("/")
            for node in nodes.values()
            for name in V2_METADATA_FILES
            if name in node.names and (name == ".zmetadata") == last
        }
        for start in range(0, len(paths), BATCH):
            batch = list(paths)[start : start + BATCH]
            failures = {} if options.dry_run else files.remove(batch)
            for path in batch:
                if path in failures:
                    report.failures.append((paths[path], _reason(failures[path])))
                else:
                    report.removed.append(paths[path])


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
