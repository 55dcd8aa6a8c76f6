"""The ``bytes`` codec as a native Zarr v3 codec for zarr-python (the only module that imports zarr).

Registered through the entry point group ``zarr.codecs`` under ``bytes`` and
the legacy name ``endian``. zarr-python's own ``BytesCodec`` cannot parse the
name ``endian`` (``Expected 'bytes'. Got endian instead.``), so when zarr
loads this module for that name, the module points zarr's config key
``codecs.endian`` at this class, if it still holds zarr's default: stores
written with the draft's name then open as they are, with nothing to import or
configure. For ``bytes``, zarr's own class stays the default; choose this one
with ``zarr.config.set({"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"})``
or ``serializer=BytesCodec(endian=...)``.

Examples
--------
>>> import numpy as np, zarr
>>> from numcodecs_bytes.zarr3 import BytesCodec
>>> z = zarr.create_array(store={}, shape=(2, 3), dtype="<i4", serializer=BytesCodec(endian="big"), compressors=None)
>>> z[:] = np.arange(6).reshape(2, 3)
>>> z.metadata.to_dict()["codecs"][0]
{'name': 'bytes', 'configuration': {'endian': 'big'}}
>>> z[1, 1:]
array([4, 5], dtype=int32)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.abc.codec import ArrayBytesCodec, ArrayBytesCodecPartialDecodeMixin
from zarr.abc.store import RangeByteRequest
from zarr.storage import StorePath

from . import swap
from .codec import CODEC_ID, CODEC_IDS, LEGACY_CODEC_ID, parse_v3_entry, v3_entry
from .data_types import numpy_orders
from .swap import ENDIANS, Endian

if TYPE_CHECKING:
    from zarr.abc.store import ByteGetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

__all__ = ["BytesCodec"]

_ZARR_DEFAULT = "zarr.codecs.bytes.BytesCodec"


@dataclass(frozen=True)
class BytesCodec(ArrayBytesCodecPartialDecodeMixin, ArrayBytesCodec):
    """The Zarr v3 ``bytes`` codec: each element in ``endian`` byte order, in C order.

    Parameters
    ----------
    endian : {'little', 'big'}, optional
        Byte order of the stored data. Required (checked when an array is
        created or opened) for data types with multi-byte units: ``int16`` and
        wider, floats, complex, UTF-32 strings, datetimes, structs with a
        multi-byte field. Has no effect on the others.
    name : {'bytes', 'endian'}
        The name written to ``zarr.json``. ``endian`` only for codecs read from
        a legacy store, which keeps that store's metadata as it was; use
        ``numcodecs-bytes migrate`` to upgrade it.

    Notes
    -----
    Decoding checks the exact chunk length and bool bytes, and returns the
    stored bytes as a view in the stored byte order wherever numpy knows it,
    so that zarr's copy into the output does the swap (one pass, no
    temporary). Reading a selection from an uncompressed chunk fetches only the
    bytes from its first to its last element in C order. Data must be in host
    (numpy) memory: other buffers raise TypeError.
    """

    is_fixed_size = True

    endian: Endian | None
    name: str

    def __init__(self, *, endian: Endian | None = None, name: str = CODEC_ID) -> None:
        if endian is not None and (not isinstance(endian, str) or endian not in ENDIANS):
            raise ValueError(f"endian must be 'little', 'big' or None, got {endian!r}")
        if name not in CODEC_IDS:
            raise ValueError(f"name must be {CODEC_ID!r} or the legacy {LEGACY_CODEC_ID!r}, got {name!r}")
        object.__setattr__(self, "endian", endian)
        object.__setattr__(self, "name", name)

    @classmethod
    def from_dict(cls, data: Any) -> BytesCodec:
        """Read a ``zarr.json`` codec entry: ``bytes`` or ``endian``, short or object form."""
        name, endian = parse_v3_entry(data)
        return cls(endian=endian, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The entry written to ``zarr.json``, under the name the codec was read with."""
        return v3_entry(self.name, self.endian)

    def validate(self, *, shape: tuple[int, ...], dtype: Any, chunk_grid: Any) -> None:
        """The spec's rule at array creation: endian is required where it orders something."""
        swap.layout(dtype.to_native_dtype(), self.endian)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> BytesCodec:
        swap.layout(array_spec.dtype.to_native_dtype(), self.endian)  # the same rule when an array is opened
        return self

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        return input_byte_length

    # -- encode / decode ---------------------------------------------------------------------

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        array = _host(chunk_array.as_ndarray_like())
        if not array.flags.c_contiguous:  # the spec's order is C order, whatever the array's memory order
            array = np.ascontiguousarray(array)
        encoded = swap.encode(array, swap.layout(array.dtype, self.endian))
        return chunk_spec.prototype.buffer.from_array_like(encoded.view(np.uint8))

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return _nd_buffer(chunk_spec, self._decode_chunk(_host(chunk_bytes.as_array_like()), chunk_spec))

    def _decode_chunk(self, data: np.ndarray[Any, Any], chunk_spec: ArraySpec) -> np.ndarray[Any, Any]:
        """A whole stored chunk, its exact length checked, as an array of the chunk's shape."""
        dtype = chunk_spec.dtype.to_native_dtype()
        expected = math.prod(chunk_spec.shape) * dtype.itemsize
        if data.nbytes != expected:
            raise ValueError(
                f"chunk of {data.nbytes} bytes does not match its shape {chunk_spec.shape} of {dtype}: "
                f"{expected} bytes expected"
            )
        return self._decode_elements(data, dtype).reshape(chunk_spec.shape)

    def _decode_elements(self, data: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """Stored bytes as a flat array of ``dtype`` in either byte order: a view wherever numpy can say it."""
        resolved = swap.layout(dtype, self.endian)
        stored = swap.elements_view(data, resolved.stored)
        if resolved.checks is None and self.endian is not None and numpy_orders(dtype):
            # zarr copies the chunk into its output anyway: that copy swaps.
            return stored.view(dtype.newbyteorder(ENDIANS[self.endian]))
        decoded = swap.decode(stored, resolved)
        return decoded if decoded.dtype == dtype else decoded.view(dtype)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_array, chunk_spec)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def _decode_partial_single(
        self, byte_getter: ByteGetter, selection: Any, chunk_spec: ArraySpec
    ) -> NDBuffer | None:
        """Read the selected elements of an uncompressed chunk: from a store, only the bytes from the first to the last.

        A chunk fetched whole must have exactly its full length, a byte range
        exactly the range's: a truncated chunk is an error, never other elements.
        """
        if not isinstance(byte_getter, StorePath):
            # Other byte getters hold the chunk in memory already (sharding's inner ones,
            # which refuse byte ranges before zarr 3.1.6): decode it whole.
            return await self._decode_whole(byte_getter, selection, chunk_spec)
        dtype = chunk_spec.dtype.to_native_dtype()
        shape = chunk_spec.shape
        bounds = _bounds(shape, selection)
        if bounds is None:  # selects nothing
            return _nd_buffer(chunk_spec, np.empty(shape, dtype)[selection])
        first, last = bounds
        start, stop = first * dtype.itemsize, (last + 1) * dtype.itemsize
        if start == 0 and stop == math.prod(shape) * dtype.itemsize:
            return await self._decode_whole(byte_getter, selection, chunk_spec)
        chunk_bytes = await byte_getter.get(prototype=chunk_spec.prototype, byte_range=RangeByteRequest(start, stop))
        if chunk_bytes is None:
            return None  # no chunk: zarr fills in the fill value
        data = _host(chunk_bytes.as_array_like())
        if data.nbytes != stop - start:
            raise ValueError(
                f"chunk of shape {shape} of {dtype} is truncated: bytes {start} to {stop} were asked, "
                f"{data.nbytes} bytes came"
            )
        # Decode the span into its place in an empty chunk: memory is only touched where it is written.
        chunk = np.empty(shape, dtype)
        target = chunk.reshape(-1)[first : last + 1]
        resolved = swap.layout(dtype, self.endian)
        swap.decode_into(swap.elements_view(data, resolved.stored), resolved, target)
        return _nd_buffer(chunk_spec, chunk[selection])

    async def _decode_whole(self, byte_getter: ByteGetter, selection: Any, chunk_spec: ArraySpec) -> NDBuffer | None:
        chunk_bytes = await byte_getter.get(prototype=chunk_spec.prototype)
        if chunk_bytes is None:
            return None  # no chunk: zarr fills in the fill value
        return _nd_buffer(chunk_spec, self._decode_chunk(_host(chunk_bytes.as_array_like()), chunk_spec)[selection])


def _nd_buffer(chunk_spec: ArraySpec, array: Any) -> NDBuffer:
    return chunk_spec.prototype.nd_buffer.from_ndarray_like(array)


def _host(array: Any) -> np.ndarray[Any, Any]:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"the bytes codec of numcodecs-bytes works on host (numpy) memory, got {type(array).__name__}")
    return array


def _bounds(shape: tuple[int, ...], selection: Any) -> tuple[int, int] | None:
    """The C-order positions of the first and the last element ``chunk[selection]`` can touch.

    From each axis's lowest and highest index (ints, slices, integer or boolean
    arrays: zarr's chunk selections); None if the selection is empty. Anything
    else spans the whole chunk.
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) != len(shape):
        return (0, int(np.prod(shape)) - 1) if int(np.prod(shape)) else None
    lows, highs = [], []
    for index, length in zip(selection, shape, strict=True):
        if isinstance(index, slice):
            span = range(*index.indices(length))
            if not span:
                return None
            low, high = min(span[0], span[-1]), max(span[0], span[-1])
        elif isinstance(index, (int, np.integer)):
            low = high = int(index) % length if length else 0
        else:
            positions = np.asarray(index)
            if positions.dtype == np.bool_:
                positions = np.flatnonzero(positions)
            if positions.size == 0:
                return None
            if positions.dtype.kind not in "iu":
                return (0, int(np.prod(shape)) - 1)
            low, high = int(positions.min()) % length, int(positions.max()) % length
            if (positions < 0).any():  # negative indices wrap: their order is not the order of positions
                low, high = 0, length - 1
        lows.append(low)
        highs.append(high)
    if not shape:
        return (0, 0)
    return int(np.ravel_multi_index(lows, shape)), int(np.ravel_multi_index(highs, shape))


def _point_zarr_at_this_class_for_the_legacy_name() -> None:
    # zarr's own class can never parse the name "endian": take the name over,
    # unless the user chose an implementation themselves.
    if zarr.config.get(f"codecs.{LEGACY_CODEC_ID}", None) == _ZARR_DEFAULT:
        zarr.config.set({f"codecs.{LEGACY_CODEC_ID}": f"{BytesCodec.__module__}.{BytesCodec.__qualname__}"})


_point_zarr_at_this_class_for_the_legacy_name()
