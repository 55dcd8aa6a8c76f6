"""xarray's conventions in Zarr v2 and in Zarr v3: the rules that make a converted array open in
xarray as before.

xarray reads an array's dimensions from ``_ARRAY_DIMENSIONS`` (or NCZarr's
``dimrefs``) on v2, from ``dimension_names`` on v3; it masks with zarr's fill
value on v2 and with the ``_FillValue`` attribute alone on v3, spelled as its
``FillValueCoder`` writes it. Pure: metadata in, attributes out.
"""

from __future__ import annotations

import base64
import json
import math
import posixpath
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["NCZARR_ARRAY", "XARRAY_DIMENSIONS", "xarray_conventions", "xarray_fill_value"]

XARRAY_DIMENSIONS = "_ARRAY_DIMENSIONS"
"""The attribute in which xarray keeps an array's dimension names in Zarr v2 (v3 has
``dimension_names``)."""

NCZARR_ARRAY = "_NCZARR_ARRAY"
"""The key of a ``.zarray`` in which NCZarr (netCDF-C before 4.8.2, or ``noxarray``) names an
array's dimensions (``dimrefs``, full paths), which xarray reads on v2 where there is no
``_ARRAY_DIMENSIONS``."""


def _xarray_dimensions(zarray: dict[str, Any], zattrs: Mapping[str, Any]) -> tuple[Any, str] | None:
    """The dimension names xarray reads for a v2 array, and where from; None where xarray reads none
    (not its array).

    ``_ARRAY_DIMENSIONS``, else the basenames of NCZarr's ``dimrefs`` in the ``.zarray``, as xarray
    reads them.
    """
    if XARRAY_DIMENSIONS in zattrs:
        return zattrs[XARRAY_DIMENSIONS], XARRAY_DIMENSIONS
    nczarr = zarray.get(NCZARR_ARRAY)
    references = nczarr.get("dimrefs") if isinstance(nczarr, dict) else None
    if isinstance(references, list) and all(isinstance(reference, str) for reference in references):
        return [
            posixpath.basename(reference) for reference in references
        ], f"{NCZARR_ARRAY} dimrefs"
    return None


def xarray_conventions(
    zarray: dict[str, Any], zattrs: Mapping[str, Any]
) -> tuple[Mapping[str, Any], list[str] | None, list[str]]:
    """An xarray array's attributes, dimension names and notes as xarray writes them in Zarr v3.

    xarray reads an array's dimensions from ``_ARRAY_DIMENSIONS`` (or NCZarr's
    ``dimrefs``); in v3 it writes ``dimension_names`` instead and reads only
    those. On v2 it hides attributes whose names start with ``_nc`` (NCZarr's),
    and masks with zarr's fill value (or, where that is null, the
    ``_FillValue`` attribute as it is); on v3 it masks with the ``_FillValue``
    attribute alone, read as its ``FillValueCoder`` writes it. So the v3
    attributes drop what xarray hid, and ``_FillValue`` is what xarray masked
    with on v2, in xarray's v3 spelling. Other arrays keep their attributes as
    they are.
    """
    found = _xarray_dimensions(zarray, zattrs)
    if found is None:
        return zattrs, None, []
    names, source = found
    shape = zarray.get("shape")
    rank = len(shape) if isinstance(shape, list) else None
    if not (
        isinstance(names, list)
        and len(names) == rank
        and all(isinstance(name, str) for name in names)
    ):
        return (
            zattrs,
            None,
            [
                f"{source} {json.dumps(names)} is not a list of {rank} names (one per axis): kept "
                "as an attribute, and no dimension_names (xarray opens no v3 array without them)"
            ],
        )
    hidden = [key for key in zattrs if key != XARRAY_DIMENSIONS and key.lower().startswith("_nc")]
    attributes = {
        key: value
        for key, value in zattrs.items()
        if key != XARRAY_DIMENSIONS and key not in hidden
    }
    notes = []
    if source != XARRAY_DIMENSIONS:
        notes.append(
            f"dimension_names from NCZarr's {source} in .zarray, as xarray reads them on v2"
        )
    if hidden:
        notes.append(
            f"attributes {', '.join(hidden)} dropped: NCZarr's own, which xarray hides on v2 and "
            "would show on v3"
        )
    fill_note = _xarray_mask(zarray, attributes)
    return attributes, names, [*notes, *([fill_note] if fill_note else [])]


def _xarray_mask(zarray: dict[str, Any], attributes: dict[str, Any]) -> str | None:
    """Sets ``attributes["_FillValue"]`` to what xarray masked with on v2, as it reads it on v3; a
    note where that is not the attribute as it was, or where v3 cannot say it.

    On v2 xarray masks with zarr's fill value, or with the ``_FillValue``
    attribute as it is where the fill value is null (a null attribute masks
    nothing).
    """
    fill_value, dtype = zarray.get("fill_value"), zarray.get("dtype")
    present = "_FillValue" in attributes
    before = attributes.pop("_FillValue", None)
    mask = before if fill_value is None else fill_value
    if mask is None:
        return None
    try:
        attributes["_FillValue"] = xarray_fill_value(mask, dtype)
    except ValueError as exc:
        masked = (
            f"the fill value {json.dumps(mask)}"
            if fill_value is not None
            else f"_FillValue {json.dumps(mask)}"
        )
        return (
            f"no _FillValue attribute: {exc}; xarray masked elements equal to {masked} on v2, and "
            "does not in v3"
        )
    if (
        present
        and fill_value is not None
        and not _masks_alike(before, attributes["_FillValue"], dtype)
    ):
        return (
            f"its _FillValue attribute {json.dumps(before)} is replaced by "
            f"{json.dumps(attributes['_FillValue'])}: xarray masked with the fill value "
            f"{json.dumps(fill_value)} on v2 (it ignores the attribute where the array has a fill "
            "value), and masks with the attribute alone on v3"
        )
    return None


def _masks_alike(attribute: Any, encoded: Any, v2_dtype: Any) -> bool:
    """Whether a ``_FillValue`` attribute as it was says the value ``encoded`` says (only spelled
    otherwise)."""
    try:
        return bool(xarray_fill_value(attribute, v2_dtype) == encoded)
    except ValueError:
        return False


def xarray_fill_value(fill_value: Any, v2_dtype: Any) -> Any:
    """A v2 fill value as xarray's ``_FillValue`` attribute in Zarr v3 (its ``FillValueCoder``).

    Integers and bools as they are, floats as the base64 of the little-endian
    float64, complex numbers as two of those: what xarray reads back on v3 as
    the value it masked with on v2.

    >>> xarray_fill_value("NaN", "<f4"), xarray_fill_value(-9999, "<i2")
    ('AAAAAAAA+H8=', -9999)
    >>> xarray_fill_value([1.0, "NaN"], "<c8")
    ['AAAAAAAA8D8=', 'AAAAAAAA+H8=']

    Raises
    ------
    ValueError
        For the data types whose v3 ``_FillValue`` xarray cannot read (times,
        fixed-width strings and bytes, structs, raw bytes, objects), and
        fill values that are not of the type.
    """
    kind = np.dtype(v2_dtype).kind if isinstance(v2_dtype, str) and v2_dtype != "|O" else None
    number = isinstance(fill_value, int | float) and not isinstance(fill_value, bool)
    encoded: Any = None
    if kind == "b" and isinstance(fill_value, bool | int):
        encoded = bool(fill_value)
    elif kind in ("i", "u") and number and float(fill_value).is_integer():
        encoded = int(fill_value)
    elif kind == "f":
        encoded = _float64_base64(fill_value)
    elif kind == "c" and isinstance(fill_value, list) and len(fill_value) == 2:
        parts = [_float64_base64(part) for part in fill_value]
        encoded = None if None in parts else parts
    if encoded is None:
        raise ValueError(
            f"xarray reads no v3 _FillValue for data type {v2_dtype!r} with fill value "
            f"{fill_value!r}"
        )
    return encoded


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How JSON (and so Zarr v2) spells the floats it has no numbers for."""


def _float64_base64(value: Any) -> str | None:
    """A v2 float fill value (a number, or "NaN", "Infinity", "-Infinity") as xarray spells it in
    v3; None for anything else."""
    if isinstance(value, str):
        number = _FLOAT_WORDS.get(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        number = None
    return (
        None
        if number is None
        else base64.standard_b64encode(struct.pack("<d", number)).decode("ascii")
    )
