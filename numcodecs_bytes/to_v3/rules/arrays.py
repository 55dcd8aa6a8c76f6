"""Zarr v2 metadata as Zarr v3 metadata: the rules, as functions of the metadata alone.

A node's ``.zarray`` (None for a group) and ``.zattrs`` go in; its
``zarr.json`` document and what to tell the user come out (`Conversion`).
Nothing here reads or writes a store. zarr-python's own mapping
(``zarr.metadata.migrate_v3``) does the core: data type, chunk grid, ``v2``
chunk key encoding, ``order="F"`` as a ``transpose`` codec, compressors. These
rules add what it refuses or loses for the stores that exist:

- This codec's filter (ids ``bytes`` and legacy ``endian``) is folded: a v2
  array of ``<i4`` whose last filter writes big endian stores exactly what a
  v2 array of ``>i4`` with no filter stores, which maps to the serializer
  ``{"name": "bytes", "configuration": {"endian": "big"}}``. Only the last
  filter folds (the filters after it would work on swapped values).
- xarray's arrays (``_ARRAY_DIMENSIONS``, or NCZarr's ``dimrefs``) are
  written as xarray writes Zarr v3 (`xarray`): the names in
  ``dimension_names``, and as the ``_FillValue`` attribute what xarray masked
  with on v2.
- Object arrays of strings (object codec ``vlen-utf8`` or ``vlen-bytes``):
  their chunks are exactly those of a v3 array of data type ``string``
  (``variable_length_bytes``) with that codec as serializer.
- A null fill value (v2 leaves missing chunks undefined) becomes the data
  type's default, which zarr 3 fills with when given none.
- Struct data types: the serializer's endian is their fields' byte order.

What no v3 metadata says right, or what the installed zarr-python reads
wrong, raises `UnconvertibleError` with the reason. What reads right only on
newer zarr-python releases comes back with `Conversion.readers`.
"""

from __future__ import annotations

import base64
import json
import math
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...codec import BytesCodec
from ...data_types import dtype_from_json, needs_endian, same_type
from ...names import CODEC_ID, CODEC_IDS, v2_id, v3_entry, v3_name
from ...problems import Problem
from ...swap import ENDIANS, Endian
from ...zarr_versions import FILTERS_GET_NATIVE_ARRAYS, STRUCT_FIELDS_BY_ENDIAN, release, zarr_has
from .._zarr_api import zarr_api
from .xarray import XARRAY_DIMENSIONS, xarray_conventions

__all__ = [
    "LARGEST",
    "XARRAY_DIMENSIONS",
    "Conversion",
    "ReadersNeed",
    "UnconvertibleError",
    "array_document",
    "check_grid",
    "group_document",
    "v3_encoding",
]

_NATIVE: Endian = "little" if sys.byteorder == "little" else "big"
_STRING_CODECS = {"vlen-utf8", "vlen-bytes"}
"""Object codecs whose chunks are those of a Zarr v3 string (bytes) array with that codec as
serializer."""


class UnconvertibleError(Problem):
    """A node that cannot be converted as it is (the message says why): a ValueError."""


class ReadersNeed(NamedTuple):
    """An array whose v3 metadata reads right only from a zarr-python release on."""

    since: tuple[int, ...]  # the first release that reads it right
    why: str  # what releases before it do


@dataclass(frozen=True)
class Conversion:
    """One node's ``zarr.json`` document and what to tell about it."""

    document: dict[str, Any]
    notes: tuple[str, ...] = ()  # zarr's warnings and what was assumed
    # e.g. "filters[0] 'bytes' (endian big)", where this codec's filter was folded
    folded: str | None = None
    readers: ReadersNeed | None = None  # where older zarr-python releases read it wrong


def group_document(zattrs: Mapping[str, Any]) -> Conversion:
    """A v2 group's ``zarr.json`` document, from its attributes."""
    zarr = zarr_api()
    metadata = zarr.group(attributes={}, zarr_format=3)
    return Conversion(_with_attributes(_document(metadata), zattrs, None))


LARGEST = 2**63 - 1
"""The largest extent or chunk length an array may have (zarr and tensorstore index in int64)."""


def check_grid(zarray: Mapping[str, Any]) -> None:
    """The numbers a ``.zarray`` gives its grid, checked before anything is computed from them: its
    shape whole numbers of 0 or more, its chunks of 1 or more, one per dimension, none past int64
    (zarr 3.1 refuses a chunk of 0, zarr 3.4 reads it as 1: neither is what the file says).

    Raises
    ------
    UnconvertibleError
        Naming the numbers.

    >>> check_grid({"shape": [10], "chunks": [0]})
    Traceback (most recent call last):
    ...
    numcodecs_bytes.to_v3.rules.arrays.UnconvertibleError: .zarray's chunks [0] are not whole ...
    """
    shape: Any = zarray.get("shape")
    chunks: Any = zarray.get("chunks")

    def whole(values: Any, least: int) -> bool:
        return isinstance(values, list) and all(
            isinstance(n, int) and not isinstance(n, bool) and least <= n <= LARGEST for n in values
        )

    if not whole(shape, 0):
        raise UnconvertibleError(
            f".zarray's shape {shape!r} is not a list of whole numbers from 0 to 2**63-1"
        )
    if not whole(chunks, 1) or len(chunks) != len(shape):
        raise UnconvertibleError(
            f".zarray's chunks {chunks!r} are not whole numbers from 1 to 2**63-1, one per "
            f"dimension of its shape {shape!r}"
        )


def array_document(zarray: Any, zattrs: Mapping[str, Any]) -> Conversion:
    """A v2 array's ``zarr.json`` document, from its ``.zarray`` and attributes.

    Raises
    ------
    UnconvertibleError
        If the array cannot be converted as it is: this codec's filter not
        last or in another dtype than the array's, a filter, data type or
        fill value zarr-python cannot convert or would read wrong, bad metadata.
    ImportError
        If zarr-python 3 (with its v2-to-v3 converter) is not installed.

    Examples
    --------
    >>> zarray = {"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<i4", "fill_value": -1,
    ...           "order": "C", "compressor": None, "filters": [{"id": "bytes", "endian": "big"}]}
    >>> conversion = array_document(zarray, {"_ARRAY_DIMENSIONS": ["time"], "units": "K"})
    >>> document = conversion.document
    >>> document["codecs"]
    [{'name': 'bytes', 'configuration': {'endian': 'big'}}]
    >>> document["dimension_names"], document["attributes"]
    (['time'], {'units': 'K', '_FillValue': -1})
    >>> conversion.folded
    "filters[0] 'bytes' (endian big)"
    """
    if not isinstance(zarray, dict) or zarray.get("zarr_format") != 2:
        raise UnconvertibleError(".zarray is not Zarr v2 array metadata")
    check_grid(zarray)
    attributes, dimension_names, xarray_notes = xarray_conventions(zarray, zattrs)
    if _string_codec(zarray) is not None:
        document, string_notes = _string_array(zarray)
        return Conversion(
            _with_attributes(document, attributes, dimension_names), (*string_notes, *xarray_notes)
        )
    source, fold = _folded(zarray)
    _check_integer_fill_value(source)
    zarr = zarr_api()
    notes: list[str] = []
    assumed: list[str] = []
    with _zarr_converting(notes):
        if source.get("fill_value") is None:
            source = {**source, "fill_value": _default_fill_value(source)}
            assumed.append(_null_fill_note(source["fill_value"]))
        document = _document(
            zarr.convert_array(zarr.array_v2.from_dict({**source, "attributes": {}}))
        )
    readers = None
    if isinstance(source["dtype"], list):
        # zarr's converter takes the byte order from the data type, which has none for structs.
        endian, readers = _struct_endian(source["dtype"])
        document = _with_serializer(document, v3_entry(CODEC_ID, endian))
    elif fold is not None and _serializer_endian(document) != fold.endian:
        raise UnconvertibleError(
            f"zarr-python {zarr.version} maps data type {source['dtype']!r} without byte order"
        )
    swapped = _serializer_endian(document)
    if source["filters"] and swapped not in (None, _NATIVE):
        readers = _filters_before_a_swap(swapped)
        document = _filters_in_native_order(document)
    document = _with_attributes(document, attributes, dimension_names)
    return Conversion(
        document,
        (*notes, *assumed, *xarray_notes),
        None if fold is None else fold.description,
        readers,
    )


@contextmanager
def _zarr_converting(warned: list[str]) -> Iterator[None]:
    """zarr-python at work on a conversion: what it warns added to ``warned`` (each once); what it
    raises, an `UnconvertibleError` in its words."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except (ValueError, TypeError, KeyError, NotImplementedError, OverflowError) as exc:
            raise UnconvertibleError(
                f"zarr-python {zarr_api().version} cannot convert it: {exc}"
            ) from None
        finally:
            warned += sorted({str(warning.message) for warning in caught})


def _document(metadata: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        metadata.to_buffer_dict(zarr_api().prototype)["zarr.json"].to_bytes()
    )
    return document


def _with_attributes(
    document: dict[str, Any], attributes: Mapping[str, Any], dimension_names: list[str] | None
) -> dict[str, Any]:
    """``document`` with the node's attributes (and dimension names), where zarr-python puts them.

    The attributes go around zarr's metadata classes, which would copy and
    re-encode them (seconds for attributes of tens of megabytes).
    """
    with_attributes: dict[str, Any] = {}
    for key, value in document.items():
        with_attributes[key] = dict(attributes) if key == "attributes" else value
        if key == "attributes" and dimension_names:  # zarr leaves out empty names (a 0-d array)
            with_attributes["dimension_names"] = dimension_names
    return with_attributes


# -- this codec's filter ---------------------------------------------------------------------------


class _FoldedFilter(NamedTuple):
    description: str  # e.g. "filters[0] 'bytes' (endian big)"
    endian: Endian | None  # what the v3 serializer must say: None where nothing is ordered


def _folded(zarray: dict[str, Any]) -> tuple[dict[str, Any], _FoldedFilter | None]:
    """``zarray`` with this codec's filter folded into its data type, and what was folded."""
    filters = zarray.get("filters") or []
    if not isinstance(filters, list):
        raise UnconvertibleError(f"filters must be a list, got {filters!r}")
    position = position_of_this_codec([v2_id(f) for f in filters])
    if position is None:
        return zarray, None
    try:
        codec = BytesCodec.from_config(filters[position])
        dtype = dtype_from_json(zarray.get("dtype"))
        ordered = needs_endian(dtype)
    except (TypeError, ValueError) as exc:
        raise UnconvertibleError(f"filters[{position}]: {exc}") from None
    if codec.dtype is not None and codec.dtype != dtype:
        # zarr views what the filter decodes as the array's dtype: in another byte order, other
        # values.
        other = " in the other byte order" if same_type(codec.dtype, dtype) else ""
        raise UnconvertibleError(
            f"filters[{position}] has dtype "
            f"{codec.dtype.str if codec.dtype.fields is None else codec.dtype}, but the array's "
            f"dtype is {dtype.str if dtype.fields is None else dtype}{other}: v2 readers view the "
            "decoded values as the array's dtype"
        )
    if codec.endian is None and ordered:
        raise UnconvertibleError(
            f"filters[{position}] has no endian, which data type {dtype} needs"
        )
    stored = dtype if codec.endian is None else dtype.newbyteorder(ENDIANS[codec.endian])
    fold = _FoldedFilter(
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


def position_of_this_codec(filter_ids: list[Any]) -> int | None:
    """Where this codec is among v2 filters (by id): None if not there; only the last filter
    folds."""
    ours = [i for i, codec_id in enumerate(filter_ids) if codec_id in CODEC_IDS]
    if ours and ours != [len(filter_ids) - 1]:
        raise UnconvertibleError(
            f"filters[{ours[0]}] is the bytes codec but not the last filter: the filters after it "
            "work on swapped values, which no Zarr v3 codec chain expresses"
        )
    return ours[0] if ours else None


def _filters_before_a_swap(endian: Any) -> ReadersNeed:
    """What zarr-python before 3.4 does with filters before a bytes codec in the other byte
    order."""
    zarr = zarr_api()
    if not zarr_has(FILTERS_GET_NATIVE_ARRAYS):
        raise UnconvertibleError(
            f"zarr-python {zarr.version} hands the filters before the bytes codec its {endian} "
            "endian data as it is stored, which they would read as native (zarr-python "
            f"{release(FILTERS_GET_NATIVE_ARRAYS)} reads it right)"
        )
    return ReadersNeed(
        FILTERS_GET_NATIVE_ARRAYS,
        f"zarr-python before {release(FILTERS_GET_NATIVE_ARRAYS)} hands its filters (Delta, "
        f"Quantize, ...) the {endian} endian data as stored, which they read as native: wrong "
        "values, no error",
    )


_DTYPE_KEYS = ("dtype", "astype", "encode_dtype", "decode_dtype")
"""numcodecs filters' settings that name a data type (Delta, Quantize, FixedScaleOffset, Categorize,
AsType)."""


def _filters_in_native_order(document: dict[str, Any]) -> dict[str, Any]:
    """The filters before the serializer with the data types they name in native byte order:
    zarr-python 3.4 hands them native arrays (a Delta or Quantize of ``>f8`` views a native array as
    big endian: wrong values, no error), where zarr's mapping keeps the v2 spelling.

    >>> quantize = {"name": "numcodecs.quantize", "configuration": {"digits": 3, "dtype": ">f8"}}
    >>> document = {"codecs": [quantize, {"name": "bytes", "configuration": {"endian": "big"}}]}
    >>> native = _filters_in_native_order(document)
    >>> native["codecs"][0]["configuration"]["dtype"] == np.dtype("=f8").str
    True
    """
    codecs = []
    before_serializer = True
    for codec in document["codecs"]:
        before_serializer = before_serializer and v3_name(codec) != CODEC_ID
        settings = codec.get("configuration") if isinstance(codec, dict) else None
        if before_serializer and isinstance(settings, dict):
            codec = {
                **codec,
                "configuration": {
                    key: _native_dtype(value) if key in _DTYPE_KEYS else value
                    for key, value in settings.items()
                },
            }
        codecs.append(codec)
    return {**document, "codecs": codecs}


def _native_dtype(value: Any) -> Any:
    """A data type's spelling in native byte order (``>f8`` -> ``<f8`` here); anything else as it
    is."""
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except TypeError:
        return value
    return value if dtype is None or dtype.byteorder in ("=", "|") else dtype.newbyteorder("=").str


def _v2_dtype(dtype: np.dtype[Any]) -> Any:
    """A dtype as ``.zarray`` spells it: a string, or a list of fields for structs."""
    return dtype.str if dtype.fields is None else json.loads(json.dumps(dtype.descr))


def _serializer_endian(document: dict[str, Any]) -> Any:
    for codec in document.get("codecs", ()):
        if isinstance(codec, dict) and v3_name(codec) == CODEC_ID:
            return codec.get("configuration", {}).get("endian")
    return None


def _with_serializer(
    document: dict[str, Any], serializer: dict[str, Any], name: str = CODEC_ID
) -> dict[str, Any]:
    """``document`` with its serializer (the codec named ``name``) replaced by ``serializer``."""
    codecs = [serializer if v3_name(codec) == name else codec for codec in document["codecs"]]
    return {**document, "codecs": codecs}


# -- structs ---------------------------------------------------------------------------------------


def _field_orders(dtype: np.dtype[Any]) -> set[Endian]:
    """The byte orders of a struct's multi-byte fields, nested ones included."""
    if dtype.fields is not None:
        return set().union(*(_field_orders(dtype.fields[name][0]) for name in dtype.names or ()))
    if dtype.subdtype is not None:
        return _field_orders(dtype.subdtype[0])
    if not needs_endian(dtype):
        return set()
    return {"big" if dtype.byteorder == ">" else "little" if dtype.byteorder == "<" else _NATIVE}


def _struct_endian(v2_dtype: Any) -> tuple[Endian | None, ReadersNeed | None]:
    """The serializer's endian for a v2 struct data type (its fields' one byte order), and what
    readers need."""
    orders = _field_orders(dtype_from_json(v2_dtype))
    if len(orders) > 1:
        raise UnconvertibleError(
            f"the fields of data type {v2_dtype!r} are in both byte orders: a Zarr v3 bytes codec "
            "has one endian"
        )
    endian = next(iter(orders), None)
    if endian in (None, _NATIVE):
        return endian, None
    since = release(STRUCT_FIELDS_BY_ENDIAN)
    if not zarr_has(STRUCT_FIELDS_BY_ENDIAN):
        raise UnconvertibleError(
            f"zarr-python {zarr_api().version} reads struct fields in native order, but data type "
            f"{v2_dtype!r} is {endian} endian (zarr-python {since} reads it right)"
        )
    why = f"zarr-python before {since} reads struct fields in native order: wrong values, no error"
    return endian, ReadersNeed(STRUCT_FIELDS_BY_ENDIAN, why)


# -- fill values -----------------------------------------------------------------------------------


def _check_integer_fill_value(source: dict[str, Any]) -> None:
    """An integer type's fill value is a whole number in its range (numpy < 2 wraps the others
    silently)."""
    fill_value, spelled = source.get("fill_value"), source.get("dtype")
    if (
        not isinstance(spelled, str)
        or isinstance(fill_value, bool)
        or not isinstance(fill_value, int | float)
    ):
        return
    dtype = np.dtype(spelled)
    if dtype.kind not in "iuMm":
        return
    limits = np.iinfo(dtype if dtype.kind in "iu" else np.int64)
    if (
        not math.isfinite(fill_value)
        or fill_value != int(fill_value)
        or not limits.min <= fill_value <= limits.max
    ):
        raise UnconvertibleError(
            f"fill_value {fill_value!r} is not a whole number in the range of data type "
            f"{dtype.str} ({limits.min}..{limits.max})"
        )


def _default_fill_value(source: dict[str, Any]) -> Any:
    """The v2 spelling of the data type's default scalar: what zarr 3 fills with when given none."""
    data_type = zarr_api().array_v2.from_dict({**source, "fill_value": None}).dtype
    return data_type.to_json_scalar(data_type.default_scalar(), zarr_format=2)


def _null_fill_note(written: Any) -> str:
    return (
        "fill_value null (v2 leaves missing chunks undefined): Zarr v3 needs one, so "
        f"{json.dumps(written)} (the data type's default) is written"
    )


# -- strings of any length -------------------------------------------------------------------------


def _string_codec(zarray: dict[str, Any]) -> str | None:
    """The object codec of an array of strings (``vlen-utf8``, ``vlen-bytes``), None for any other
    array."""
    filters = zarray.get("filters")
    if zarray.get("dtype") != "|O" or not isinstance(filters, list) or not filters:
        return None
    codec = v2_id(filters[0])
    return codec if codec in _STRING_CODECS else None


def _string_array(zarray: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The document of an object array of strings: its object codec as the serializer, no chunk
    changed.

    zarr 2 puts the object codec first among the filters and applies it first
    on write: the chunk is the codec's bytes, then the compressor's. That is a
    v3 array of the same strings with the codec as serializer; zarr's own
    mapping does the rest (order F as a transpose, compressor, chunk keys).
    """
    zarr = zarr_api()
    codec = _string_codec(zarray)
    if len(zarray["filters"]) > 1:
        raise UnconvertibleError(
            f"filters after the object codec {codec!r} work on its bytes, which no Zarr v3 codec "
            "chain expresses"
        )
    notes: list[str] = []
    assumed: list[str] = []
    fill_value = zarray.get("fill_value")
    if fill_value is None:
        assumed.append(_null_fill_note(""))
        fill_value = ""
    elif not isinstance(fill_value, str):
        assumed.append(
            f"fill_value {json.dumps(fill_value)} is no string (zarr 2 gave every data type the "
            'fill value 0): Zarr v3 needs one, so "" is written'
        )
        fill_value = ""
    with _zarr_converting(notes):
        data_type = zarr.array_v2.from_dict({**zarray, "fill_value": None, "attributes": {}}).dtype
        # The rest of the mapping does not depend on the data type: zarr's, for a stand-in of one
        # byte.
        stand_in = {**zarray, "dtype": "|u1", "filters": None, "fill_value": 0, "attributes": {}}
        document = _document(zarr.convert_array(zarr.array_v2.from_dict(stand_in)))
        document["data_type"] = data_type.to_json(zarr_format=3)
        # v2 writes the fill value of bytes in base64
        scalar = (
            base64.standard_b64decode(fill_value)
            if document["data_type"] == "variable_length_bytes"
            else fill_value
        )
        document["fill_value"] = data_type.to_json_scalar(
            data_type.cast_scalar(scalar), zarr_format=3
        )
    return _with_serializer(document, {"name": codec}), [*notes, *assumed]


# -- xarray's encodings, for a dataset written again -----------------------------------------------


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
    when the dataset is written; ``numcodecs-bytes to-v3`` converts a store in
    place instead, with no chunk written.

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
    >>> encoding = {
    ...     "dtype": np.dtype("<f8"),
    ...     "chunks": (4,),
    ...     "compressors": (numcodecs.GZip(level=5),),
    ...     "filters": (BytesCodec(endian="big", dtype="<f8"),),
    ... }
    >>> v3 = v3_encoding(encoding)
    >>> v3["serializer"], v3["filters"], v3["compressors"], v3["chunks"]
    (BytesCodec(endian='big'), None, (GzipCodec(level=5),), (4,))
    """
    zarr = zarr_api()
    from ...zarr3 import BytesCodec as Serializer

    filters = list(encoding.get("filters") or ())
    v3 = dict(encoding)
    if position_of_this_codec([getattr(f, "codec_id", None) for f in filters]) is not None:
        v3["serializer"] = Serializer(endian=filters.pop().endian)
    v3["filters"] = tuple(zarr.convert_filters(tuple(filters))) or None
    if encoding.get("compressors"):
        data_type = zarr.data_type(np.dtype(encoding["dtype"]))
        v3["compressors"] = tuple(
            zarr.convert_compressor(c, data_type) for c in encoding["compressors"]
        )
    return v3
