"""The check before a ``zarr.json`` is written: samples of the array read as Zarr v2 and as Zarr v3.

Both reads go through zarr-python, with its own codecs (whatever codec the
process has configured), on the bytes given: a stored chunk, and one element
of a missing chunk (its fill value). They must agree exactly: bytes of each
element (NaNs and -0.0 too), or Python values for strings and objects.

A sample read alike shows the mapping right only where a wrong mapping could
show in it (`shows_the_mapping`): not zeros, not one value throughout, not one
element. Such a sample vouches for the array's other chunks and for the other
arrays read by the same two pipelines (`pipelines_key`); one that cannot show
it vouches for no chunk but its own, so the caller reads the array's next
stored chunk (`store.layout.chunk_indices`), until one shows the mapping or
every stored chunk has been compared (`sampling`).

Memory: a missing chunk's fill value is read as one element, whatever the
chunk's size; a stored chunk is decoded twice (v2, v3), one chunk at a time.
"""

from __future__ import annotations

import json
import mmap
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from ...data_types import needs_endian, same_type
from ...names import CODEC_IDS, v2_id
from ...store.layout import chunk_key, chunk_region
from .._zarr_api import zarr_api
from ..rules.arrays import UnconvertibleError

__all__ = [
    "check_chunk",
    "check_fill_value",
    "check_sharded_chunk",
    "pipelines_key",
    "shows_the_mapping",
]

Buffer: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
"""The bytes of a file as the reads take them: a shard may be a sparse mapping (only what a reader
reads)."""


def pipelines_key(zarray: dict[str, Any]) -> str | None:
    """What decides how an array is read, as v2 and as v3: its whole ``.zarray`` (arrays whose
    ``.zarray`` says the same are read by the same two pipelines). None for data types holding
    objects, whose reads depend on the data as well."""
    return None if "|O" in json.dumps(zarray.get("dtype")) else json.dumps(zarray, sort_keys=True)


def shows_the_mapping(sample: np.ndarray[Any, Any]) -> bool:
    """Whether a sample read alike as v2 and as v3 shows the mapping between them right.

    Only a sample in which a wrong mapping would show: two elements or more,
    not all alike (equal elements read alike whatever the order of axes, the
    filters' arithmetic or the chunk layout); and where byte order applies,
    an element that changes when swapped (else a byte order mistake reads
    alike).
    """
    if sample.size < 2:
        return False
    if sample.dtype.kind in "OT":  # strings of any length: no byte order; Python values
        values = sample.ravel().tolist()
        return any(type(value) is not type(values[0]) or value != values[0] for value in values)
    # A sample tells where a part of it does, and its first few thousand elements nearly always
    # do: the whole only where they do not (a chunk of 32 MiB took 125 ms whole).
    flat = sample.reshape(-1)
    return any(_shows(part) for part in (flat[:_FIRST_ELEMENTS], flat))


_FIRST_ELEMENTS = 4096


def _shows(elements: np.ndarray[Any, Any]) -> bool:
    """`shows_the_mapping` for a flat sample of fixed-size elements."""
    if needs_endian(elements.dtype) and elements.tobytes() == elements.byteswap().tobytes():
        return False
    element_bytes = _element_bytes(elements)
    return bool((element_bytes != element_bytes[:1]).any())


def check_fill_value(zarray: dict[str, Any], document: dict[str, Any]) -> None:
    """Read one element of a missing chunk as v2 and as v3; raise `UnconvertibleError` if they
    differ.

    ``zarray`` is the array's v2 metadata as v2 readers take it (a chunk layout found in the store
    included). Nothing where v2 readers do not agree on it (`_comparable_fill_value`) or the array
    has no element.
    """
    if _comparable_fill_value(zarray) and all(zarray["shape"]):
        _compare(
            zarray,
            document,
            {},
            tuple(slice(0, 1) for _ in zarray["shape"]),
            "the fill value of a missing chunk",
        )


def check_chunk(
    zarray: dict[str, Any],
    document: dict[str, Any],
    index: tuple[int, ...],
    chunk: bytes | Exception | None,
) -> bool:
    """Read the stored chunk at ``index`` (``chunk``: what reading it gave, None where there is
    none) as v2 and as v3; raise `UnconvertibleError` if they differ. Whether it was read and shows
    the mapping."""
    if isinstance(chunk, Exception):
        raise chunk
    if chunk is None:
        return False
    region = chunk_region(zarray, index)
    what = "chunk 0" if not any(index) else f"chunk {chunk_key(zarray, index)}"
    v2_chunks = {chunk_key(zarray, index): chunk}
    return shows_the_mapping(_compare(zarray, document, v2_chunks, region, what))


def check_sharded_chunk(
    before: tuple[dict[str, Any], Mapping[str, Buffer]],
    after: tuple[dict[str, Any], Mapping[str, Buffer]],
    region: tuple[slice, ...],
    what: str,
) -> None:
    """Read ``region`` (one chunk) through an array's document now and through its new one, each
    with the files its reader reads (document, files by key: only the ranges a reader reads need be
    there); raise `UnconvertibleError` if they differ."""
    zarr = zarr_api()
    first, second = _read_samples(
        [
            ({"zarr.json": _json(before[0]), **before[1]}, 3),
            ({"zarr.json": _json(after[0]), **after[1]}, 3),
        ],
        region,
    )
    if isinstance(first, Exception):
        raise UnconvertibleError(
            f"reading {what} through its zarr.json fails ({type(first).__name__}: {first})"
        )
    if isinstance(second, Exception):
        raise UnconvertibleError(
            f"zarr-python {zarr.version} cannot read {what} through its new shard "
            f"({type(second).__name__}: {second})"
        )
    difference = _difference(first, second)
    if difference is not None:
        raise UnconvertibleError(
            f"its new shard reads {what} otherwise than it reads now: {difference}"
        )


def _compare(
    zarray: dict[str, Any],
    document: dict[str, Any],
    chunks: dict[str, bytes],
    region: tuple[slice, ...],
    what: str,
) -> np.ndarray[Any, Any]:
    """``region`` read as v2 and as v3 from the metadata and ``chunks``; what v2 read, where v3 read
    the same."""
    zarr = zarr_api()
    v2_files, v3_files = {".zarray": _json(_v2_readable(zarray))}, {"zarr.json": _json(document)}
    expected, got = _read_samples(
        [({**v2_files, **chunks}, 2), ({**v3_files, **chunks}, 3)], region
    )
    if isinstance(expected, Exception):
        raise UnconvertibleError(
            f"its conversion cannot be checked: reading {what} as Zarr v2 fails "
            f"({type(expected).__name__}: {expected}); sample_check=False converts without the "
            "check"
        )
    if isinstance(got, Exception):
        raise UnconvertibleError(
            f"zarr-python {zarr.version} cannot read {what} through the converted metadata "
            f"({type(got).__name__}: {got})"
        )
    difference = _difference(expected, got)
    if difference is not None:
        raise UnconvertibleError(
            f"the converted metadata reads {what} otherwise than v2: {difference}"
        )
    sample: np.ndarray[Any, Any] = expected
    return sample


def _comparable_fill_value(zarray: dict[str, Any]) -> bool:
    """Whether v2 readers agree on what a missing chunk holds: not where the fill value is null
    (undefined), nor a number for strings (zarr 2 reads the number, zarr 3 its text; v3 gets the
    empty string)."""
    fill_value = zarray.get("fill_value")
    return fill_value is not None and not (
        zarray.get("dtype") == "|O" and not isinstance(fill_value, str)
    )


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, allow_nan=True).encode("utf-8")


async def _read_sample(
    files: Mapping[str, Buffer], zarr_format: int, region: tuple[slice, ...]
) -> np.ndarray[Any, Any]:
    """``region`` of the array whose metadata and chunks are ``files``, read by zarr-python."""
    zarr = zarr_api()
    store = zarr.memory_store(
        {key: zarr.prototype.buffer.from_bytes(data) for key, data in files.items()}
    )
    array = await zarr.open_array_async(store=store, mode="r", zarr_format=zarr_format)
    return np.asarray(await array.getitem(region))


def _read_samples(
    reads: Sequence[tuple[Mapping[str, Buffer], int]], region: tuple[slice, ...]
) -> list[Any]:
    """Each read of `_read_sample` (a value, or the exception it raised), in one trip to zarr's
    event loop, at once: zarr decodes a compressed chunk in a thread of its own, so the reads'
    decodes overlap (a 32 MiB Blosc chunk read twice: 0.6x the time of one read after the
    other)."""
    zarr = zarr_api()

    async def read(files: Mapping[str, Buffer], zarr_format: int) -> Any:
        try:
            return await _read_sample(files, zarr_format, region)
        except Exception as exc:
            return exc

    async def all_reads() -> list[Any]:
        return list(await zarr.concurrent_map(reads, read))

    with warnings.catch_warnings():
        # e.g. zarr 3.4 on a struct without endian: what it assumes is compared
        warnings.simplefilter("ignore")
        # zarr's own codec, whatever is set
        with zarr.config.set({"codecs.bytes": "zarr.codecs.bytes.BytesCodec"}):
            return list(zarr.sync(all_reads()))


def _element_bytes(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each element's bytes in native order, one row per element (no row for an empty array)."""
    native = np.ascontiguousarray(array, array.dtype.newbyteorder("="))
    return native.reshape(-1).view(np.uint8).reshape(array.size, array.dtype.itemsize)


def _same_bytes(left: np.ndarray[Any, Any], right: np.ndarray[Any, Any]) -> bool:
    """Whether two C-contiguous arrays of the same shape hold the same bytes: compared in the widest
    words that divide them (a chunk of 32 MiB in 6 ms here, 17 ms byte by byte: the comparison's
    own array of results is what costs)."""
    flat_left, flat_right = left.reshape(-1), right.reshape(-1)
    for word in (np.uint64, np.uint32, np.uint16):
        if flat_left.nbytes % np.dtype(word).itemsize == 0:
            return bool(np.array_equal(flat_left.view(word), flat_right.view(word)))
    return bool(np.array_equal(flat_left, flat_right))


def _difference(v2: np.ndarray[Any, Any], v3: np.ndarray[Any, Any]) -> str | None:
    """How two reads of one sample differ (None if they do not): compared by the bytes of each
    element."""
    if v2.shape != v3.shape:
        return f"shape {v2.shape} in v2, {v3.shape} in v3"
    # strings of any length: compared as Python values
    if v2.dtype.kind in "OT" or v3.dtype.kind in "OT":
        left, right = v2.ravel().tolist(), v3.ravel().tolist()
        differing = [
            i
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            if type(a) is not type(b) or a != b
        ]
    else:
        if not same_type(v2.dtype, v3.dtype):
            return f"dtype {v2.dtype} in v2, {v3.dtype} in v3"
        v2_bytes, v3_bytes = _element_bytes(v2), _element_bytes(v3)
        if _same_bytes(v2_bytes, v3_bytes):
            # the common case, at memory speed; which elements differ is asked only where some
            # do (row by row, a reduction over a short axis: 160 ms for a chunk of 32 MiB)
            return None
        differing = np.flatnonzero((v2_bytes != v3_bytes).any(axis=1)).tolist()
    if not differing:
        return None
    first = np.unravel_index(differing[0], v2.shape) if v2.ndim else ()
    index = tuple(int(i) for i in first)
    return (
        f"{len(differing)} of {v2.size} elements differ, first at {index}: v2 reads {v2[index]!r}, "
        f"v3 {v3[index]!r}"
    )


def _v2_readable(zarray: dict[str, Any]) -> dict[str, Any]:
    """``zarray`` as the fold and the string rule read it, for zarr-python to read as v2.

    A filter of ours without a dtype gets the array's: such a filter writes,
    but zarr cannot read through it (it passes no ``out``); v3 is what makes
    the array readable, and it is checked against what the filter means. An
    object array's fill value that is no string (zarr 2 gave every data type
    0) is the empty string that v3 gets: zarr-python 3 cannot open a
    ``vlen-bytes`` array with the fill value 0, and it fills no stored chunk.
    """
    filters = [
        {**f, "dtype": zarray.get("dtype")}
        if v2_id(f) in CODEC_IDS and f.get("dtype") is None
        else f
        for f in zarray.get("filters") or ()
    ]
    readable = {**zarray, "filters": filters or None}
    if (
        zarray.get("dtype") == "|O"
        and zarray.get("fill_value") is not None
        and not isinstance(zarray["fill_value"], str)
    ):
        readable["fill_value"] = ""
    return readable
