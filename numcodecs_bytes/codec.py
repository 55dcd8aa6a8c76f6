"""The Zarr v3 ``bytes`` codec as a numcodecs codec."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal, NamedTuple

import numpy as np
from numcodecs.abc import Codec

from ._threads import copy_into
from .data_types import DataType, data_type_of, dtype_to_json, needs_endian, numpy_orders, parse_dtype, unit_dtype

__all__ = ["BytesCodec", "Endian"]

Endian = Literal["little", "big"]

_ndarray = np.ndarray  # looked up once: encode and decode are hot paths
_frombuffer = np.frombuffer
_BYTE_ORDER_CHAR: dict[str, Literal["<", ">"]] = {"little": "<", "big": ">"}
_CODEC_NAMES = ("bytes", "endian")  # the Zarr v3 name and the draft's name for it
_CONFIG_KEYS = ("endian", "dtype")
_SMALL_BYTES = 1 << 20  # below this, astype into a fresh array; above, a threaded copy


class _Plan(NamedTuple):
    """How one in-memory dtype moves to and from the stored bytes (for one endian)."""

    row: DataType
    units: np.dtype[Any]  # memory as the units endian orders: the fastest swap for large copies
    wire: np.dtype[Any]  # those units in the stored byte order
    memory: np.dtype[Any]  # memory as whole elements: for small and strided copies
    memory_wire: np.dtype[Any]  # those elements in the stored byte order
    native: bool  # memory is the dtype itself (numpy orders its bytes; ml_dtypes types go via units)
    swaps: bool
    checks: bool  # decoded bytes need checking (bool) or masking (int2/int4)
    plain_swap: bool  # swaps, native and no checks: the common case, tested once on hot paths
    itemsize: int


@lru_cache(maxsize=1024)
def _plan(dtype: np.dtype[Any], endian: Endian | None) -> _Plan:
    row = data_type_of(dtype)
    units = unit_dtype(dtype)
    if endian is None:
        if needs_endian(dtype):
            raise ValueError(
                f"endian is required for data type {row.name} ({dtype}): its {row.swap.value}s are "
                "multi-byte; give endian='little' or endian='big'"
            )
        wire = units
    else:
        wire = units.newbyteorder(_BYTE_ORDER_CHAR[endian])
    # numpy changes the byte order of its own types correctly (per component,
    # code unit and field). ml_dtypes types go through their units, and so do
    # types numpy cannot export as a buffer (datetime64), so that encode
    # always returns a buffer.
    native = numpy_orders(dtype) and _exports_buffer(dtype)
    if native:
        memory = dtype
        memory_wire = dtype if endian is None else dtype.newbyteorder(_BYTE_ORDER_CHAR[endian])
    else:  # these types' units are as wide as their elements
        assert units.itemsize == dtype.itemsize, dtype
        memory, memory_wire = units, wire
    checks = row.max_byte is not None or row.value_bits is not None
    swaps = units != wire
    return _Plan(
        row, units, wire, memory, memory_wire, native, swaps, checks, swaps and native and not checks, dtype.itemsize
    )


def _exports_buffer(dtype: np.dtype[Any]) -> bool:
    try:
        np.empty(0, dtype).data  # noqa: B018 (numpy raises here for datetime64 and user types)
    except (ValueError, TypeError, NotImplementedError):
        return False
    return True


def _same_type(a: np.dtype[Any], b: np.dtype[Any]) -> bool:
    """Equal but for byte order."""
    return a == b or (data_type_of(a) is data_type_of(b) and a.newbyteorder("<") == b.newbyteorder("<"))


def _byte_view(buf: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The bytes of any contiguous buffer as a flat uint8 array, without a copy."""
    if isinstance(buf, np.ndarray):
        if buf.dtype.hasobject:
            raise TypeError(f"cannot decode from an array of dtype {buf.dtype}: it holds Python objects, not bytes")
        if not (buf.flags.c_contiguous or buf.flags.f_contiguous):
            raise ValueError(f"buffer must be contiguous; got a strided array of shape {buf.shape}")
        return buf.ravel("K").view(np.uint8)
    try:
        view = memoryview(buf)
    except TypeError:
        raise TypeError(
            f"expected a buffer (bytes, bytearray, memoryview, array.array, ndarray), got {type(buf).__name__}"
        ) from None
    if not view.c_contiguous:
        raise ValueError(f"buffer must be C-contiguous; got a strided {type(buf).__name__}")
    return np.frombuffer(view if view.format == "B" and view.ndim == 1 else view.cast("B"), dtype=np.uint8)


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

    codec_id = "bytes"

    def __init__(self, *, endian: Endian | None = None, dtype: Any = None) -> None:
        if endian is not None and (not isinstance(endian, str) or endian not in _BYTE_ORDER_CHAR):
            raise ValueError(f"endian must be 'little', 'big' or None, got {endian!r}")
        self._endian: Endian | None = endian
        self._dtype: np.dtype[Any] | None = None if dtype is None else parse_dtype(dtype)
        # Validate once, here: a bad combination never reaches encode/decode.
        self._plan = None if self._dtype is None else _plan(self._dtype, endian)

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
        """The codec's JSON-serialisable config: ``id``, and ``endian``/``dtype`` when set."""
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
        config = dict(config)
        codec_id = config.pop("id", cls.codec_id)
        if codec_id not in _CODEC_NAMES:
            raise ValueError(f"not a bytes codec config: id {codec_id!r} (expected 'bytes' or legacy 'endian')")
        unknown = sorted(set(config) - set(_CONFIG_KEYS))
        if unknown:
            raise ValueError(f"unknown bytes codec config keys {unknown}; allowed: {', '.join(_CONFIG_KEYS)}")
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
        if isinstance(metadata, str):
            metadata = {"name": metadata}
        if not isinstance(metadata, dict):
            raise TypeError(f"a Zarr v3 codec entry is a name or an object, got {metadata!r}")
        name = metadata.get("name")
        if name not in _CODEC_NAMES:
            raise ValueError(f"not a bytes codec: name {name!r} (expected 'bytes' or legacy 'endian')")
        unknown = sorted(set(metadata) - {"name", "configuration", "must_understand"})
        if unknown:
            raise ValueError(f"unknown keys {unknown} in bytes codec metadata")
        configuration = metadata.get("configuration") or {}
        if not isinstance(configuration, dict):
            raise TypeError(f"bytes codec configuration must be an object, got {configuration!r}")
        unknown = sorted(set(configuration) - {"endian"})
        if unknown:
            raise ValueError(f"unknown bytes codec configuration keys {unknown}; allowed: endian")
        return cls(endian=configuration.get("endian"), dtype=dtype)

    def to_v3(self) -> dict[str, Any]:
        """The Zarr v3 codec entry: ``{"name": "bytes", "configuration": {"endian": ...}}``.

        ``{"name": "bytes"}`` when there is no endian to state.
        """
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def __hash__(self) -> int:
        return hash(json.dumps(self.get_config(), sort_keys=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codec) and super().__eq__(other)

    def __repr__(self) -> str:
        params = [f"{key}={value!r}" for key, value in self.get_config().items() if key != "id"]
        return f"{type(self).__name__}({', '.join(params)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle as the config: validated again on load, stable across versions.
        return (_codec_from_config, (self.get_config(),))

    # -- encode / decode -----------------------------------------------------

    def _plan_for(self, dtype: np.dtype[Any], what: str) -> _Plan:
        if self._dtype is not None and not _same_type(dtype, self._dtype):
            raise ValueError(f"{what} has dtype {dtype}, but the codec's dtype is {self._dtype}")
        return _plan(dtype, self._endian)

    def encode(self, buf: Any) -> np.ndarray[Any, Any]:
        """Encode an array (or a buffer of the codec's dtype) as the spec's bytes.

        Elements go out in the input's memory order when it is C- or
        F-contiguous, else in C order. Without a swap the result is a view of
        the input (no copy); with one, the bytes are swapped in a single pass.
        The input is never modified.

        Returns
        -------
        numpy.ndarray
            A flat array whose buffer is exactly the encoded bytes; its dtype
            states the stored byte order (``bytes(result)`` gives the bytes).
            Types numpy cannot export as a buffer (datetime64, ml_dtypes) come
            as unsigned integers of their width.

        Raises
        ------
        ValueError
            For an array of another dtype than the codec's, a raw buffer that
            is not a whole number of elements, or multi-byte data with no endian.
        TypeError
            For object arrays, or a raw buffer when the codec has no dtype.
        """
        if type(buf) is _ndarray:
            array = buf
        elif isinstance(buf, _ndarray):
            array = buf.view(_ndarray)
        elif self._dtype is None:
            raise TypeError(f"encoding a raw {type(buf).__name__} needs the codec's dtype; give BytesCodec(dtype=...)")
        else:
            array = _whole_elements(_byte_view(buf), self._dtype)
        plan = self._plan
        if plan is None or array.dtype != self._dtype:  # (never compare to None: np.dtype(None) is float64)
            plan = self._plan_for(array.dtype, "the array to encode")
        if not array.flags.forc:
            # Strided: gather whole elements and swap them in the same pass.
            encoded = np.empty(array.shape, plan.memory_wire)
            encoded[...] = array if plan.native else array.view(plan.memory)
            return encoded.reshape(-1)
        flat = array.ravel("K")  # a view, in memory order
        if not plan.swaps:
            return flat if plan.native else flat.view(plan.memory)
        if flat.nbytes < _SMALL_BYTES:  # astype has the least overhead
            return (flat if plan.native else flat.view(plan.memory)).astype(plan.memory_wire)
        units = flat.view(plan.units)
        encoded = np.empty(units.shape, plan.wire)
        copy_into(encoded, units)
        return encoded

    def decode(self, buf: Any, out: Any = None) -> np.ndarray[Any, Any]:
        """Decode the spec's bytes into an array of the codec's dtype.

        Parameters
        ----------
        buf : buffer-like
            The encoded bytes: exactly a whole number of elements.
        out : numpy.ndarray, optional
            Contiguous array (any shape, C or F order) to fill in its memory
            order; its dtype may differ from the codec's in byte order only.
            It must hold exactly as many bytes as ``buf``. On any error it is
            left untouched.

        Returns
        -------
        numpy.ndarray
            ``out`` if given, else a flat array of the codec's dtype (a view of
            ``buf`` when no swap is needed).

        Raises
        ------
        ValueError
            On a size mismatch, corrupt bool bytes, a non-contiguous or
            read-only ``out``, or no dtype from either the codec or ``out``.
        TypeError
            For an object ``out`` or buffer.
        """
        plan = self._plan
        if out is None and type(buf) is bytes and plan is not None and plan.plain_swap:
            # The common case (a stored chunk, a swap), with as little Python as possible.
            size = len(buf)
            if size < _SMALL_BYTES and size % plan.itemsize == 0:
                return _frombuffer(buf, plan.memory_wire).astype(plan.memory)
        if out is None:
            dtype = self._dtype
            if plan is None or dtype is None:
                raise ValueError("decode needs a dtype: give BytesCodec(dtype=...) or an out array")
            stored = _stored(buf, plan.memory_wire)
            if plan.checks:
                return _checked(stored.view(np.uint8), plan.row).view(dtype)
            if not plan.swaps:
                return stored if plan.native else stored.view(dtype)
            if stored.nbytes < _SMALL_BYTES:
                decoded = stored.astype(plan.memory)
            else:
                decoded = np.empty(stored.shape, plan.memory)
                copy_into(decoded.view(plan.units), stored.view(plan.wire))
            return decoded if plan.native else decoded.view(dtype)

        target = _writable_target(out)
        plan = self._plan
        if plan is None or target.dtype != self._dtype:
            plan = self._plan_for(target.dtype, "out")
        stored = _stored(buf, plan.memory_wire, expected=target)
        # Everything is checked: nothing below can fail half-way through out.
        if plan.checks:
            _checked(stored.view(np.uint8), plan.row, out=target.view(np.uint8))
        elif stored.nbytes < _SMALL_BYTES:
            (target if plan.native else target.view(plan.memory))[...] = stored
        else:
            copy_into(target.view(plan.units), stored.view(plan.wire))
        return out  # type: ignore[no-any-return]

    def decode_partial(self, buf: Any, start: int, nitems: int, out: Any = None) -> np.ndarray[Any, Any]:
        """Decode ``nitems`` elements from element ``start``, reading only their bytes.

        The signature of numcodecs' ``Blosc.decode_partial``. The time taken
        does not depend on the size of ``buf``.

        Raises
        ------
        ValueError
            If the range is outside the buffer, plus everything `decode` raises.
        """
        dtype = self._dtype if self._dtype is not None else getattr(out, "dtype", None)
        if dtype is None:
            raise ValueError("decode_partial needs a dtype: give BytesCodec(dtype=...) or an out array")
        data = _byte_view(buf)
        total = data.size // dtype.itemsize
        for name, value in (("start", start), ("nitems", nitems)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if start + nitems > total:
            raise ValueError(
                f"elements {start}..{start + nitems} are out of range: the buffer holds {total} elements of {dtype}"
            )
        return self.decode(data[start * dtype.itemsize : (start + nitems) * dtype.itemsize], out=out)


def _whole_elements(data: np.ndarray[Any, np.dtype[np.uint8]], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if data.size % dtype.itemsize:
        raise ValueError(f"buffer of {data.size} bytes is not a whole number of {dtype.itemsize}-byte elements")
    return data.view(dtype)


def _stored(buf: Any, wire: np.dtype[Any], expected: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """The stored elements of ``buf`` as a flat array of ``wire``, without a copy.

    With ``expected`` (the ``out`` of a decode), the byte counts must match.
    """
    if type(buf) is bytes or (type(buf) is _ndarray and buf.flags.c_contiguous and not buf.dtype.hasobject):
        try:  # the common cases, in one call
            stored = np.frombuffer(buf, wire)
        except ValueError:  # a partial element: the slow path words the error
            stored = _whole_elements(_byte_view(buf), wire)
    else:
        stored = _whole_elements(_byte_view(buf), wire)
    if expected is not None and stored.nbytes != expected.nbytes:
        raise ValueError(
            f"buffer of {stored.nbytes} bytes does not match out: "
            f"{expected.size} elements of {expected.dtype} are {expected.nbytes} bytes"
        )
    return stored


def _writable_target(out: Any) -> np.ndarray[Any, Any]:
    """``out`` flattened in memory order (a view), after every check on it."""
    if not isinstance(out, _ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.dtype.hasobject:
        raise TypeError(f"cannot decode into out of dtype {out.dtype}: it holds Python objects")
    if not out.flags.forc:
        raise ValueError(f"out must be C- or F-contiguous; got a strided array of shape {out.shape}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    flat = out.ravel("K")
    return flat if type(flat) is _ndarray else flat.view(_ndarray)


def _checked(
    data: np.ndarray[Any, np.dtype[np.uint8]], row: DataType, out: np.ndarray[Any, Any] | None = None
) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """Single-byte data after the row's checks: corrupt bool bytes raise, int2/int4 upper bits are cleared."""
    if row.max_byte is not None and data.size and int(data.max()) > row.max_byte:
        bad = int(np.flatnonzero(data > row.max_byte)[0])
        raise ValueError(
            f"corrupt {row.name} data: byte {bad} is 0x{int(data[bad]):02x}, "
            f"but {row.name} bytes must be 0x00..0x{row.max_byte:02x}"
        )
    if row.value_bits is not None:
        masked: np.ndarray[Any, np.dtype[np.uint8]] = np.bitwise_and(data, (1 << row.value_bits) - 1, out=out)
        return masked
    if out is None:
        return data
    copy_into(out, data)
    return out


def _codec_from_config(config: dict[str, Any]) -> BytesCodec:
    return BytesCodec.from_config(config)
