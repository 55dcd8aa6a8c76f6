"""The ``bytes`` codec as a native Zarr v3 codec for zarr-python (the only module that imports
zarr).

Arrays get the standard metadata and chunks byte-identical to zarr-python's
own ``BytesCodec``. Over that codec, this one checks chunk lengths and bool
bytes on read, refuses a missing ``endian`` for multi-byte types when an array
is created, and reads a selection of an uncompressed chunk as one byte range
from its first to its last element (one element of a 64 MiB chunk is a 4-byte
read). Like zarr's codec it hands zarr the stored bytes as a view in their
byte order, so that zarr's copy into the result does the swap. It works on
host memory: a GPU buffer raises TypeError.

Registered through the entry point group ``zarr.codecs`` under ``bytes`` and
the legacy name ``endian``. zarr-python's own ``BytesCodec`` cannot parse the
name ``endian`` (``Expected 'bytes'. Got endian instead.``), so when zarr
loads this module for that name, the module points zarr's config key
``codecs.endian`` at this class, if it still holds zarr's default: stores
written with the draft's name then open as they are, with nothing to import or
configure, and writing to them keeps their metadata as it was. To opt out, set
that key yourself (``zarr.config.set({"codecs.endian":
"zarr.codecs.bytes.BytesCodec"})`` or ``ZARR_CODECS__ENDIAN``). That is all
importing this module does: for ``bytes``, zarr's own class stays the
default, and none of zarr's functions change. `enable` makes this one zarr's
``bytes`` codec for arrays created, opened and sharded, and
``serializer=BytesCodec(endian=...)`` chooses it for one array.

The class is a subclass of zarr's own ``BytesCodec``: zarr 3.4 decodes a
whole uncompressed shard in one pass only for a codec of its class
(``isinstance``), and that path reads such shards several times faster than
chunk by chunk (benchmarks/zarr_chunks.py); and a codec read back or evolved
equals the one made with the same configuration, as zarr's own does. That
path reads the bytes without this codec, so where they must be checked (bool,
int2/int4, structs holding them) an array holds a codec of a subclass that
zarr's bulk path does not take (``is_fixed_size`` false, which only that path
asks of an inner codec) and that compares unequal to the codec it evolved
from, so that zarr's sharding codec keeps the evolved one.

Examples
--------
>>> import numpy as np, zarr
>>> from numcodecs_bytes.zarr3 import BytesCodec
>>> z = zarr.create_array(
...     store={}, shape=(2, 3), dtype="<i4", serializer=BytesCodec(endian="big"), compressors=None
... )
>>> z[:] = np.arange(6).reshape(2, 3)
>>> z.metadata.to_dict()["codecs"][0]
{'name': 'bytes', 'configuration': {'endian': 'big'}}
>>> z[1, 1:]
array([4, 5], dtype=int32)

A store written with the draft's name opens as it is:

>>> import tempfile
>>> from pathlib import Path
>>> old = tempfile.mkdtemp() + "/old.zarr"
>>> big = zarr.codecs.BytesCodec(endian="big")
>>> written = zarr.create_array(store=old, shape=(3,), dtype="<i2", serializer=big)
>>> written[:] = [1, 2, 3]
>>> meta = Path(old, "zarr.json")
>>> # as the draft wrote it:
>>> _ = meta.write_text(meta.read_text().replace('"name": "bytes"', '"name": "endian"'))
>>> legacy_array = zarr.open_array(old, mode="r+")
>>> legacy_array[:], type(legacy_array.serializer).__module__
(array([1, 2, 3], dtype=int16), 'numcodecs_bytes.zarr3')
>>> legacy_array[0] = 7
>>> '"name": "endian"' in meta.read_text()
True

Arrays whose metadata says ``bytes``, read with this codec:

>>> from numcodecs_bytes.zarr3 import enable
>>> with enable():
...     array = zarr.open_array(old, mode="r")
...     type(array.serializer).__module__, array[1:]
('numcodecs_bytes.zarr3', array([2, 3], dtype=int16))
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.abc.codec import ArrayBytesCodecPartialDecodeMixin
from zarr.abc.store import RangeByteRequest
from zarr.codecs import BytesCodec as ZarrBytesCodec
from zarr.storage import StorePath

from . import swap
from .chunk_bytes import SELECTS_NOTHING, ChunkPlan, check_length, chunk_plan, decoded
from .chunk_bytes import block as block_holding
from .data_types import needs_endian
from .names import CODEC_ID, CODEC_IDS, LEGACY_CODEC_ID, parse_v3_entry, v3_entry
from .swap import ENDIANS, Endian
from .zarr_versions import REFUSES_MISSING_ENDIAN, STRUCT_FIELDS_BY_ENDIAN, release, zarr_has

if TYPE_CHECKING:
    from zarr.abc.store import ByteGetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer

__all__ = ["BytesCodec", "enable"]

_ZARR_DEFAULT = "zarr.codecs.bytes.BytesCodec"


@dataclass(frozen=True)
class BytesCodec(ArrayBytesCodecPartialDecodeMixin, ZarrBytesCodec):
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

    endian: Endian | None  # type: ignore[assignment]  # zarr < 3.3 types its own as an enum
    name: str
    # How the codec came to be, which decides how it evolves for an array (a missing endian read
    # from metadata is zarr's to guess; made in code it is refused). Set by the class itself
    # (from_dict, evolve_from_array_spec), not by callers. Not compared: zarr takes a codec read
    # from metadata to equal one made with the same configuration (its sharding codecs compare their
    # inner codecs unevolved; zarr's own suite checks it).
    # read from zarr.json
    _from_metadata: bool = field(default=False, init=False, repr=False, compare=False)
    # zarr < 3.3's guess
    _endian_guessed: bool = field(default=False, init=False, repr=False, compare=False)

    def __init__(self, *, endian: Endian | None = None, name: str = CODEC_ID) -> None:
        if endian is not None and (not isinstance(endian, str) or endian not in ENDIANS):
            raise ValueError(f"endian must be 'little', 'big' or None, got {endian!r}")
        if name not in CODEC_IDS:
            raise ValueError(
                f"name must be {CODEC_ID!r} or the legacy {LEGACY_CODEC_ID!r}, got {name!r}"
            )
        object.__setattr__(self, "endian", endian)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_from_metadata", False)
        object.__setattr__(self, "_endian_guessed", False)

    @classmethod
    def _made(
        cls, endian: Endian | None, name: str, *, from_metadata: bool = False, guessed: bool = False
    ) -> Any:
        codec = cls(endian=endian, name=name)
        object.__setattr__(codec, "_from_metadata", from_metadata)
        object.__setattr__(codec, "_endian_guessed", guessed)
        return codec

    @classmethod
    def from_dict(cls, data: Any) -> BytesCodec:
        """Read a ``zarr.json`` codec entry: ``bytes`` or ``endian``, short or object form."""
        name, endian = parse_v3_entry(data)
        made: BytesCodec = cls._made(endian, name, from_metadata=True)
        return made

    def to_dict(self) -> dict[str, Any]:
        """The entry written to ``zarr.json``, under the name the codec was read with."""
        return v3_entry(self.name, self.endian)

    def validate(self, *, shape: tuple[int, ...], dtype: Any, chunk_grid: Any) -> None:
        """The spec's rule at array creation: endian is required where it orders something."""
        swap.layout(dtype.to_native_dtype(), self.endian)

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> BytesCodec:
        """The codec for one array, as zarr-python's own codec evolves it, with the spec's rule
        checked.

        Single-byte types get no ``endian`` (``{"name": "bytes"}``, as zarr
        and tensorstore write it: the spec asks for it only where byte order
        applies); a codec under the legacy name keeps its store's metadata
        as it was. A struct with multi-byte fields read from metadata without
        ``endian`` (as zarr-python before 3.3 wrote every struct) is read as
        little endian with a warning, as zarr 3.3+ reads it. Any other
        multi-byte type read without ``endian`` is refused where zarr 3.3+
        is installed, as zarr refuses it; on zarr 3.1 and 3.2, whose own
        codec reads it as the machine's byte order without a word, it is
        read as that zarr reads it, with a warning when a chunk is first read
        or written (its values are what the guess puts at risk; metadata alone
        reads without a word). Made in code, a multi-byte type without
        ``endian`` is always refused.
        """
        return self._for_data_type(array_spec.dtype.to_native_dtype())

    def _for_data_type(self, dtype: np.dtype[Any]) -> BytesCodec:
        endian, multi_byte = self.endian, needs_endian(dtype)
        multi_byte_struct = multi_byte and dtype.fields is not None
        guessed = False
        # read as zarr reads it, with a warning
        if endian is None and self._from_metadata and multi_byte:
            if multi_byte_struct:
                endian = "little"
                warnings.warn(
                    f"the bytes codec of this struct array ({dtype}) has no endian, as zarr-python "
                    "before 3.3 wrote structs: reading its fields as little endian, as zarr-python "
                    "3.3+ does",
                    UserWarning,
                    stacklevel=2,
                )
            elif not zarr_has(REFUSES_MISSING_ENDIAN):
                # the warning comes with the first chunk read or written
                endian, guessed = sys.byteorder, True
        resolved = swap.layout(dtype, endian)  # the spec's rule, for arrays created and opened
        if self.name == CODEC_ID and not multi_byte:
            endian = None
        elif endian == "big" and not self._from_metadata and multi_byte_struct:
            _warn_if_zarr_reads_big_endian_structs_wrong(dtype)
        # Where bytes are checked (bool, int2/int4), zarr 3.4's bulk decode of whole shards, which
        # reads them without this codec, must not take it: a subclass it does not take, unequal to
        # this one (zarr's sharding codec keeps its unevolved inner codecs where they equal their
        # evolution).
        kind = BytesCodec if resolved.checks is None else _CheckedBytesCodec
        if (
            type(self) is kind
            and endian == self.endian
            and not self._from_metadata
            and guessed == self._endian_guessed
        ):
            return self
        evolved: BytesCodec = kind._made(endian, self.name, guessed=guessed)
        return evolved

    def __repr__(self) -> str:
        name = "" if self.name == CODEC_ID else f", name={self.name!r}"
        return f"BytesCodec(endian={self.endian!r}{name})"

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        return input_byte_length

    # -- encode / decode ---------------------------------------------------------------------

    def _warn_if_endian_guessed(self, chunk_spec: ArraySpec) -> None:
        # Here, not when the metadata is read: values are what the guess puts at risk.
        if self._endian_guessed:
            warnings.warn(
                f"the bytes codec of this {chunk_spec.dtype.to_native_dtype()} array has no "
                "endian, which the spec requires for multi-byte types: reading and writing it as "
                f"{self.endian} endian, this machine's byte order, as zarr-python "
                f"{zarr.__version__}'s own codec does (zarr-python "
                f"{release(REFUSES_MISSING_ENDIAN)}+ refuses such metadata; numcodecs-bytes "
                "migrate writes the draft's default, little, into it)",
                UserWarning,
                stacklevel=3,
            )

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        self._warn_if_endian_guessed(chunk_spec)
        array = _host(chunk_array.as_ndarray_like())
        # the spec's order is C order, whatever the array's memory order
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        encoded = swap.encode(array, swap.layout(array.dtype, self.endian))
        return chunk_spec.prototype.buffer.from_array_like(encoded.view(np.uint8))

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        self._warn_if_endian_guessed(chunk_spec)
        return _nd_buffer(
            chunk_spec,
            _whole_chunk(chunk_bytes, chunk_plan(chunk_spec.dtype, chunk_spec.shape, self.endian)),
        )

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_array, chunk_spec)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def _decode_partial_single(
        self, byte_getter: ByteGetter, selection: Any, chunk_spec: ArraySpec
    ) -> NDBuffer | None:
        """Read the selected elements of an uncompressed chunk: from a store, only the block that
        holds them.

        The block: the leading axes where the selection is one index fixed, one
        axis from the selection's lowest to its highest index, the trailing
        axes whole; contiguous in C order. Only the span from the first to the
        last element the selection can touch is fetched. A chunk fetched whole
        must have exactly its full length, a span exactly the span's: a
        truncated chunk is an error, never other elements.
        """
        self._warn_if_endian_guessed(chunk_spec)
        plan = chunk_plan(chunk_spec.dtype, chunk_spec.shape, self.endian)
        block = block_holding(plan.shape, selection) if isinstance(byte_getter, StorePath) else None
        # Other byte getters hold the chunk in memory already (sharding's inner ones, which
        # refuse byte ranges before zarr 3.1.6), and a block of the whole chunk gains nothing.
        if block is None or block.elements == plan.elements:
            chunk_bytes = await byte_getter.get(prototype=chunk_spec.prototype)
            if chunk_bytes is None:
                return None  # no chunk: zarr fills in the fill value
            return _nd_buffer(chunk_spec, _whole_chunk(chunk_bytes, plan)[selection])
        if block is SELECTS_NOTHING:
            return _nd_buffer(chunk_spec, np.empty(plan.shape, plan.dtype)[selection])
        itemsize = plan.dtype.itemsize
        start, stop = block.span[0] * itemsize, (block.span[1] + 1) * itemsize
        chunk_bytes = await byte_getter.get(
            prototype=chunk_spec.prototype, byte_range=RangeByteRequest(start, stop)
        )
        if chunk_bytes is None:
            return None
        data = _host(chunk_bytes.as_array_like())
        if block.span == (block.first, block.first + block.elements - 1):
            return _nd_buffer(
                chunk_spec, decoded(data, plan, stop - start, block.shape, start)[block.selection]
            )
        # The span into its place in an empty block: every selected element lies in it.
        check_length(data, plan, stop - start, start)
        chunk = np.empty(block.shape, plan.dtype)
        target = chunk.reshape(-1)[block.span[0] - block.first : block.span[1] - block.first + 1]
        swap.decode_into(
            swap.elements_view(data, plan.resolved.stored_dtype), plan.resolved, target
        )
        return _nd_buffer(chunk_spec, chunk[block.selection])


@dataclass(frozen=True)
class _CheckedBytesCodec(BytesCodec):
    """This package's codec, evolved for a data type whose bytes it checks (bool, int2/int4, structs
    with them).

    zarr 3.4 decodes a whole uncompressed shard without the codec where its
    inner codec is of zarr's class and of fixed size; this one says it is
    not (only that path asks it of an inner codec), so its chunks are
    decoded, and checked, one by one.
    """

    is_fixed_size = False


def _whole_chunk(chunk_bytes: Buffer, plan: ChunkPlan) -> np.ndarray[Any, Any]:
    """A whole stored chunk, its exact length checked, as an array of the chunk's shape."""
    return decoded(_host(chunk_bytes.as_array_like()), plan, plan.nbytes, plan.shape)


def _nd_buffer(chunk_spec: ArraySpec, array: Any) -> NDBuffer:
    return chunk_spec.prototype.nd_buffer.from_ndarray_like(array)


def _host(array: Any) -> np.ndarray[Any, Any]:
    if not isinstance(array, np.ndarray):
        raise TypeError(
            "the bytes codec of numcodecs-bytes works on host (numpy) memory, got "
            f"{type(array).__name__}"
        )
    return array


def _warn_if_zarr_reads_big_endian_structs_wrong(dtype: np.dtype[Any]) -> None:
    if not zarr_has(STRUCT_FIELDS_BY_ENDIAN):
        warnings.warn(
            f"struct data type {dtype} with endian='big': zarr-python before "
            f"{release(STRUCT_FIELDS_BY_ENDIAN)} (installed: {zarr.__version__}) reads the fields "
            "of such arrays with its own bytes codec as little endian, wrong values without an "
            f"error; readers on zarr < {release(STRUCT_FIELDS_BY_ENDIAN)} need "
            "numcodecs_bytes.zarr3.enable() (or write endian='little')",
            UserWarning,
            stacklevel=3,
        )


_THIS_CLASS = f"{BytesCodec.__module__}.{BytesCodec.__qualname__}"


def enable() -> Any:
    """Make this class zarr-python's ``bytes`` codec: for arrays opened, created and sharded.

    Sets zarr's config key ``codecs.bytes`` to this class. zarr reads that
    key only where it parses metadata; where zarr builds the codec itself
    (the default serializer of a new array, the inner and index codecs of
    a sharding codec made without them), the first call of ``enable()``
    makes it follow the same key from then on (and do as before wherever the
    key names zarr's own class). Importing this module changes nothing in
    zarr: only ``enable()`` does.

    Returns
    -------
    zarr's config context: call ``enable()`` once, or use ``with enable():``
    to select the codec for the block only.

    Examples
    --------
    >>> import zarr
    >>> from numcodecs_bytes import zarr3
    >>> with zarr3.enable():
    ...     created = zarr.create_array(store={}, shape=(4,), dtype=">i2")
    ...     sharded = zarr.create_array(store={}, shape=(4,), dtype=">i2", shards=(4,), chunks=(2,))
    >>> isinstance(created.serializer, zarr3.BytesCodec)
    True
    >>> sharding = sharded.metadata.codecs[0]  # its inner codecs, then its index codecs:
    >>> [isinstance(c, zarr3.BytesCodec) for c in (*sharding.codecs, *sharding.index_codecs)]
    [True, False, True, False]
    """
    _follow_the_config_where_zarr_builds_its_codec()
    return zarr.config.set({f"codecs.{CODEC_ID}": _THIS_CLASS})


def _selected() -> bool:
    return bool(zarr.config.get(f"codecs.{CODEC_ID}", None) == _THIS_CLASS)


def _follow_the_config_where_zarr_builds_its_codec() -> None:
    # zarr builds its own class where it makes the codec itself, whatever the config says
    # (zarr.core.array.default_serializer_v3; ShardingCodec's default codecs and index codecs). Each
    # is wrapped once, by the first enable(), and does as before unless the config key names this
    # class.
    # the first calls may come from several threads at once: one wraps, the others see it done
    with _WRAPPING:
        _wrap_where_zarr_builds_its_codec()


_WRAPPING = threading.Lock()


def _wrap_where_zarr_builds_its_codec() -> None:
    import zarr.core.array
    from zarr.codecs.sharding import ShardingCodec

    def ours(codec: Any) -> Any:
        return BytesCodec(endian="little") if type(codec) is ZarrBytesCodec else codec

    zarr_default_serializer = zarr.core.array.default_serializer_v3
    if getattr(zarr_default_serializer, "__wrapped__", None) is not None:
        return  # wrapped already (an earlier enable(), or this module imported again)

    @functools.wraps(zarr_default_serializer)
    def default_serializer_v3(dtype: Any) -> Any:
        serializer = zarr_default_serializer(dtype)
        if not _selected() or type(serializer) is not ZarrBytesCodec:
            return serializer
        # As the array will hold it (evolved for its data type), so that it equals the array's
        # serializer. "little" as zarr 3.3+ gives every type; zarr 3.1 gave structs none, which the
        # spec refuses.
        return BytesCodec(endian="little")._for_data_type(dtype.to_native_dtype())

    zarr_sharding_init = ShardingCodec.__init__
    defaults = zarr_sharding_init.__kwdefaults__ or {}

    @functools.wraps(zarr_sharding_init)
    def sharding_init(self: Any, **kwargs: Any) -> None:
        if _selected():
            for key in ("codecs", "index_codecs"):
                if key not in kwargs:
                    kwargs[key] = tuple(ours(codec) for codec in defaults[key])
        zarr_sharding_init(self, **kwargs)

    zarr.core.array.default_serializer_v3 = default_serializer_v3
    ShardingCodec.__init__ = sharding_init  # type: ignore[method-assign]


def _point_zarr_at_this_class_for_the_legacy_name() -> None:
    # zarr's own class can never parse the name "endian": take the name over,
    # unless the user chose an implementation themselves.
    if zarr.config.get(f"codecs.{LEGACY_CODEC_ID}", None) == _ZARR_DEFAULT:
        zarr.config.set({f"codecs.{LEGACY_CODEC_ID}": _THIS_CLASS})


_point_zarr_at_this_class_for_the_legacy_name()
