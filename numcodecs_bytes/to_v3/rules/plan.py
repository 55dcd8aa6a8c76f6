"""The sharding pass's plan: what becomes of each array, from its documents and the files below its
folder.

Pure: documents, names and shard indexes in, a plan out. The array's
``zarr.json`` as the store holds it now decides, whichever side wrote it last:

- unsharded (a converted array, one a Zarr v3 writer appended to since, or a
  Zarr v3 array): `Pack` its chunk files into shards;
- sharded, where another shard shape is asked for: `Pack` its inner chunks,
  byte ranges of the shards it has (read by their indexes), into new shards;
- sharded by an earlier run, its v2 chunk files kept, in a run that removes
  them: `Clear` them, each where its shard holds it (or was written after it);
- a killed run was removing its v2 chunk files: `Finish` that;
- anything else: `Leave` it, with a note or a problem where that needs telling
  (an unsharded array no shards can be made for from its document alone, no
  file named: `decided_by_document`).

An array's shard layouts (the one it has, the one asked for) are worked out
once from its document (`layouts`: zarr reads its data type) and passed on to
each rule here.

New shards never take the keys the array reads now: under Zarr v3's default
keys with the other separator (``c/0/1`` where it reads ``c.0.1`` or v2 keys,
``c.0.1`` where it reads ``c/0/1``), so both live side by side until the
switch to the new ``zarr.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ...store.layout import METADATA_NAMES, ChunkKeys, Location
from ...store.shard_format import ByteRange, Shard
from .sharding import (
    ShardLayout,
    ShardPlan,
    chunk_shape,
    holds_chunks_of,
    inner_document,
    layout_of,
    other_separator,
    shard_layout,
    sharded_document,
    shards_of,
)

__all__ = [
    "ArrayFound",
    "Clear",
    "Finish",
    "Layouts",
    "Leave",
    "OldShard",
    "Pack",
    "Plan",
    "chunk_keys",
    "decided_by_document",
    "keys_read",
    "layouts",
    "may_hold_unread_shards",
    "plan",
    "reshard_from",
    "retiring",
    "shard_count",
    "unread_shards",
]


class ArrayFound(NamedTuple):
    """An array as the metadata run leaves it, for the sharding pass."""

    at: Location  # where it lies
    document: dict[str, Any]  # its zarr.json as the store holds it now
    current: bytes  # those bytes, as this run read or wrote them
    # its .zarray as v2 readers take it (the chunk layout found); None: no v2 files
    v2: dict[str, Any] | None = None
    # its v2 metadata converted, unsharded: what its v2 chunk files are
    conversion: dict[str, Any] | None = None
    # its v2 metadata files as read, by name: their digests (for their removal)
    digests: Mapping[str, bytes] = {}
    # a killed run was removing its v2 chunk files (see `store.layout.REMOVING_V2`)
    was_removing: bool = False
    # files a killed run switched away from, to remove: version by relative path
    retired: Mapping[str, str] = {}
    # its folder, as the walk listed it, may hold shards a killed run placed that its zarr.json
    # does not read (`plan.may_hold_unread_shards`)
    leftovers: bool = False

    @property
    def path(self) -> str:
        """Its path relative to the store, "" for the root."""
        return self.at.path


class Layouts(NamedTuple):
    """An array's shard layouts, worked out once from its document (`layouts`)."""

    now: ShardLayout | None  # its shards' layout (`sharding.layout_of`); None: not sharded so
    asked: ShardLayout | None  # the layout asked for it; None: none, or no shards can be made
    asked_for: bool  # a shard size or a shard shape was asked for (of any array)
    note: str | None = None  # why no shards can be made, where that is told
    # why the layout asked for cannot be worked out (a shard shape that is not a multiple of its
    # chunks): an unsharded array fails with it
    problem: ValueError | None = None


class OldShard(NamedTuple):
    """A shard an array has now, as resharding reads it."""

    size: int  # its bytes
    stored_index: bytes  # its index as stored (its checksum too, where it has one)
    entries: list[tuple[int, int] | None]  # (offset, nbytes) of each inner chunk; None: empty


class Pack(NamedTuple):
    """An array whose chunks go into new shards; ``shards`` in the order of ``plans``."""

    array: ArrayFound
    layout: ShardLayout  # the new shards
    sharded: dict[str, Any]  # its document once sharded
    # where its sources lie: its chunk files, or (resharding) the shards it has now
    sources: ChunkKeys
    plans: list[ShardPlan]
    shards: list[Shard]
    # resharding: its shards now, whose inner chunks are the sources (byte ranges)
    old: ShardLayout | None = None
    old_shards: Mapping[str, OldShard] = {}  # resharding: those shards, by key
    # resharding: each of those shards' version when its index was read, by path
    before: Mapping[str, str] = {}

    def retired(self) -> list[str]:
        """The files the array reads until its switch, and no longer after: its sources' files."""
        files = {
            source.path if isinstance(source, ByteRange) else source
            for shard in self.shards
            for source in shard.sources
            if source is not None
        }
        return sorted(files | set(self.before))


class Clear(NamedTuple):
    """An array sharded by an earlier run, whose v2 chunk files a removing run removes: ``shards``
    hold them as their sources."""

    array: ArrayFound
    shards: list[Shard]


class Finish(NamedTuple):
    """An array whose v2 chunk files a killed run was removing: the rest of them."""

    array: ArrayFound
    chunks: list[str]  # paths in the store
    folders: list[str]  # the folders they lie in, below the array's (``0/0`` keys)


class Leave(NamedTuple):
    """An array left as it is: a note, or a problem that keeps its v2 files (and its groups')."""

    array: ArrayFound
    note: str | None = None
    problem: str | None = None


Plan = Pack | Clear | Finish | Leave


def keys_read(document: Any) -> ChunkKeys | None:
    """The keys of the files a v3 array document reads (its chunks, or its shards: the chunks of
    its grid) under a regular grid and the default or ``v2`` chunk key encoding; None where the
    document says no such thing (then any file below the array may be one it reads).

    >>> keys_read({"shape": [4], "chunk_grid": {"name": "regular", "configuration":
    ...     {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"}}).key((1,))
    'c/1'
    """
    if not isinstance(document, dict) or not isinstance(document.get("shape"), list):
        return None
    chunks, keys = chunk_shape(document), document.get("chunk_key_encoding")
    if chunks is None or not isinstance(keys, dict) or len(chunks) != len(document["shape"]):
        return None
    if any(not isinstance(n, int) or n < 0 for n in document["shape"]) or not all(chunks):
        return None
    configuration = keys.get("configuration", {})
    name = keys.get("name")
    default = {"default": "/", "v2": "."}.get(name) if isinstance(name, str) else None
    separator = configuration.get("separator", default) if isinstance(configuration, dict) else None
    if default is None or separator not in ("/", "."):
        return None
    shape = tuple(document["shape"])
    return ChunkKeys(shape, tuple(chunks), separator, "c" if name == "default" else "")


def unread_shards(document: Any, names: Iterable[str]) -> list[str]:
    """Among ``names`` (below an array's folder), the shards a sharding of the array by this tool
    writes and its document does not read: the keys of v3's default encoding with the separator
    other than its own (`other_separator`; ``c/...`` where it reads v2 keys), of any grid. Only a
    killed run of this tool leaves them: zarr writes the keys its document reads. Nothing where the
    document's keys are unknown, or where a name below ``c/`` is a node's file (a Zarr v2 node may
    lie there).

    >>> doc = {"shape": [8, 8], "chunk_grid": {"name": "regular", "configuration":
    ...     {"chunk_shape": [4, 8]}}, "chunk_key_encoding": {"name": "default",
    ...     "configuration": {"separator": "/"}}}
    >>> unread_shards(doc, ["c/0/0", "c.0.0", "c.7.1", "c.0", "c.x.0", "zarr.json"])
    ['c.0.0', 'c.7.1']
    """
    separator = _unread_separator(document)
    if separator is None:
        return []
    names = list(names)
    if separator == "/" and any(
        name.startswith("c/") and name.rpartition("/")[2] in METADATA_NAMES for name in names
    ):
        return []
    rank = len(document["shape"])
    found = []
    for name in names:
        parts = name.split(separator)
        if (
            parts[0] == "c"
            and len(parts) == rank + 1
            and all(part.isdigit() and part.isascii() for part in parts[1:])
        ):
            found.append(name)
    return sorted(found)


def may_hold_unread_shards(document: Any, files: Iterable[str], subfolders: Iterable[str]) -> bool:
    """Whether an array's folder, as a walk lists it (its own files and subfolders), may hold
    `unread_shards`: one of its files is one, or they would lie in its subfolder ``c``."""
    separator = _unread_separator(document)
    if separator == "/":
        return "c" in subfolders
    return separator is not None and bool(unread_shards(document, files))


def _unread_separator(document: Any) -> str | None:
    """The separator of the keys a sharding of the array by this tool writes, which its document
    does not read; None where its keys are unknown, or it is 0-d (never sharded)."""
    keys = keys_read(document)
    if keys is None or not keys.shape:
        return None
    return other_separator(keys.separator) if keys.prefix else "/"


def chunk_keys(document: dict[str, Any]) -> ChunkKeys | None:
    """Where an unsharded v3 array's chunk files lie (v2 keys, or v3's default keys); None for a
    sharded array, or one whose chunks are not of a regular grid."""
    codecs = document.get("codecs")
    sharded = not isinstance(codecs, list) or any(
        not isinstance(codec, dict) or codec.get("name") == "sharding_indexed" for codec in codecs
    )
    return None if sharded else keys_read(document)


def v2_keys(zarray: dict[str, Any]) -> ChunkKeys:
    """Where a v2 array's chunk files lie (its ``.zarray`` as v2 readers take it)."""
    return ChunkKeys(
        tuple(zarray["shape"]), tuple(zarray["chunks"]), zarray.get("dimension_separator") or "."
    )


def layouts(
    document: dict[str, Any], shard_size: int | None, explicit: Sequence[int] | None
) -> Layouts:
    """An array's shard layouts from its document (``zarr.json`` as the store holds it now), for a
    ``shard_size`` or an ``explicit`` shard shape asked for (`sharding.shard_layout`): sharded
    already, the layout asked is that of its inner chunks."""
    now = layout_of(document)
    asked_for = shard_size is not None or explicit is not None
    if now is None and chunk_keys(document) is None:
        return Layouts(None, None, asked_for)
    try:
        asked, note = shard_layout(
            inner_document(document) if now is not None else document, shard_size, explicit
        )
    except ValueError as exc:
        return Layouts(now, None, asked_for, problem=exc)
    return Layouts(now, asked, asked_for, note)


def shard_count(array: ArrayFound, layouts: Layouts) -> int:
    """How many shards packing the array writes at most (0 where nothing is packed): what sizes a
    round."""
    if layouts.asked is None:
        return 0
    count = 1
    for extent, size in zip(array.document["shape"], layouts.asked.shape, strict=True):
        count *= -(-int(extent) // size)
    return count


def decided_by_document(array: ArrayFound, layouts: Layouts) -> bool:
    """Whether `plan` decides from the array's document alone, with no file named: an unsharded
    array that no shards can be made for is left as it is, whatever files are below it (it is not
    read again nor listed: two requests an array on an object store, for each of a store's small
    arrays)."""
    return (
        not array.was_removing
        and not array.retired
        and not array.leftovers
        and layouts.now is None
        and layouts.asked is None
    )


def retiring(array: ArrayFound) -> tuple[dict[str, str], dict[str, str]]:
    """Of the files a killed run wrote down as switched away from (`ArrayFound.retired`), those
    the array's documents, as read now, no longer read (to remove), and those they still read (the
    run was killed before the switch: they stay). A marker is a hint; the documents decide. Where
    the ``zarr.json`` says no keys this tool knows, every file stays."""
    keys = keys_read(array.document)
    if keys is None:
        return {}, dict(array.retired)
    read = set(keys.stored(array.retired).values())
    if array.v2 is not None:
        read |= set(v2_keys(array.v2).stored(array.retired).values())
    going = {name: v for name, v in array.retired.items() if name not in read}
    return going, {name: v for name, v in array.retired.items() if name in read}


def reshard_from(array: ArrayFound, layouts: Layouts) -> ShardLayout | None:
    """The layout of the shards an array has now, where it is to be sharded anew (another shape
    asked for): its shards' indexes must then be read for `plan`; else None."""
    old, asked = layouts.now, layouts.asked
    if old is None or array.was_removing or asked is None:
        return None
    return old if asked.shape != old.shape else None


def plan(
    array: ArrayFound,
    layouts: Layouts,
    names: Iterable[str],
    removes_v2: bool,
    old_shards: Mapping[str, OldShard | Exception] | None = None,
) -> Plan:
    """What becomes of ``array`` (see the module's docstring), whose shard ``layouts`` are
    `layouts`'s. ``names``: the files below its folder; ``old_shards``: where it is resharded
    (`reshard_from`), its shards, by key.

    Raises
    ------
    rules.UnconvertibleError
        Where a shard shape asked for an unsharded array is not a multiple of its chunks.
    """
    names = list(names)
    if array.was_removing:
        return _finish(array, names)
    if layouts.now is not None:
        if old_shards is not None:
            return _resharded(array, names, layouts, old_shards)
        return _sharded(array, names, layouts.now, removes_v2)
    keys = chunk_keys(array.document)
    if keys is None:
        return Leave(
            array,
            "left unsharded: its codecs or chunk keys are none that shards can be made of"
            if layouts.asked_for and array.document.get("codecs")
            else None,
        )
    if layouts.problem is not None:
        raise layouts.problem
    layout = layouts.asked
    if layout is None:
        return Leave(array, layouts.note)
    layout = layout._replace(separator="/" if not keys.prefix else other_separator(keys.separator))
    stored = keys.stored(names)
    plans = shards_of(keys.shape, layout)
    shards = _shards(array.at, plans, lambda index: _file(array.at, stored, index))
    return Pack(array, layout, sharded_document(array.document, layout), keys, plans, shards)


def _resharded(
    array: ArrayFound,
    names: list[str],
    layouts: Layouts,
    old_shards: Mapping[str, OldShard | Exception],
) -> Plan:
    """A sharded array in new shards: each inner chunk, a byte range of its shard now, into its new
    shard."""
    old, layout = layouts.now, layouts.asked
    assert old is not None and layout is not None  # `reshard_from` said so
    unsharded = inner_document(array.document)
    layout = layout._replace(separator=other_separator(old.separator))
    shape = tuple(int(n) for n in array.document["shape"])
    sources = ChunkKeys(shape, old.shape, old.separator, "c")
    ranges: dict[tuple[int, ...], ByteRange] = {}
    for plan_now in shards_of(shape, old):
        if plan_now.key not in names:
            continue  # no such shard: its chunks are empty
        found = old_shards.get(plan_now.key)
        if found is None or isinstance(found, Exception):
            why = "not read" if found is None else str(found)
            return Leave(array, None, f"{plan_now.key}: {why}; left in the shards it has")
        for index, entry in zip(plan_now.inner, found.entries, strict=True):
            if index is not None and entry is not None:
                ranges[index] = ByteRange(
                    array.at.file(plan_now.key), entry[0], entry[0] + entry[1]
                )
    plans = shards_of(shape, layout)
    shards = _shards(array.at, plans, ranges.get)
    found_shards = {
        key: shard for key, shard in old_shards.items() if not isinstance(shard, Exception)
    }
    sharded = sharded_document(unsharded, layout)
    return Pack(array, layout, sharded, sources, plans, shards, old, found_shards)


def _sharded(
    array: ArrayFound,
    names: list[str],
    layout: ShardLayout,
    removes_v2: bool,
) -> Plan:
    """An array sharded already, in the shape asked for (or none asked): its v2 chunk files cleared
    where the run removes them."""
    if array.v2 is None or array.conversion is None or not removes_v2:
        return Leave(array)
    keys = v2_keys(array.v2)
    stored = keys.stored(names)
    if not stored:
        return Leave(array)
    if not holds_chunks_of(array.document, array.conversion) or not (
        layout.index_at_end and layout.checksum
    ):
        return Leave(
            array,
            None,
            f"{len(stored):,} v2 chunk files kept: its shards are not made of "
            "them (their inner chunks have another shape or other codecs); "
            "remove them once no Zarr v2 reader needs them",
        )
    shards = _shards(
        array.at,
        shards_of(keys.shape, layout),
        lambda index: _file(array.at, stored, index),
    )
    return Clear(array, [shard for shard in shards if any(shard.sources)])


def _file(
    at: Location, stored: Mapping[tuple[int, ...], str], index: tuple[int, ...]
) -> str | None:
    return at.file(stored[index]) if index in stored else None


def _shards(at: Location, plans: list[ShardPlan], source_of: Any) -> list[Shard]:
    """Each planned shard with its sources (``source_of``: an inner chunk's source by its grid
    index, or None)."""

    def source(index: tuple[int, ...] | None) -> str | ByteRange | None:
        return None if index is None else source_of(index)

    return [Shard(at.file(shard.key), tuple(map(source, shard.inner))) for shard in plans]


def _finish(array: ArrayFound, names: list[str]) -> Finish:
    keys = chunk_keys(array.conversion) if array.conversion is not None else None
    if keys is None and array.v2 is not None:
        keys = v2_keys(array.v2)
    read = keys_read(array.document)
    stored = sorted(keys.stored(names).values()) if keys is not None else []
    if read is not None:  # the document decides: never a file it reads
        still_read = set(read.stored(stored).values())
        stored = [name for name in stored if name not in still_read]
    folders = sorted({name.split("/")[0] for name in stored if "/" in name})
    return Finish(
        array,
        [array.at.file(name) for name in stored],
        [array.at.file(f) for f in folders],
    )
