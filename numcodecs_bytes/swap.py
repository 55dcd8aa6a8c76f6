"""The swap core: how a dtype's memory becomes the spec's bytes, as plain functions on numpy views.

`layout` resolves a dtype and an ``endian`` once (and caches it): the dtype
to see memory as, the same in the stored byte order, and the checks the data
type needs. Every encode and decode is then one numpy copy between views of
these two dtypes, or no copy at all where they are equal. Both codecs (the
numcodecs one and the Zarr v3 one) use these functions.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Literal, NamedTuple

import numpy as np

from ._threads import copied_as, copy_into, in_parts
from .data_types import data_type_of, leaves, needs_endian, unit_dtype

__all__ = [
    "ENDIANS",
    "Checks",
    "Layout",
    "byte_view",
    "decode",
    "decode_into",
    "elements_view",
    "encode",
    "layout",
]

_UINT8 = np.dtype(np.uint8)
Endian = Literal["little", "big"]
ENDIANS: dict[str, Literal["<", ">"]] = {"little": "<", "big": ">"}


class Checks(NamedTuple):
    """What single-byte values need beyond a copy: runs of (offset, count) within an element."""

    bools: tuple[tuple[int, int], ...]  # bool bytes: only 0x00 and 0x01 are valid
    # int2/int4 bytes (offset, count, mask): upper bits are arbitrary
    masks: tuple[tuple[int, int, int], ...]
    itemsize: int


class Layout(NamedTuple):
    """One in-memory dtype and one endian, resolved: the memory and stored dtypes, and the
    checks."""

    dtype: np.dtype[Any]
    """The in-memory dtype resolved."""
    memory_dtype: np.dtype[Any]
    """The array's memory as numpy swaps it exactly: the dtype itself, or its units
    (`unit_dtype`)."""
    stored_dtype: np.dtype[Any]
    """The same in the stored byte order; the very same object as ``memory_dtype`` when nothing is
    swapped."""
    checks: Checks | None
    """None for every type but bool, int2/int4/uint2/uint4 and structs holding them."""
    plain_swap: bool
    """Whether each encode and decode is one numpy copy between ``dtype`` and ``stored_dtype`` and
    nothing else: numpy's own numeric types (no units, no checks) in the byte order they are not
    in."""


def layout(dtype: np.dtype[Any], endian: Endian | None) -> Layout:
    """Resolve ``dtype`` for ``endian``: every check on the pair happens here, once (cached).

    Raises
    ------
    ValueError
        If ``endian`` is None for a data type with multi-byte units, or
        `data_type_of` finds a problem with ``dtype``.
    TypeError
        If ``dtype`` is not a data type the codec serves.
    """
    # The byte order is part of the key: some ml_dtypes versions find a swapped dtype
    # equal to the native one (same hash), and the cache must not mix them up.
    return _layout(dtype, dtype.str, endian)


@lru_cache(maxsize=1024)
def _layout(dtype: np.dtype[Any], spelled: str, endian: Endian | None) -> Layout:
    row = data_type_of(dtype)
    if endian is None and needs_endian(dtype):
        raise ValueError(
            f"endian is required for data type {row.name} ({dtype}): its {row.swap.value}s are "
            "multi-byte; give endian='little' or endian='big'"
        )
    # numpy converts plain numeric elements itself at full speed; the table says which types go by
    # their units.
    memory_dtype = unit_dtype(dtype) if row.swap_as_units else dtype
    stored_dtype = memory_dtype if endian is None else memory_dtype.newbyteorder(ENDIANS[endian])
    if stored_dtype == memory_dtype:
        stored_dtype = memory_dtype  # one object: "is" says that nothing is swapped
    runs = list(leaves(dtype))
    bools = tuple((offset, count) for offset, count, leaf in runs if leaf.bool_bytes)
    masks = tuple(
        (offset, count, (1 << leaf.value_bits) - 1)
        for offset, count, leaf in runs
        if leaf.value_bits is not None
    )
    checks = Checks(bools, masks, dtype.itemsize) if bools or masks else None
    plain_swap = memory_dtype is dtype and checks is None and stored_dtype is not memory_dtype
    return Layout(dtype, memory_dtype, stored_dtype, checks, plain_swap)


def _contiguous(buf: Any) -> np.ndarray[Any, Any] | memoryview:
    """Any contiguous buffer as a flat plain ndarray or a C-contiguous memoryview, after every
    check; never a copy."""
    if isinstance(buf, np.ndarray):
        # np.matrix and others: plain bytes
        array = buf if type(buf) is np.ndarray else buf.view(np.ndarray)
        if array.dtype.hasobject:
            raise TypeError(
                f"cannot use an array of dtype {array.dtype} as bytes: it holds Python objects"
            )
        if not array.flags.forc:
            raise ValueError(
                f"buffer must be contiguous; got a strided array of shape {array.shape}"
            )
        return array if array.ndim == 1 else array.ravel("K")
    try:
        view = memoryview(buf)
    except TypeError:
        raise TypeError(
            "expected a buffer (bytes, bytearray, memoryview, array.array, ndarray), got "
            f"{type(buf).__name__}"
        ) from None
    if "O" in view.format:
        raise TypeError(
            f"cannot use a buffer of format {view.format!r} as bytes: it holds Python objects"
        )
    if not view.contiguous:
        raise ValueError(f"buffer must be contiguous; got a strided {type(buf).__name__}")
    if view.c_contiguous:
        return view
    try:  # Fortran-ordered: numpy reads its strides, and its bytes in memory order are a view
        return np.asarray(view).ravel("K")
    except (TypeError, ValueError, NotImplementedError):
        raise ValueError(
            f"cannot use a Fortran-ordered buffer of format {view.format!r}: numpy does not know "
            "the format; give a C-contiguous buffer"
        ) from None


def byte_view(buf: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The bytes of any contiguous buffer, in memory order, as a flat uint8 array (a view, as
    `_contiguous`).

    Raises
    ------
    TypeError
        For objects that are no buffer, and for buffers of Python objects.
    ValueError
        For buffers that are not contiguous.
    """
    return elements_view(buf, _UINT8)


def elements_view(buf: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``buf``'s bytes as a flat array of ``dtype``, without a copy.

    Raises ValueError unless the bytes are a whole number of elements, plus
    everything `byte_view` raises.
    """
    # the common case: nothing else to check
    if type(buf) is bytes and len(buf) % dtype.itemsize == 0:
        return np.frombuffer(buf, dtype)
    data = _contiguous(buf)
    if data.nbytes % dtype.itemsize:
        raise ValueError(
            f"buffer of {data.nbytes} bytes is not a whole number of {dtype.itemsize}-byte elements"
        )
    if isinstance(data, np.ndarray):
        return data if data.dtype is dtype else data.view(dtype)
    return np.frombuffer(data, dtype)


def _runs(
    data: np.ndarray[Any, Any], checks: Checks, offset: int, count: int
) -> np.ndarray[Any, Any]:
    """Bytes ``offset`` to ``offset + count`` of every element of the flat ``data``: flat where that
    is all."""
    if count == checks.itemsize:  # bool, int4, or subarrays of them: every byte, one contiguous run
        return data.view(np.uint8)
    return data.view(np.uint8).reshape(-1, checks.itemsize)[:, offset : offset + count]


def _largest(values: np.ndarray[Any, Any], start: int, stop: int) -> int:
    return int(values[start:stop].max()) if stop > start else 0


def _invalid_bool(data: np.ndarray[Any, Any], checks: Checks) -> tuple[int, int] | None:
    """The position and value of the first bool byte of ``data`` above 0x01, or None."""
    for offset, count in checks.bools:
        # one row per element, or flat: parts by the first axis
        values = _runs(data, checks, offset, count)
        if values.size and max(in_parts(data.nbytes, len(values), partial(_largest, values))) > 1:
            flat = values.reshape(-1)  # (the error path: a copy of a strided run is fine)
            first = int(np.argmax(flat > 1))
            element, position = divmod(first, count)
            return element * checks.itemsize + offset + position, int(flat[first])
    return None


def check_stored(stored: np.ndarray[Any, Any], checks: Checks) -> None:
    """Raise ValueError at the first invalid bool byte of ``stored``."""
    invalid = _invalid_bool(stored, checks)
    if invalid is not None:
        byte, value = invalid
        raise ValueError(
            f"corrupt bool data: byte {byte} is 0x{value:02x}, but bool bytes must be 0x00..0x01"
        )


def _normalised(memory: np.ndarray[Any, Any], checks: Checks) -> np.ndarray[Any, Any]:
    """``memory``, or a copy whose bool bytes are 0x00/0x01: numpy takes any other byte for True."""
    if _invalid_bool(memory, checks) is None:
        return memory
    memory = memory.copy()
    for offset, count in checks.bools:
        values = _runs(memory, checks, offset, count)
        np.not_equal(values, 0, out=values.view(np.bool_))
    return memory


def _mask(target: np.ndarray[Any, Any], checks: Checks) -> None:
    for offset, count, mask in checks.masks:
        values = _runs(target, checks, offset, count)
        np.bitwise_and(values, mask, out=values)


def _copy_masked(
    target: np.ndarray[Any, Any], stored: np.ndarray[Any, Any], checks: Checks
) -> None:
    """``target[...] = stored`` with the upper bits of int2/int4 bytes cleared; both flat, of the
    same bytes."""
    (_, count, mask), *others = checks.masks
    if count == checks.itemsize and not others and not np.may_share_memory(target, stored):
        # Every byte is masked (int2/int4 and their subarrays): masked as it is copied, one pass.
        source, destination = stored.view(np.uint8), target.view(np.uint8)
        in_parts(
            stored.nbytes,
            len(source),
            lambda start, stop: np.bitwise_and(
                source[start:stop], mask, out=destination[start:stop]
            ),
        )
        return
    copy_into(target, stored)  # structs with other fields: masked afterwards, in place
    _mask(target, checks)


def encode(array: np.ndarray[Any, Any], resolved: Layout) -> np.ndarray[Any, Any]:
    """The stored bytes of a plain ndarray as a flat array of ``resolved.stored_dtype``.

    A view of ``array`` where nothing is swapped; else one copy. Elements go in
    memory order (C or F), strided arrays in C order. The input is never modified.
    """
    # (a flat contiguous array is used as it is)
    if array.ndim != 1 or not array.flags.c_contiguous:
        # strided: rare
        array = (array if array.flags.forc else np.ascontiguousarray(array)).ravel("K")
    memory = array if array.dtype is resolved.memory_dtype else array.view(resolved.memory_dtype)
    if resolved.checks is not None:
        memory = _normalised(memory, resolved.checks)
    if resolved.stored_dtype is resolved.memory_dtype:
        return memory
    return copied_as(memory, resolved.stored_dtype)


def decode(stored: np.ndarray[Any, Any], resolved: Layout) -> np.ndarray[Any, Any]:
    """Stored elements back in memory: a flat array of ``resolved.memory_dtype``; a view where
    nothing is swapped."""
    checks = resolved.checks
    if checks is not None:
        check_stored(stored, checks)
        if checks.masks:
            # a copy: the masks must not write to the input
            decoded = np.empty(len(stored), resolved.memory_dtype)
            _copy_masked(decoded, stored, checks)
            return decoded
    if resolved.stored_dtype is resolved.memory_dtype:
        return stored
    return copied_as(stored, resolved.memory_dtype)


def decode_into(
    stored: np.ndarray[Any, Any], resolved: Layout, target: np.ndarray[Any, Any]
) -> None:
    """Decode into ``target``, a flat writable view of the output of the same bytes; checks come
    first."""
    if stored.nbytes != target.nbytes:
        raise ValueError(
            f"buffer of {stored.nbytes} bytes does not match out: "
            f"{target.size} elements of {target.dtype} are {target.nbytes} bytes"
        )
    checks = resolved.checks
    if checks is not None:
        check_stored(stored, checks)
    if target.dtype is not resolved.memory_dtype:
        target = target.view(resolved.memory_dtype)
    # Nothing below can fail: target is only written now, so a failed check leaves it untouched.
    # (That is why bool bytes are read twice, checked and then copied, where they outgrow the
    # caches.)
    if checks is not None and checks.masks:
        _copy_masked(target, stored, checks)
    else:
        copy_into(target, stored)
