"""The v2 -> v3 metadata rules (numcodecs_bytes.v3_metadata), metadata in, document out.

Each rule against an oracle where one exists: xarray's own ``FillValueCoder``
for the ``_FillValue`` it masks with in v3, zarr-python reading the v2 chunks
through the document for strings; per zarr version where zarr's reading
differs (the version named in numcodecs_bytes.zarr_versions).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal, cast

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("zarr", minversion="3", reason="the rules need zarr 3")
from support.recorded import chunks_read
from support.stack import ZARR_HANDS_FILTERS_NATIVE_ARRAYS, ZARR_SWAPS_STRUCT_FIELDS, has_module

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.cli import main
from numcodecs_bytes.to_v3 import convert_store
from numcodecs_bytes.to_v3.rules.arrays import UnconvertibleError, array_document, group_document
from numcodecs_bytes.to_v3.rules.xarray import xarray_fill_value

zarr: Any = pytest.importorskip("zarr")  # typed loosely: the tests call zarr as users do


def zarray(
    dtype: Any = "<i2", fill_value: Any = 0, shape: list[int] | None = None, **more: Any
) -> dict[str, Any]:
    shape = [3] if shape is None else shape
    return {
        "zarr_format": 2,
        "shape": shape,
        "chunks": [max(1, n) for n in shape],
        "dtype": dtype,
        "fill_value": fill_value,
        "order": "C",
        "compressor": None,
        "filters": None,
        **more,
    }


# -- xarray's conventions --------------------------------------------------------------------------


def test_an_xarray_array_gets_dimension_names_and_its_fill_value_as_xarray_writes_them() -> None:
    conversion = array_document(
        zarray("<i2", -9999, [2, 3]), {"_ARRAY_DIMENSIONS": ["t", "x"], "units": "K"}
    )
    document = conversion.document
    assert document["dimension_names"] == ["t", "x"]
    assert document["attributes"] == {"units": "K", "_FillValue": -9999}  # _ARRAY_DIMENSIONS gone
    assert document["fill_value"] == -9999 and conversion.notes == ()
    # where zarr puts it
    assert list(document).index("dimension_names") == list(document).index("attributes") + 1


def test_arrays_no_xarray_wrote_keep_their_attributes_as_they_are() -> None:
    attributes = {"units": "K", "_FillValue": 3}
    assert array_document(zarray("<f8", "NaN"), attributes).document["attributes"] == attributes
    assert "dimension_names" not in array_document(zarray("<f8", "NaN"), {}).document


def test_the_fill_value_attribute_says_what_xarray_masked_with_on_v2() -> None:
    """On v2 xarray masks with zarr's fill value and ignores a ``_FillValue`` attribute beside it;
    where the fill value is null it masks with the attribute as it is (null: nothing). On v3 it
    masks with the attribute alone."""
    dims = {"_ARRAY_DIMENSIONS": ["x"]}

    def attributes(
        dtype: str, fill_value: Any, **attrs: Any
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        conversion = array_document(zarray(dtype, fill_value), {**dims, **attrs})
        return conversion.document["attributes"], conversion.notes

    # zarr 2's default fill value, a netCDF attribute
    beside, notes = attributes("<i2", 0, _FillValue=-32768)
    assert beside == {"_FillValue": 0} and any("-32768 is replaced by 0" in note for note in notes)
    # respelled only
    assert attributes("<f4", -9999, _FillValue=-9999) == ({"_FillValue": "AAAAAICHw8A="}, ())
    # raw, as xarray masks
    assert attributes("<f4", None, _FillValue=-9999)[0] == {"_FillValue": "AAAAAICHw8A="}
    assert attributes("<i8", None, _FillValue=None)[0] == {}  # null masks nothing
    assert attributes("<i8", None)[0] == {}  # xarray's ints and times
    assert attributes("<f8", 1.5, _FillValue="mine")[0] == {"_FillValue": "AAAAAAAA+D8="}
    strings, notes = attributes("<U5", "")
    assert strings == {} and any(
        'masked elements equal to the fill value ""' in note for note in notes
    )


def test_nczarr_dimension_references_become_dimension_names_and_its_attributes_go() -> None:
    """NCZarr 1.0 (netCDF-C 4.8.0/4.8.1) names dimensions only in .zarray, which xarray reads on v2;
    later ones add attributes of their own, which xarray hides on v2 (names starting ``_nc``)."""
    v1 = zarray(
        "<f4", -9999, [3, 4], _NCZARR_ARRAY={"dimrefs": ["/time", "/g/x"], "storage": "chunked"}
    )
    conversion = array_document(v1, {"units": "K", "_NCZARR_ATTR": {"types": {"units": ">S1"}}})
    document = conversion.document
    assert document["dimension_names"] == ["time", "x"] and "_NCZARR_ARRAY" not in json.dumps(
        document
    )
    assert document["attributes"] == {"units": "K", "_FillValue": "AAAAAICHw8A="}
    assert any("NCZarr's _NCZARR_ARRAY dimrefs" in note for note in conversion.notes)
    later = {
        "_ARRAY_DIMENSIONS": ["x"],
        "_nczarr_array": {"dimension_references": ["/x"]},
        "_nczarr_attr": {},
    }
    conversion = array_document(zarray("<i2", -32767), later)
    assert conversion.document["attributes"] == {"_FillValue": -32767}
    assert any("_nczarr_array, _nczarr_attr dropped" in note for note in conversion.notes)
    assert array_document(zarray("<i2", 0), {"_nczarr_array": {}}).document["attributes"] == {
        "_nczarr_array": {}
    }


@pytest.mark.parametrize(
    ("names", "why"),
    [
        (["t"], "not a list of 2 names"),
        ("t x", "not a list of 2 names"),
        (["t", 3], "not a list of 2 names"),
    ],
)
def test_dimension_names_that_do_not_fit_the_array_stay_an_attribute_with_a_note(
    names: Any, why: str
) -> None:
    conversion = array_document(zarray("<i2", 0, [2, 3]), {"_ARRAY_DIMENSIONS": names})
    assert "dimension_names" not in conversion.document
    assert conversion.document["attributes"] == {"_ARRAY_DIMENSIONS": names}
    assert any(why in note and "kept as an attribute" in note for note in conversion.notes), (
        conversion.notes
    )


def test_a_0_d_array_gets_no_dimension_names_as_zarr_writes_it() -> None:
    document = array_document(zarray("<i4", 0, []), {"_ARRAY_DIMENSIONS": []}).document
    assert "dimension_names" not in document and document["attributes"] == {"_FillValue": 0}


def test_data_types_xarray_has_no_fill_value_for_get_a_note_and_no_attribute() -> None:
    conversion = array_document(zarray("<M8[s]", 0), {"_ARRAY_DIMENSIONS": ["t"]})
    assert "_FillValue" not in conversion.document["attributes"]
    assert any(
        "xarray reads no v3 _FillValue for data type '<M8[s]'" in note for note in conversion.notes
    )


FLOAT_WIDTHS: dict[int, Literal[16, 32, 64]] = {2: 16, 4: 32, 8: 64}
FILL_DTYPES = [
    "<f2",
    "<f4",
    ">f8",
    "<i2",
    ">i4",
    "<u8",
    "|i1",
    "|b1",
    "<c8",
    ">c16",
    "|S3",
    "<U2",
    ">U3",
]


@st.composite
def fill_values(draw: st.DrawFn) -> tuple[str, Any]:
    dtype = np.dtype(draw(st.sampled_from(FILL_DTYPES)))
    if dtype.kind == "f":
        value: Any = draw(
            st.floats(width=FLOAT_WIDTHS[dtype.itemsize], allow_nan=True, allow_infinity=True)
        )
    elif dtype.kind == "c":
        part = st.floats(
            width=FLOAT_WIDTHS[dtype.itemsize // 2], allow_nan=True, allow_infinity=True
        )
        value = complex(draw(part), draw(part))
    elif dtype.kind in "iu":
        info = np.iinfo(dtype.str)
        value = draw(st.integers(int(info.min), int(info.max)))
    elif dtype.kind == "b":
        value = draw(st.booleans())
    elif dtype.kind == "S":
        value = draw(st.binary(max_size=dtype.itemsize)).rstrip(b"\0")
    else:
        value = draw(
            st.text(
                st.characters(codec="utf-8", exclude_characters="\0"), max_size=dtype.itemsize // 4
            )
        )
    return dtype.str, value


@pytest.mark.skipif(not has_module("xarray"), reason="xarray is the oracle (the test extra)")
@given(fill_values())
@settings(max_examples=300, deadline=None)
def test_the_fill_value_attribute_is_what_xarray_reads_on_v3_as_the_value_it_masked_with_on_v2(
    case: tuple[str, Any],
) -> None:
    """The oracle: xarray's ``FillValueCoder``. The attribute decodes on v3 to the fill value as
    zarr reads the v2 metadata (what xarray masks with on a v2 open), spelled as xarray writes it;
    where xarray's v3 decoder reads no attribute for the data type, there is none (a ValueError,
    which becomes a note)."""
    from xarray.backends.zarr import FillValueCoder
    from zarr.core.dtype import get_data_type_from_native_dtype

    dtype_text, value = case
    dtype = np.dtype(dtype_text)
    data_type = get_data_type_from_native_dtype(dtype)
    v2_json = data_type.to_json_scalar(data_type.cast_scalar(value), zarr_format=2)
    as_zarr_reads_it = data_type.from_json_scalar(v2_json, zarr_format=2)
    try:
        FillValueCoder.decode(FillValueCoder.encode(cast(Any, as_zarr_reads_it), dtype), dtype)
    except ValueError:  # xarray reads no v3 _FillValue of this data type
        with pytest.raises(ValueError, match="xarray reads no v3 _FillValue"):
            xarray_fill_value(json.loads(json.dumps(v2_json)), dtype_text)
        return
    attribute = xarray_fill_value(json.loads(json.dumps(v2_json)), dtype_text)
    assert attribute == FillValueCoder.encode(cast(Any, as_zarr_reads_it), dtype)
    read_back = np.asarray(FillValueCoder.decode(json.loads(json.dumps(attribute)), dtype), dtype)
    assert read_back.tobytes() == np.asarray(as_zarr_reads_it, dtype).tobytes()


# -- strings of any length -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["vlen-utf8", "vlen-bytes"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_object_arrays_of_strings_become_v3_string_arrays_with_the_codec_as_serializer(
    tmp_path: Path, codec: str, order: str
) -> None:
    strings = ["x", "yy", "", "zzz"] if codec == "vlen-utf8" else [b"x", b"yy", b"", b"zzz"]
    data = np.array(strings, dtype=object).reshape(2, 2)
    root = tmp_path / "s.zarr"
    from zarr.core.dtype import VariableLengthBytes

    dtype = str if codec == "vlen-utf8" else VariableLengthBytes()
    array = zarr.create_array(
        str(root),
        shape=(2, 2),
        chunks=(2, 2),
        dtype=dtype,
        zarr_format=2,
        order=order,
        compressors=numcodecs.Zstd(level=1),
    )
    array[...] = data
    v2 = json.loads((root / ".zarray").read_text())
    assert v2["filters"] == [{"id": codec}]
    document = array_document(v2, {}).document
    assert document["data_type"] == ("string" if codec == "vlen-utf8" else "variable_length_bytes")
    names = [c["name"] for c in document["codecs"]]
    assert names == ["transpose", codec, "zstd"] if order == "F" else names == [codec, "zstd"]
    report = convert_store(root)  # checked: chunk 0 read as v2 and as v3, values compared
    assert report.failures == []
    assert zarr.open_array(str(root), zarr_format=3)[...].tolist() == data.tolist()


def test_a_string_arrays_fill_value_of_zarr_2_is_made_a_string_with_a_note() -> None:
    """zarr 2.18 gave object arrays of strings the fill value 0 (its default for every data
    type)."""
    for fill, note in [(0, "is no string"), (None, "fill_value null")]:
        conversion = array_document(zarray("|O", fill, filters=[{"id": "vlen-utf8"}]), {})
        assert conversion.document["fill_value"] == ""
        assert any(note in text for text in conversion.notes), conversion.notes


@pytest.mark.parametrize(
    ("codec", "values"), [("vlen-bytes", [b"x", b"yy", b"", b"zzz"]), ("vlen-utf8", ["x", ""])]
)
def test_object_arrays_zarr_2_wrote_with_the_fill_value_0_convert(
    tmp_path: Path, codec: str, values: list[Any]
) -> None:
    """Issue 43, item 11: zarr 3 cannot open a v2 vlen-bytes array whose fill value is zarr 2.18's 0
    ("Invalid type:
    0. Expected a string."), so the check read its v2 side with "" (what v3 gets, and what fills no
       stored chunk);
    the whole root stayed v2."""
    from zarr.core.dtype import VariableLengthBytes, VariableLengthUTF8

    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    dtype = VariableLengthBytes() if codec == "vlen-bytes" else VariableLengthUTF8()
    array = zarr.create_array(
        str(root / "blob"), shape=(len(values),), chunks=(2,), dtype=dtype, zarr_format=2
    )
    array[...] = np.array(values, dtype=object)
    zarray = json.loads((root / "blob" / ".zarray").read_text())
    assert zarray["filters"] == [{"id": codec}]
    # as zarr 2.18 wrote it
    (root / "blob" / ".zarray").write_text(json.dumps({**zarray, "fill_value": 0}))
    report = convert_store(root)
    assert report.failures == [] and any(
        "fill_value 0 is no string" in note for _, note in report.notes
    )
    assert zarr.open_array(str(root / "blob"), mode="r", zarr_format=3)[...].tolist() == values


def test_filters_after_the_object_codec_are_refused() -> None:
    with pytest.raises(UnconvertibleError, match="filters after the object codec 'vlen-utf8'"):
        array_document(
            zarray("|O", "", filters=[{"id": "vlen-utf8"}, {"id": "zlib", "level": 1}]), {}
        )


def test_other_object_codecs_are_refused_with_zarrs_reason() -> None:
    with pytest.raises(UnconvertibleError, match="cannot convert it"):
        array_document(zarray("|O", None, filters=[{"id": "json2", "encoding": "utf-8"}]), {})


# -- what readers on older zarr need ---------------------------------------------------------------


def test_filters_before_a_swapped_serializer_need_zarr_3_4_to_read_right() -> None:
    metadata = zarray(
        "<i4", 0, filters=[{"id": "delta", "dtype": "<i4"}, {"id": "bytes", "endian": "big"}]
    )
    if not ZARR_HANDS_FILTERS_NATIVE_ARRAYS:
        with pytest.raises(UnconvertibleError, match=r"zarr-python 3\.4 reads it right"):
            array_document(metadata, {})
        return
    readers = array_document(metadata, {}).readers
    assert (
        readers is not None and readers.since == (3, 4) and "wrong values, no error" in readers.why
    )


def test_filters_of_a_big_endian_array_get_native_data_types_for_zarr_3_4(tmp_path: Path) -> None:
    """A '>f8' array with Quantize(dtype='>f8') (a '>i4' one with Delta): zarr's mapping keeps '>f8'
    in the filter, which zarr 3.1 reads right and zarr 3.4, handing the filter a native array, reads
    as garbage (2e-319 for 0.125), without an error. Converted on zarr 3.4: the filters name native
    data types, and readers need 3.4; on zarr 3.1: refused, as any document 3.1 reads right 3.4
    reads wrong."""
    quantize = zarray(
        ">f8", 0.0, filters=[{"id": "quantize", "digits": 3, "dtype": ">f8", "astype": ">f8"}]
    )
    delta = zarray(">i4", 0, filters=[{"id": "delta", "dtype": ">i4", "astype": ">i4"}])
    if not ZARR_HANDS_FILTERS_NATIVE_ARRAYS:
        for metadata in (quantize, delta):
            with pytest.raises(
                UnconvertibleError, match=r"big endian data as it is stored.*zarr-python 3\.4 reads"
            ):
                array_document(metadata, {})
        return
    for metadata in (quantize, delta):
        conversion = array_document(metadata, {})
        assert conversion.readers is not None and conversion.readers.since == (3, 4)
        settings = conversion.document["codecs"][0]["configuration"]
        native = np.dtype(metadata["dtype"]).newbyteorder("=").str
        assert (settings["dtype"], settings["astype"]) == (native, native)
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array(
        "q",
        shape=(9,),
        chunks=(3,),
        dtype=">f8",
        fill_value=0.0,
        filters=[numcodecs.Quantize(digits=3, dtype=">f8")],
    )[...] = np.linspace(0, 1, 9)
    group.create_array(
        "d",
        shape=(9,),
        chunks=(3,),
        dtype=">i4",
        fill_value=0,
        filters=[numcodecs.Delta(dtype=">i4")],
    )[...] = np.arange(9) ** 2
    assert convert_store(root).failures == []
    opened = zarr.open_group(str(root), mode="r", zarr_format=3)
    assert opened["q"][...].tolist() == np.linspace(0, 1, 9).tolist()
    assert opened["d"][...].tolist() == (np.arange(9) ** 2).tolist()


def test_big_endian_struct_fields_need_zarr_3_3_to_read_right() -> None:
    metadata = zarray([["a", ">i4"], ["b", ">f8"]], None)
    if not ZARR_SWAPS_STRUCT_FIELDS:
        with pytest.raises(UnconvertibleError, match="reads struct fields in native order"):
            array_document(metadata, {})
        return
    conversion = array_document(metadata, {})
    assert conversion.readers is not None and conversion.readers.since == (3, 3)
    assert array_document(zarray([["a", "<i4"]], None), {}).readers is None


@pytest.mark.skipif(
    not ZARR_HANDS_FILTERS_NATIVE_ARRAYS, reason="zarr < 3.4 refuses such arrays already"
)
def test_the_report_names_what_older_readers_read_wrong_and_oldest_zarr_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    filters = [numcodecs.Delta(dtype="<i4"), BytesCodec(endian="big", dtype="<i4")]
    for name in ("a", "b"):
        zarr.create_array(
            str(root / name), data=np.arange(4, dtype="<i4"), zarr_format=2, filters=filters
        )
    zarr.create_array(str(root / "plain"), data=np.arange(4, dtype="<i4"), zarr_format=2)
    refusing = tmp_path / "refusing.zarr"
    shutil.copytree(root, refusing)
    assert main(["to-v3", str(root)]) == 0
    err = capsys.readouterr().err
    assert (
        "note a, b: readers need zarr-python 3.4 or later: zarr-python before 3.4 hands its filters"
        in err
    )
    assert main(["to-v3", str(refusing), "--oldest-zarr", "3.1"]) == 1
    err = capsys.readouterr().err
    assert "failed a: zarr-python 3.1 would read it wrong" in err and "failed b:" in err
    assert (refusing / "plain" / "zarr.json").exists() and not (
        refusing / "a" / "zarr.json"
    ).exists()
    assert main(["to-v3", str(refusing), "--oldest-zarr", "3.4"]) == 0


def test_groups_keep_their_attributes() -> None:
    document = group_document({"title": "t", "nested": {"a": [1, 2]}}).document
    # zarr-python 3.1.3 writes an absent consolidation as null; later releases leave the key out.
    assert document.pop("consolidated_metadata", None) is None
    assert document == {
        "attributes": {"title": "t", "nested": {"a": [1, 2]}},
        "zarr_format": 3,
        "node_type": "group",
    }


# -- empty and one-element arrays, and the check's sampling ----------------------------------------


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
def test_zero_size_arrays_convert(tmp_path: Path, shape: tuple[int, ...]) -> None:
    root = tmp_path / "s.zarr"
    zarr.create_array(
        str(root),
        shape=shape,
        chunks=tuple(max(1, n) for n in shape),
        dtype="<f8",
        zarr_format=2,
        filters=[BytesCodec(endian="big", dtype="<f8")],
        fill_value=1.5,
    )
    report = convert_store(root)
    assert report.failures == [] and zarr.open_array(str(root), zarr_format=3).shape == shape


def test_one_element_arrays_vouch_for_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two arrays with one .zarray, one element each: a single element shows no mapping, so both are
    read."""
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w", zarr_format=2)
    for name, value in (("a", 7), ("b", 1234)):
        zarr.create_array(
            str(root / name),
            data=np.array([value], "<i4"),
            zarr_format=2,
            filters=[BytesCodec(endian="big", dtype="<i4")],
        )
    read = chunks_read(monkeypatch)
    report = convert_store(root)
    assert report.failures == []
    assert sorted(Path(path).parent.name for path in read) == ["a", "b"]
