"""The Zarr v3 ``bytes`` codec as a numcodecs codec."""

from __future__ import annotations

import json
import operator
import warnings
from typing import Any, SupportsIndex

import numpy as np
from numcodecs.abc import Codec

from . import swap
from ._threads import SPLIT_BYTES, copied_as, copy_flat_into
from .data_types import dtype_to_json, parse_dtype, same_type, unit_dtype
from .names import CODEC_ID, CODEC_IDS, LEGACY_CODEC_ID, parse_v3_entry, v3_entry
from .swap import ENDIANS, Endian, Layout

__all__ = ["CODEC_ID", "CODEC_IDS", "LEGACY_CODEC_ID", "BytesCodec", "Endian"]

_ndarray = np.ndarray  # looked up once: encode and decode are hot paths
_CONFIG_KEYS = ("endian", "dtype")
# buffer formats of plain bytes: encoded as elements of the codec's dtype
_BYTE_FORMATS = ("B", "b", "c")


def _is_codec_dtype(dtype: np.dtype[Any], resolved: Layout) -> bool:
    """Whether data of ``dtype`` can use the codec's own layout, ``resolved``, as it is.

    Identity first: numpy's built-in dtypes are singletons.
    Equality alone is not trusted for non-native dtypes: some ml_dtypes
    versions find a byte-swapped bfloat16 equal to the native one.
    """
    return dtype is resolved.dtype or (dtype.isnative and dtype == resolved.dtype)


class BytesCodec(Codec):
    """Codec for the Zarr v3 ``bytes`` codec: each element in a fixed byte order.

    Parameters
    ----------
    endian : {'little', 'big'}, optional
        Byte order of the encoded data. Required for data types with multi-byte
        units (``int16``, ``float64``, ``complex64``, UTF-32 strings, structs
        with a multi-byte field, ...); has no effect on single-byte and raw types.
    dtype : dtype-like or str, optional
        The in-memory data type, byte order included: what `decode` returns.
        Any numpy dtype-like, Zarr v3 data type name (``'int32'``, ``'r16'``,
        ``'bfloat16'``) or Zarr v3 data type object as in ``zarr.json``. If
        None, it is taken from the array given to `encode`, or from ``out`` in
        `decode`.

    Raises
    ------
    ValueError
        If ``endian`` is not ``'little'``, ``'big'`` or None, or is None for a
        multi-byte ``dtype``, or ``dtype`` is ``r<N>`` with N not a positive
        multiple of 8.
    TypeError
        If ``dtype`` holds Python objects or variable-length strings.

    Examples
    --------
    >>> import numpy as np
    >>> from numcodecs_bytes import BytesCodec
    >>> codec = BytesCodec(endian="big", dtype="<i4")
    >>> codec
    BytesCodec(endian='big', dtype='<i4')
    >>> encoded = codec.encode(np.array([1, 256], dtype="<i4"))
    >>> bytes(encoded).hex(" ")
    '00 00 00 01 00 00 01 00'
    >>> codec.decode(encoded)
    array([  1, 256], dtype=int32)
    >>> codec.get_config()
    {'id': 'bytes', 'endian': 'big', 'dtype': '<i4'}
    """

    codec_id = CODEC_ID

    def __init__(self, *, endian: Endian | None = None, dtype: Any = None) -> None:
        if endian is not None and (not isinstance(endian, str) or endian not in ENDIANS):
            raise ValueError(f"endian must be 'little', 'big' or None, got {endian!r}")
        self._endian: Endian | None = endian
        self._dtype: np.dtype[Any] | None = None if dtype is None else parse_dtype(dtype)
        # Resolved once, here: a bad combination never reaches encode/decode.
        layout = self._layout = None if self._dtype is None else swap.layout(self._dtype, endian)
        # The common case, for which encode and decode call numpy's copy themselves.
        self._plain_swap = (
            layout
            if layout is not None and layout.plain_swap and layout.dtype is self._dtype
            else None
        )

    # Read-only: the plan above was validated for exactly these values.
    @property
    def endian(self) -> Endian | None:
        """The byte order of the encoded data: ``'little'``, ``'big'`` or None."""
        return self._endian

    @property
    def dtype(self) -> np.dtype[Any] | None:
        """The in-memory dtype the codec serves, or None to take it from the data."""
        return self._dtype

    # -- configuration -------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """The codec's JSON-serialisable config: ``id``, and ``endian``/``dtype`` when set.

        Warns (UserWarning) when there is no ``dtype``: a codec made from such a
        config decodes only into an ``out`` array, which Zarr v2 never passes, so
        an array given this filter could be written but never read.
        """
        if self._dtype is None:
            warnings.warn(
                f"{self!r} has no dtype: a codec made from this config decodes only into an out "
                "array, which zarr never passes to a Zarr v2 filter (such an array could be "
                "written but not read); give dtype= (the array's dtype)",
                UserWarning,
                stacklevel=2,
            )
        return self._config()

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"id": self.codec_id}
        if self.endian is not None:
            config["endian"] = self.endian
        if self.dtype is not None:
            config["dtype"] = dtype_to_json(self.dtype)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BytesCodec:
        """Create a codec from `get_config` output (``id`` may be present or not).

        Raises
        ------
        ValueError
            For keys other than ``id``, ``endian`` and ``dtype``, or an ``id``
            other than ``bytes`` or the legacy ``endian``.
        """
        if not isinstance(config, dict):
            raise TypeError(
                f"a bytes codec config is a dict, got {type(config).__name__}: {config!r}"
            )
        config = dict(config)
        codec_id = config.pop("id", cls.codec_id)
        if not isinstance(codec_id, str) or codec_id not in CODEC_IDS:
            raise ValueError(
                f"not a bytes codec config: id {codec_id!r} (expected 'bytes' or legacy 'endian')"
            )
        unknown = sorted(set(config) - set(_CONFIG_KEYS))
        if unknown:
            raise ValueError(
                f"unknown bytes codec config keys {unknown}; allowed: {', '.join(_CONFIG_KEYS)}"
            )
        return cls(**config)

    @classmethod
    def from_v3(cls, metadata: str | dict[str, Any], dtype: Any = None) -> BytesCodec:
        """Create a codec from a Zarr v3 codec entry of ``zarr.json``.

        Accepts ``"bytes"``, ``{"name": "bytes"}``, ``{"name": "bytes",
        "configuration": {"endian": ...}}``, with or without
        ``must_understand``, and the legacy name ``endian`` in each form.

        Parameters
        ----------
        metadata : str or dict
            The codec entry.
        dtype : dtype-like or str, optional
            The array's data type, as for the constructor.

        Raises
        ------
        ValueError
            For another codec name, unknown keys, or an invalid endian.
        TypeError
            For an entry that is neither a string nor an object.
        """
        return cls(endian=parse_v3_entry(metadata)[1], dtype=dtype)

    def to_v3(self) -> dict[str, Any]:
        """The Zarr v3 codec entry: ``{"name": "bytes", "configuration": {"endian": ...}}``.

        ``{"name": "bytes"}`` when there is no endian to state.
        """
        return v3_entry(CODEC_ID, self.endian)

    def __hash__(self) -> int:
        return hash(json.dumps(self._config(), sort_keys=True))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BytesCodec):
            return self._config() == other._config()
        return isinstance(other, Codec) and self._config() == other.get_config()

    def __repr__(self) -> str:
        params = [f"{key}={value!r}" for key, value in self._config().items() if key != "id"]
        return f"{type(self).__name__}({', '.join(params)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle as the config: validated again on load, stable across versions.
        return (_codec_from_config, (self._config(),))

    # -- encode / decode -----------------------------------------------------

    def _layout_for(self, dtype: np.dtype[Any], what: str, same_byte_order: bool = False) -> Layout:
        """The layout of data whose dtype is not exactly the codec's: another byte order, or no
        codec dtype."""
        if self._dtype is not None:
            if not same_type(dtype, self._dtype):
                raise ValueError(
                    f"{what} has dtype {dtype}, but the codec's dtype is {self._dtype}"
                )
            if same_byte_order and unit_dtype(dtype) != unit_dtype(self._dtype):
                # decode returns the codec's dtype, which a Zarr v2 array views as its own: other
                # values.
                raise ValueError(
                    f"{what} has dtype {dtype}, but the codec's dtype is {self._dtype}, in the "
                    f"other byte order: decode returns {self._dtype}; encode data of that dtype, "
                    f"or give the codec dtype={dtype.str!r}"
                )
        return swap.layout(dtype, self._endian)

    def encode(self, buf: Any) -> np.ndarray[Any, Any]:
        """Encode an array (or a buffer of the codec's dtype) as the spec's bytes.

        A numpy scalar is a 0-d array; a typed buffer (``array.array("f")``, a
        memoryview of ints) is an array of its own element type; plain bytes
        (``bytes``, ``bytearray``, formats ``B``, ``b``, ``c``) are the memory of
        elements of the codec's dtype. Elements go out in the input's memory order when it is C- or
        F-contiguous, else in C order. Without a swap the result is a view of
        the input (no copy); with one, the bytes are swapped in a single pass.
        Bool bytes other than 0x00 and 0x01 are written as 0x01 (numpy reads
        them as True). The input is never modified.

        Returns
        -------
        numpy.ndarray
            A flat array whose buffer is exactly the encoded bytes; its dtype
            states the stored byte order (``bytes(result)`` gives the bytes).
            Types numpy cannot swap or export as a buffer (UTF-32, datetime64,
            structs, ml_dtypes) come as unsigned integers of their units.

        Raises
        ------
        ValueError
            For an array, scalar or typed buffer of another type than the
            codec's dtype, a raw buffer that is not a whole number of
            elements, or multi-byte data with no endian.
        TypeError
            For object arrays, or a raw buffer when the codec has no dtype.
        """
        plain = self._plain_swap
        if plain is not None and type(buf) is _ndarray and buf.dtype is plain.dtype:
            # The common case: one copy, numpy's own or split over threads, called here. Where a
            # copy has pushed the codec out of the caches, each Python step more costs about 1% of a
            # 1 MiB copy (benchmarks/README.md). As below: a 1-D array of any strides in element
            # order; others in memory order where C- or F-contiguous (order "A"), else in C order.
            if buf.ndim == 1:
                if buf.nbytes < SPLIT_BYTES:
                    return buf.astype(plain.stored_dtype)
                return copied_as(buf, plain.stored_dtype)
            if buf.nbytes < SPLIT_BYTES:
                return buf.astype(plain.stored_dtype, "A").ravel("K")
        if type(buf) is _ndarray:
            array = buf
        elif isinstance(buf, _ndarray):
            array = buf.view(_ndarray)
        elif isinstance(buf, np.generic):
            # a numpy scalar is a 0-d array: its dtype is checked as an array's
            array = np.asarray(buf)
        else:
            array = self._raw_or_typed(buf)
        resolved = self._layout
        if resolved is None or not _is_codec_dtype(array.dtype, resolved):
            resolved = self._layout_for(array.dtype, "the array to encode", same_byte_order=True)
        return swap.encode(array, resolved)

    def _raw_or_typed(self, buf: Any) -> np.ndarray[Any, Any]:
        """A buffer to encode: elements of the codec's dtype if it is plain bytes, else an array of
        its own type."""
        try:
            view = memoryview(buf)
        except TypeError:
            raise TypeError(
                "expected an array or a buffer (bytes, bytearray, memoryview, array.array), got "
                f"{type(buf).__name__}"
            ) from None
        if view.format.lstrip("@=<>!") not in _BYTE_FORMATS:
            # A typed buffer (array.array("f"), a memoryview of floats) says what its elements are:
            # they are checked against the codec's dtype as an array's would be, never
            # reinterpreted.
            try:
                return np.asarray(view)
            except (TypeError, ValueError, NotImplementedError):
                raise TypeError(f"cannot read a buffer of format {view.format!r}") from None
        if self._dtype is None:
            raise TypeError(
                f"encoding a raw {type(buf).__name__} needs the codec's dtype; give "
                "BytesCodec(dtype=...)"
            )
        return swap.elements_view(view, self._dtype)

    def decode(self, buf: Any, out: Any = None) -> np.ndarray[Any, Any]:
        """Decode the spec's bytes into an array of the codec's dtype.

        Parameters
        ----------
        buf : buffer-like
            The encoded bytes: exactly a whole number of elements.
        out : numpy.ndarray or writable buffer, optional
            Where to decode to, in its memory order: a contiguous array (any
            shape, C or F order, its dtype the codec's in either byte order),
            or any writable contiguous buffer (``bytearray``, ``memoryview``),
            which receives the elements in the codec's dtype. It must hold
            exactly as many bytes as ``buf``. On any error it is left untouched.

        Returns
        -------
        numpy.ndarray
            ``out`` if it is an array; a flat array of the codec's dtype over
            the memory of a buffer ``out``; else a new flat array of the codec's
            dtype (a view of ``buf`` when no swap is needed).

        Raises
        ------
        ValueError
            On a size mismatch, corrupt bool bytes, a non-contiguous or
            read-only ``out``, or no dtype from either the codec or ``out``.
        TypeError
            For an ``out`` or buffer that holds Python objects or is no buffer.
        """
        plain = self._plain_swap
        if plain is not None and type(buf) is bytes:
            # The common cases, one copy called here (as in encode): into a new array, or into a
            # writable C-contiguous ``out`` of the codec's dtype and exactly as many bytes.
            if out is None:
                if len(buf) % plain.dtype.itemsize == 0:
                    stored = np.frombuffer(buf, plain.stored_dtype)
                    if len(buf) < SPLIT_BYTES:
                        return stored.astype(plain.dtype)
                    return copied_as(stored, plain.dtype)
            elif type(out) is _ndarray and out.dtype is plain.dtype and out.nbytes == len(buf):
                flags = out.flags
                if flags.c_contiguous and flags.writeable:
                    target = out if out.ndim == 1 else out.reshape(-1)
                    stored = np.frombuffer(buf, plain.stored_dtype)
                    if len(buf) < SPLIT_BYTES:
                        target[...] = stored
                    else:
                        # (a writable array never shares the memory of bytes, which are immutable)
                        copy_flat_into(target, stored)
                    return out
        if out is None:
            resolved = self._layout
            if resolved is None:
                raise ValueError("decode needs a dtype: give BytesCodec(dtype=...) or an out array")
            decoded = swap.decode(swap.elements_view(buf, resolved.stored_dtype), resolved)
            return decoded if resolved.memory_dtype is self._dtype else decoded.view(self._dtype)
        target = self._target(out)
        resolved = self._layout
        if resolved is None or not _is_codec_dtype(target.dtype, resolved):
            resolved = self._layout_for(target.dtype, "out")
        swap.decode_into(swap.elements_view(buf, resolved.stored_dtype), resolved, target)
        return out if isinstance(out, _ndarray) else target

    def _target(self, out: Any) -> np.ndarray[Any, Any]:
        """``out`` as a flat writable array in memory order (a view), after every check on it."""
        if isinstance(out, _ndarray):
            array = out if type(out) is _ndarray else out.view(_ndarray)
            # (Its dtype is checked with the layout: object dtypes are refused there.)
            flags = array.flags
            if not flags.forc:
                raise ValueError(
                    f"out must be C- or F-contiguous; got a strided array of shape {array.shape}"
                )
            if not flags.writeable:
                raise ValueError("out is read-only")
            return array if array.ndim == 1 else array.ravel("K")
        if self._dtype is None:
            raise ValueError(
                "decoding into a buffer needs the codec's dtype; give BytesCodec(dtype=...)"
            )
        try:
            view = memoryview(out)
        except TypeError:
            raise TypeError(
                f"out must be a numpy array or a writable buffer, got {type(out).__name__}"
            ) from None
        if view.readonly:
            raise ValueError(f"out is read-only ({type(out).__name__})")
        data = swap.byte_view(view)
        if data.size % self._dtype.itemsize:
            raise ValueError(
                f"out of {data.size} bytes is not a whole number of "
                f"{self._dtype.itemsize}-byte elements of {self._dtype}"
            )
        return data.view(self._dtype)

    def decode_partial(
        self, buf: Any, start: SupportsIndex, nitems: SupportsIndex, out: Any = None
    ) -> np.ndarray[Any, Any]:
        """Decode ``nitems`` elements from element ``start``, reading only their bytes.

        The signature of numcodecs' ``Blosc.decode_partial``. The time taken
        does not depend on the size of ``buf``.

        Raises
        ------
        ValueError
            If the range is outside the buffer, plus everything `decode` raises.
        """
        dtype = self._dtype
        if dtype is None and isinstance(out, _ndarray):
            dtype = out.dtype
        if dtype is None:
            raise ValueError(
                "decode_partial needs a dtype: give BytesCodec(dtype=...) or an out array"
            )
        if dtype.itemsize == 0:
            raise ValueError(f"cannot decode elements of dtype {dtype}: it has zero-sized elements")
        bounds = []
        for name, value in (("start", start), ("nitems", nitems)):
            try:
                number = operator.index(value)  # exact: numpy integers would overflow in arithmetic
            except TypeError:
                number = -1
            if isinstance(value, bool) or number < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
            bounds.append(number)
        first, count = bounds
        data = swap.byte_view(buf)
        total = data.size // dtype.itemsize
        if first + count > total:
            raise ValueError(
                f"elements {first}..{first + count} are out of range: the buffer holds {total} "
                f"elements of {dtype}"
            )
        return self.decode(data[first * dtype.itemsize : (first + count) * dtype.itemsize], out=out)


def _codec_from_config(config: dict[str, Any]) -> BytesCodec:
    return BytesCodec.from_config(config)
