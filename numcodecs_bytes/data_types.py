"""The data types of the Zarr v3 ``bytes`` codec and how byte order applies to each.

`DATA_TYPES` is the one table the codec reads: every other decision (does this
type need ``endian``, how are its bytes swapped, how is it spelled in a
config) is derived from it here.

The central idea: a byte-order swap is a permutation of fixed-size *units*
(the element, each component of a complex number, each UTF-32 code unit, each
field of a struct). Viewing memory as unsigned integers of the unit's size
(the "unit dtype") lets numpy swap every type, ml_dtypes ones included, in a
single ``copyto`` from one byte order to the other.
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache, partial
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "DATA_TYPES",
    "DataType",
    "Swap",
    "any_byte_order",
    "data_type_of",
    "dtype_from_json",
    "dtype_to_json",
    "example_dtype",
    "needs_endian",
    "parse_dtype",
    "same_type",
    "unit_dtype",
]


class Swap(enum.Enum):
    """What the ``endian`` parameter reorders the bytes of."""

    ELEMENT = "element"
    COMPONENT = "component"
    CODE_UNIT = "code unit"
    FIELD = "field"
    NOTHING = "nothing"


class DataType(NamedTuple):
    """One row of `DATA_TYPES`.

    Attributes
    ----------
    name : str
        The Zarr v3 data type name.
    dtype : numpy.dtype
        The numpy dtype, little endian where byte order applies. For the
        families sized or parametrised per array (``r*``, strings, datetimes,
        structs) it is the generic member, e.g. ``V`` or ``M8``.
    swap : Swap
        The unit whose bytes ``endian`` orders.
    family : bool
        True for rows that stand for a family of numpy dtypes of one kind.
    value_bits : int or None
        For int2/int4/uint2/uint4: the low bits of each byte that hold the
        value; the upper bits are arbitrary in stored data and are cleared on
        decode (ml_dtypes' own in-memory form).
    bool_bytes : bool
        True for bool: each byte is 0x00 or 0x01. Other bytes are corrupt data
        to decode, and encode writes them as 0x01 (numpy reads any of them as True).
    native_only : bool
        True for ml_dtypes types: numpy holds them in native byte order only
        (its support differs between versions; a swapped bfloat16 may compare
        equal to a native one).
    swap_as_units : bool
        True where the codec copies the type as unsigned integers of its
        units (`unit_dtype`) rather than letting numpy convert the type
        itself: UTF-32 (numpy's own swap of it is slow), datetimes (numpy
        cannot export them as a buffer), structs (their units also carry the
        padding bytes) and ml_dtypes types (numpy does not know their byte order).
    aliases : tuple of str
        Other names in use for the type (zarr-python's ``raw_bytes``, ``structured``).
    from_configuration : callable or None
        For families: turns the ``configuration`` of a Zarr v3 data type
        object (as in ``zarr.json``) into a dtype spec `parse_dtype` reads.
    example : str or None
        For families: a numpy dtype of the family, for help and error messages.
    """

    name: str
    dtype: np.dtype[Any]
    swap: Swap
    family: bool = False
    value_bits: int | None = None
    bool_bytes: bool = False
    native_only: bool = False
    swap_as_units: bool = False
    aliases: tuple[str, ...] = ()
    from_configuration: Callable[[Mapping[str, Any]], Any] | None = None
    example: str | None = None

    @property
    def unit_size(self) -> int | None:
        """Bytes in one swapped unit, or None where it depends on the array."""
        if self.swap is Swap.NOTHING:
            return 1
        if self.swap is Swap.CODE_UNIT:
            return 4
        if self.family:
            return None if self.swap is Swap.FIELD else self.dtype.itemsize
        if self.swap is Swap.COMPONENT:
            return self.dtype.itemsize // 2
        return self.dtype.itemsize


# The ml_dtypes types in the Zarr extension registry. ml_dtypes has more
# (complex32 swaps per component, int1 is not registered): they are left out
# rather than swapped wrongly.
ML_DTYPES_NAMES = (
    "bfloat16",
    *(f"float8_{v}" for v in "e3m4 e4m3 e4m3b11fnuz e4m3fn e4m3fnuz e5m2 e5m2fnuz e8m0fnu".split()),
    *"float4_e2m1fn float6_e2m3fn float6_e3m2fn int2 int4 uint2 uint4".split(),
)


_MAX_COUNT = 2**31 - 1  # numpy's limit for itemsizes and datetime scale factors
# As the extension registry's numpy.datetime64/timedelta64 schemas list them: "μs" is "us" spelled
# as numpy also accepts it, "generic" numpy's unitless type (``<M8``), whose scale factor numpy
# drops.
_TIME_UNITS = tuple("Y M W D h m s ms us μs ns ps fs as generic".split())


def _whole_number(
    configuration: Mapping[str, Any], key: str, default: int | None = None, multiple_of: int = 1
) -> int:
    """``configuration[key]``: an int from 1 to 2**31 - 1 and a multiple of ``multiple_of``, else
    ValueError."""
    value = configuration.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= _MAX_COUNT
        or value % multiple_of
    ):
        multiple = f", a multiple of {multiple_of}" if multiple_of > 1 else ""
        raise ValueError(
            f"{key} must be a whole number from 1 to {_MAX_COUNT}{multiple}, got {value!r}"
        )
    return value


def _time_unit(generic: str, configuration: Mapping[str, Any]) -> str:
    """A datetime64/timedelta64 dtype spec from ``unit`` and ``scale_factor`` (1 where absent)."""
    unit = configuration.get("unit")
    if unit not in _TIME_UNITS:
        raise ValueError(f"unit must be one of {', '.join(_TIME_UNITS)}, got {unit!r}")
    scale_factor = _whole_number(configuration, "scale_factor", default=1)
    return generic if unit == "generic" else f"{generic}[{scale_factor}{unit}]"


def _struct_fields(configuration: Mapping[str, Any]) -> list[Any]:
    """A struct's fields: each ``[name, data_type]`` (zarr 3.1) or ``{"name", "data_type"}`` (zarr
    3.3+)."""
    fields = configuration["fields"]
    if not isinstance(fields, list):
        raise TypeError(f"fields must be a list, got {fields!r}")
    return [
        [field["name"], field["data_type"]] if isinstance(field, Mapping) else field
        for field in fields
    ]


def _rows() -> list[DataType]:
    E, C, N = Swap.ELEMENT, Swap.COMPONENT, Swap.NOTHING
    rows = [
        DataType("bool", np.dtype("|b1"), N, bool_bytes=True),
        DataType("int8", np.dtype("|i1"), N),
        DataType("int16", np.dtype("<i2"), E),
        DataType("int32", np.dtype("<i4"), E),
        DataType("int64", np.dtype("<i8"), E),
        DataType("uint8", np.dtype("|u1"), N),
        DataType("uint16", np.dtype("<u2"), E),
        DataType("uint32", np.dtype("<u4"), E),
        DataType("uint64", np.dtype("<u8"), E),
        DataType("float16", np.dtype("<f2"), E),
        DataType("float32", np.dtype("<f4"), E),
        DataType("float64", np.dtype("<f8"), E),
        DataType("complex64", np.dtype("<c8"), C),
        DataType("complex128", np.dtype("<c16"), C),
        DataType(
            "numpy.datetime64",
            np.dtype("<M8"),
            E,
            family=True,
            swap_as_units=True,
            from_configuration=partial(_time_unit, "<M8"),
            example="<M8[ns]",
        ),
        DataType(
            "numpy.timedelta64",
            np.dtype("<m8"),
            E,
            family=True,
            swap_as_units=True,
            from_configuration=partial(_time_unit, "<m8"),
            example="<m8[s]",
        ),
        DataType(
            "r*",
            np.dtype("V"),
            N,
            family=True,
            aliases=("raw_bytes",),
            from_configuration=lambda c: f"V{_whole_number(c, 'length_bytes')}",
            example="r32",
        ),
        DataType(
            "null_terminated_bytes",
            np.dtype("S"),
            N,
            family=True,
            from_configuration=lambda c: f"S{_whole_number(c, 'length_bytes')}",
            example="S16",
        ),
        DataType(
            "fixed_length_utf32",
            np.dtype("<U"),
            Swap.CODE_UNIT,
            family=True,
            swap_as_units=True,
            from_configuration=lambda c: (
                f"<U{_whole_number(c, 'length_bytes', multiple_of=4) // 4}"
            ),
            example="<U8",
        ),
        DataType(
            "struct",
            np.dtype([]),
            Swap.FIELD,
            family=True,
            swap_as_units=True,
            aliases=("structured",),
            from_configuration=_struct_fields,
            example="[('x', '<i4'), ('y', '<f8')]",
        ),
    ]
    try:
        import ml_dtypes
    except ImportError:  # optional extra: these types exist only with it
        return rows
    for name in ML_DTYPES_NAMES:
        dtype = np.dtype(getattr(ml_dtypes, name))
        bits = re.fullmatch(r"u?int([24])", name)
        rows.append(
            DataType(
                name,
                dtype,
                E if dtype.itemsize > 1 else N,
                value_bits=int(bits.group(1)) if bits else None,
                native_only=True,
                swap_as_units=True,
            )
        )
    return rows


DATA_TYPES: Mapping[str, DataType] = types.MappingProxyType({row.name: row for row in _rows()})
"""Zarr v3 data type name -> `DataType`: the data types the codec supports."""

_BY_NAME = {name: row for row in DATA_TYPES.values() for name in (row.name, *row.aliases)}
_FIXED_BY_NUMPY_NAME = {row.dtype.name: row for row in DATA_TYPES.values() if not row.family}
# By numpy's own scalar type, so that other void-kind types (ml_dtypes' int1, say) are
# not taken for raw bytes. np.void stands for both r* and struct: structs have fields.
_FAMILY_BY_TYPE = {
    row.dtype.type: row for row in DATA_TYPES.values() if row.family and row.name != "struct"
}
_RAW_BITS = re.compile(r"r([0-9]+)")


def data_type_of(dtype: np.dtype[Any]) -> DataType:
    """Return the `DATA_TYPES` row of a numpy dtype, after checking that the codec can serve it.

    Raises
    ------
    TypeError
        For dtypes the codec cannot serve: object, variable-length strings,
        subarray dtypes, and dtypes of unknown kinds.
    ValueError
        For zero-sized elements, datetimes with a scale factor below 1, ml_dtypes
        types not in native byte order, and struct layouts with titles or with
        overlapping or out-of-order fields.
    """
    if not isinstance(dtype, np.dtype):
        raise TypeError(f"expected a numpy dtype, got {type(dtype).__name__}")
    if dtype.hasobject:
        raise TypeError(
            f"dtype {dtype} holds Python objects or variable-length data; the bytes codec needs "
            "fixed-size elements"
        )
    if dtype.fields is not None:
        row = DATA_TYPES["struct"]
        _check_struct_layout(dtype)
    elif dtype.subdtype is not None:
        raise TypeError(
            f"subarray dtype {dtype} is not a data type; use its base {dtype.subdtype[0]}"
        )
    else:
        found = _FAMILY_BY_TYPE.get(dtype.type) or _FIXED_BY_NUMPY_NAME.get(dtype.name)
        if found is None:
            raise TypeError(
                f"dtype {dtype} (kind {dtype.kind!r}) has no fixed-size binary representation "
                f"in the bytes codec; supported: {', '.join(DATA_TYPES)}"
            )
        row = found
    if dtype.itemsize == 0:
        raise ValueError(
            f"dtype {dtype} has zero-sized elements; give a size, e.g. {example_dtype(row)!r}"
        )
    if dtype.kind in "Mm":
        _, count = np.datetime_data(dtype)
        if count < 1:  # numpy builds M8[0s], and dies of SIGFPE on using it
            raise ValueError(
                f"dtype {dtype} needs a scale factor of 1 or more, e.g. {example_dtype(row)!r}"
            )
    if row.native_only and not dtype.isnative:
        raise ValueError(
            f"dtype {dtype} is in non-native byte order, which {row.name} does not keep in numpy; "
            "use the native dtype"
        )
    return row


def _check_struct_layout(dtype: np.dtype[Any]) -> None:
    """Structs are served when each byte belongs to at most one field, fields in memory order, no
    titles."""
    assert dtype.fields is not None
    end = 0
    for name in dtype.names or ():
        field, offset, *title = dtype.fields[name]
        if title:
            raise ValueError(
                f"struct dtype {dtype}: field {name!r} has a title; the bytes codec "
                "serves fields without"
            )
        if offset < end:
            raise ValueError(
                f"struct dtype {dtype}: field {name!r} at byte {offset} overlaps or precedes the "
                f"previous field (ending at byte {end}); give fields in memory order without "
                "overlap (numpy.lib.recfunctions.repack_fields makes such a copy)"
            )
        end = offset + field.itemsize
        data_type_of(field.subdtype[0] if field.subdtype else field)
    if end > dtype.itemsize:
        raise ValueError(
            f"struct dtype {dtype}: fields end at byte {end}, past its itemsize {dtype.itemsize}"
        )


def leaves(dtype: np.dtype[Any], offset: int = 0) -> Iterator[tuple[int, int, DataType]]:
    """The runs of plain values in one element of ``dtype``: (byte offset, count, row).

    A plain dtype is one run of one value; a struct yields its fields' runs, a
    subarray field of a plain type one run of all its values.
    """
    if dtype.fields is not None:
        for name in dtype.names or ():
            field, field_offset, *_ = dtype.fields[name]
            yield from leaves(field, offset + field_offset)
    elif dtype.subdtype is not None:
        base, shape = dtype.subdtype
        count = int(np.prod(shape))
        if base.fields is None:
            yield offset, count, data_type_of(base)
        else:
            for i in range(count):
                yield from leaves(base, offset + i * base.itemsize)
    else:
        yield offset, 1, data_type_of(dtype)


@lru_cache(maxsize=512)
def unit_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The same memory seen as the units `endian` orders, in ``dtype``'s byte order.

    An unsigned integer of the unit's size for plain types (``>c16`` ->
    ``>u8``: twice as many units as elements), ``|u1`` where byte order does not
    apply, and for structs a struct of the same layout whose leaves are unit
    dtypes, with the bytes between and after fields as ``u1`` fields of their
    own, so that a copy carries them too (never uninitialised memory).
    Converting a view of this dtype into the other byte order swaps exactly
    the bytes the spec says, in one pass.
    """
    row = data_type_of(dtype)
    if row.swap is Swap.FIELD:
        assert dtype.fields is not None
        names: list[str] = []
        formats: list[Any] = []
        offsets: list[int] = []

        def add(name: str, units: Any, offset: int) -> None:
            names.append(name)
            formats.append(units)
            offsets.append(offset)

        end = 0
        for name in dtype.names or ():
            field, offset, *_ = dtype.fields[name]
            if offset > end:
                add(f"\x00padding at {end}", (np.uint8, (offset - end,)), end)
            base, shape = field.subdtype or (field, ())
            units = unit_dtype(base)
            # Fields keep their size: c16 -> (u8, 2), S3 -> (u1, 3).
            per_element = base.itemsize // units.itemsize
            add(
                name,
                (units, (*shape, per_element))
                if per_element > 1
                else (units, shape)
                if shape
                else units,
                offset,
            )
            end = offset + field.itemsize
        if dtype.itemsize > end:
            add(f"\x00padding at {end}", (np.uint8, (dtype.itemsize - end,)), end)
        return np.dtype(
            {"names": names, "formats": formats, "offsets": offsets, "itemsize": dtype.itemsize}
        )
    size = row.unit_size or dtype.itemsize
    if size == 1:
        return np.dtype("|u1")
    # ml_dtypes scalars report '=' whatever their origin: they are native.
    order = "=" if dtype.byteorder == "|" else dtype.byteorder
    return np.dtype(f"u{size}").newbyteorder(order)


def same_type(a: np.dtype[Any], b: np.dtype[Any]) -> bool:
    """Whether two dtypes are the same data type, but for byte order.

    >>> same_type(np.dtype("<i4"), np.dtype(">i4")), same_type(np.dtype("<i4"), np.dtype("<u4"))
    (True, False)
    """
    return a == b or (
        data_type_of(a) is data_type_of(b) and a.newbyteorder("<") == b.newbyteorder("<")
    )


def any_byte_order(dtype: np.dtype[Any]) -> bool:
    """Whether numpy holds ``dtype`` in either byte order: no leaf of it is
    `DataType.native_only`."""
    return not any(row.native_only for *_, row in leaves(dtype))


def needs_endian(dtype: np.dtype[Any]) -> bool:
    """Whether byte order applies to ``dtype`` (any unit wider than one byte)."""
    units = unit_dtype(dtype)
    return units.newbyteorder("<") != units.newbyteorder(">")


def parse_dtype(spec: Any) -> np.dtype[Any]:
    """Turn a Zarr v3 data type name or any numpy dtype-like into a numpy dtype.

    Zarr names come first (``"int32"``, ``"r16"``, ``"bfloat16"``), then Zarr
    v3 data type objects as ``zarr.json`` holds them (``{"name":
    "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}``);
    anything else goes to `numpy.dtype`, with JSON-decoded structured
    descriptions (lists in place of tuples) accepted too.

    Raises
    ------
    TypeError
        Object and variable-length dtypes, and values that are no dtype.
    ValueError
        ``r<N>`` with N not a positive multiple of 8 (or spelled with leading zeros), names that
        need a size or unit, and types that need ml_dtypes when it is not installed.
    """
    if isinstance(spec, dict) and "name" in spec:  # a Zarr v3 data type object, as in zarr.json
        return _from_v3_object(spec)
    if isinstance(spec, str):
        raw = _RAW_BITS.fullmatch(spec)
        if raw:
            bits = int(raw.group(1))
            if bits <= 0 or bits % 8 or bits // 8 > _MAX_COUNT:
                raise ValueError(
                    f"raw data type {spec!r}: the number of bits must be a positive multiple of 8 "
                    f"up to {8 * _MAX_COUNT}, got {bits}"
                )
            # one spelling only, so that a config reads back as it was written
            if raw.group(1) != str(bits):
                raise ValueError(f"raw data type {spec!r}: write it r{bits}")
            return np.dtype(f"V{bits // 8}")
        row = _BY_NAME.get(spec)
        if row is not None and row.family:
            raise ValueError(
                f"data type {spec!r} needs a size or unit; give a numpy dtype instead, e.g. "
                f"{example_dtype(row)!r}"
            )
        if row is None and spec in ML_DTYPES_NAMES:
            raise ValueError(
                f"data type {spec!r} needs ml_dtypes: pip install 'numcodecs-bytes[ml_dtypes]'"
            )
    try:
        dtype = dtype_from_json(spec)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"not a data type: {spec!r} ({exc})") from None
    data_type_of(dtype)  # rejects what the codec cannot serve
    return dtype


def _from_v3_object(spec: Mapping[str, Any]) -> np.dtype[Any]:
    """``{"name": ..., "configuration": {...}}``: the form zarr.json gives parametrised types."""
    name = spec["name"]
    row = _BY_NAME.get(name) if isinstance(name, str) else None
    if row is None:
        raise ValueError(
            f"unknown Zarr v3 data type {spec['name']!r}; supported: {', '.join(DATA_TYPES)}"
        )
    if row.from_configuration is None:
        return parse_dtype(row.name)
    configuration = spec.get("configuration", {})
    if not isinstance(configuration, Mapping):
        raise TypeError(
            f"configuration of Zarr v3 data type {row.name!r} must be an object, got "
            f"{configuration!r}"
        )
    try:
        return parse_dtype(row.from_configuration(configuration))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"invalid configuration for Zarr v3 data type {row.name!r}: {spec!r} ({exc})"
        ) from None


def example_dtype(row: DataType) -> str:
    """A numpy dtype of the row, e.g. ``<U8`` for fixed_length_utf32."""
    if row.example is not None:
        return row.example
    return row.dtype.str if _str_is_exact(row.dtype) else row.name


def dtype_to_json(dtype: np.dtype[Any]) -> str | list[Any]:
    """The JSON form of a dtype that `dtype_from_json` turns back into it.

    ``dtype.str`` where that is exact; the Zarr name for ml_dtypes types (whose
    ``str`` is a bare ``V``); for structs, numpy's ``descr`` as lists
    (``[name, dtype]`` or ``[name, dtype, shape]``, padding as ``["", "|V<n>"]``)
    with each field's dtype in this same form.
    """
    if dtype.fields is not None:
        fields: list[list[Any]] = []
        for name, padding_or_format, *_ in dtype.descr:
            if name == "":  # padding keeps the layout
                fields.append(["", padding_or_format])
                continue
            field = dtype.fields[name][0]
            if field.subdtype is not None:
                fields.append([name, dtype_to_json(field.subdtype[0]), list(field.subdtype[1])])
            else:
                fields.append([name, dtype_to_json(field)])
        return fields
    return dtype.str if _str_is_exact(dtype) else data_type_of(dtype).name


def _str_is_exact(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype.str`` names ``dtype`` (not so for ml_dtypes: ``<V2``, ``<f1``)."""
    try:
        return np.dtype(dtype.str) == dtype
    except TypeError:
        return False


def dtype_from_json(spec: Any) -> np.dtype[Any]:
    """Inverse of `dtype_to_json`; also accepts anything `numpy.dtype` does."""
    if isinstance(spec, list):
        names: list[str] = []
        formats: list[Any] = []
        offsets: list[int] = []
        offset = 0
        for field in spec:
            if not isinstance(field, (list, tuple)) or len(field) not in (2, 3):
                raise ValueError(
                    f"struct field must be [name, dtype] or [name, dtype, shape], got {field!r}"
                )
            base = parse_dtype(field[1])
            shape = field[2] if len(field) == 3 else ()
            sub = (
                np.dtype((base, (shape,) if isinstance(shape, int) else tuple(shape)))
                if shape
                else base
            )
            if field[0] != "":  # "" is padding: it only moves the offset
                names.append(field[0])
                formats.append(sub)
                offsets.append(offset)
            offset += sub.itemsize
        return np.dtype(
            {"names": names, "formats": formats, "offsets": offsets, "itemsize": offset}
        )
    if isinstance(spec, str) and spec in DATA_TYPES and not DATA_TYPES[spec].family:
        return DATA_TYPES[spec].dtype
    dtype: np.dtype[Any] = np.dtype(spec)
    return dtype
