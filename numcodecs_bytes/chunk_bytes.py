"""A chunk's stored bytes, for the Zarr v3 codec: the plan to decode one, and the block of it a
selection needs.

Resolved once per data type, chunk shape and endian (`chunk_plan`); plain
numpy, no zarr.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from . import swap
from .data_types import any_byte_order
from .swap import ENDIANS, Endian

__all__ = [
    "SELECTS_NOTHING",
    "Block",
    "ChunkPlan",
    "block",
    "check_length",
    "chunk_plan",
    "decoded",
]


class ChunkPlan(NamedTuple):
    """What a chunk's decode needs, resolved once per data type, chunk shape and endian."""

    dtype: np.dtype[Any]  # the array's (native) dtype
    shape: tuple[int, ...]
    elements: int  # in the chunk
    nbytes: int
    resolved: swap.Layout
    # where numpy holds the type in either byte order: stored bytes as they are
    swapped_view: np.dtype[Any] | None


@lru_cache(maxsize=256)
def chunk_plan(zarr_dtype: Any, shape: tuple[int, ...], endian: Endian | None) -> ChunkPlan:
    dtype = zarr_dtype.to_native_dtype()
    resolved = swap.layout(dtype, endian)
    count = math.prod(shape)
    swapped_view = None
    if resolved.checks is None and endian is not None and any_byte_order(dtype):
        # zarr copies the chunk into its output: that copy swaps
        swapped_view = dtype.newbyteorder(ENDIANS[endian])
    return ChunkPlan(dtype, shape, count, count * dtype.itemsize, resolved, swapped_view)


def decoded(
    data: np.ndarray[Any, Any], plan: ChunkPlan, nbytes: int, shape: tuple[int, ...], start: int = 0
) -> np.ndarray[Any, Any]:
    """Stored bytes (exactly ``nbytes``, from byte ``start`` of the chunk) as an array of ``shape``.

    A view in the stored byte order wherever numpy can say it (zarr's copy into
    its output then swaps); else decoded by the swap core.
    """
    check_length(data, plan, nbytes, start)
    if plan.swapped_view is not None:
        return swap.elements_view(data, plan.swapped_view).reshape(shape)
    values = swap.decode(swap.elements_view(data, plan.resolved.stored_dtype), plan.resolved)
    return (values if values.dtype == plan.dtype else values.view(plan.dtype)).reshape(shape)


def check_length(data: np.ndarray[Any, Any], plan: ChunkPlan, nbytes: int, start: int) -> None:
    if data.nbytes != nbytes:
        expected = f"{nbytes} bytes expected" + (f" from byte {start}" if start else "")
        raise ValueError(
            f"chunk of {data.nbytes} bytes does not match its shape {plan.shape} of {plan.dtype}: "
            f"{expected}"
        )


class Block(NamedTuple):
    first: int  # the block's first element, in C order
    elements: int
    shape: tuple[int, ...]
    selection: tuple[Any, ...]  # the selection, shifted into the block
    span: tuple[int, int]  # the first and the last element the selection can touch, in C order


SELECTS_NOTHING = Block(0, 0, (), (), (0, -1))


def block(shape: tuple[int, ...], selection: Any) -> Block | None:
    """The contiguous block of a chunk that holds ``chunk[selection]``; None where it is not worked
    out.

    Every selected element lies in the span from the C-order position of the
    lowest index on each axis to that of the highest: only the span is read.

    Handles zarr's chunk selections: per axis an int, a slice with a positive
    step, or an integer or boolean array. Anything else reads the whole chunk.
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) != len(shape) or not shape:
        return None
    lows, highs = [], []
    for index, length in zip(selection, shape, strict=True):
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step < 1:
                return None
            if start >= stop:
                return SELECTS_NOTHING
            low, high = start, start + (stop - 1 - start) // step * step
        elif isinstance(index, (int, np.integer)):
            low = high = int(index) % length
        else:
            positions = np.asarray(index)
            if positions.dtype == np.bool_:
                positions = np.flatnonzero(positions)
            if not np.issubdtype(positions.dtype, np.integer) or positions.ndim != 1:
                return None
            if positions.size == 0:
                return SELECTS_NOTHING
            positions = positions % length
            low, high = int(positions.min()), int(positions.max())
        lows.append(low)
        highs.append(high)
    axis = next((i for i in range(len(shape)) if lows[i] != highs[i]), len(shape) - 1)
    rows = highs[axis] - lows[axis] + 1
    block_shape = (1,) * axis + (rows,) + shape[axis + 1 :]
    corner = (*lows[: axis + 1], *(0 for _ in shape[axis + 1 :]))
    first = int(np.ravel_multi_index(corner, shape))
    shifted = tuple(
        shifted_index(index, lows[i] if i <= axis else 0, shape[i], block_shape[i])
        for i, index in enumerate(selection)
    )
    span = (int(np.ravel_multi_index(lows, shape)), int(np.ravel_multi_index(highs, shape)))
    return Block(first, math.prod(block_shape), block_shape, shifted, span)


def shifted_index(index: Any, low: int, length: int, block_length: int) -> Any:
    """An axis's index into the block, which holds positions ``low`` to ``low + block_length - 1``
    of this axis.

    Normalised even where ``low`` is 0: a negative index counts from the chunk's end, not the
    block's.
    """
    if isinstance(index, slice):
        start, stop, step = index.indices(length)
        # (stop > start >= low: slices selecting nothing end earlier)
        return slice(start - low, stop - low, step)
    if isinstance(index, (int, np.integer)):
        return int(index) % length - low
    positions = np.asarray(index)
    if positions.dtype == np.bool_:
        return positions[low : low + block_length]
    return positions % length - low
