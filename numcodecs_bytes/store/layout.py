"""The Zarr layout facts the store tools rely on: where a node lies (`Location`), which files make
a node, where an array's chunks lie.

Pure functions of names and metadata: nothing here reads a store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, NamedTuple

__all__ = [
    "METADATA_NAMES",
    "NODE_FILES",
    "REMOVING_V2",
    "RETIRED",
    "V2_METADATA_FILES",
    "ChunkKeys",
    "Location",
    "chunk_folders",
    "chunk_indices",
    "chunk_key",
    "chunk_region",
    "nested_layout",
]

NODE_FILES = ("zarr.json", ".zarray", ".zgroup", ".zmetadata")
"""Any of these makes a folder a Zarr node."""
REMOVING_V2 = ".zarray.numcodecs-bytes-removing"
"""A sharded array's v2 metadata, kept aside (v2 readers do not see it) while to-v3 removes the
chunk files its shards replaced: a killed run's rerun knows them by it, and finishes."""
RETIRED = ".numcodecs-bytes-retired"
"""Beside an array that switched to new shards: the files it read before (its chunk files, or its
old shards), with their versions, while to-v3 removes them: a killed run's rerun finishes the
removal."""
METADATA_NAMES = (*NODE_FILES, ".zattrs", REMOVING_V2, RETIRED)
"""The metadata files of a node: the files the tools read, replace or remove (never a chunk)."""
V2_METADATA_FILES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
"""The Zarr v2 metadata files (never a chunk)."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a node, or a file, lies in a store, as zarr's ``StorePath``: the store's root (a path
    of its `files.Files`) and a path below it, ``/``-separated ("" for the root itself). The one
    place a node's path and its key in the store's files are joined, or told apart.

    Examples
    --------
    >>> array = Location("bucket/store", "group/a")
    >>> array.key, array.file("zarr.json")
    ('bucket/store/group/a', 'bucket/store/group/a/zarr.json')
    >>> array.below("bucket/store/group/a/c/0/0"), (array / "c").path
    ('c/0/0', 'group/a/c')
    >>> Location("bucket/store").file(".zgroup")
    'bucket/store/.zgroup'
    """

    root: str
    path: str = ""

    @property
    def key(self) -> str:
        """Its path in the store's files."""
        return f"{self.root}/{self.path}" if self.path else self.root

    def __truediv__(self, name: str) -> Location:
        return Location(self.root, f"{self.path}/{name}" if self.path else name)

    def file(self, name: str) -> str:
        """The path in the store's files of ``name``, here."""
        return f"{self.key}/{name}"

    def below(self, key: str) -> str:
        """A path of the store's files below this location, relative to it (what `file` was
        given)."""
        folder = f"{self.key}/"
        if not key.startswith(folder):
            raise ValueError(f"{key} does not lie below {self.key}")
        return key[len(folder) :]


_DIGITS = re.compile(r"[0-9]+")
_DOTTED_DIGITS = re.compile(r"[0-9]+(\.[0-9]+)+")


def nested_layout(subfolders: Iterable[str], files: Iterable[str], rank: int) -> bool | None:
    """Whether a Zarr v2 array folder holds nested chunks (``0/0``): True, False, or None where it
    holds none.

    Raises ValueError where it holds both layouts (``0.0`` files and digit folders).

    >>> nested_layout(["0", "1"], [".zarray"], 2), nested_layout([], ["0.0", ".zarray"], 2)
    (True, False)
    >>> nested_layout([], [], 2) is None
    True
    """
    if rank < 2:
        return False
    nested = any(_DIGITS.fullmatch(name) for name in subfolders)
    flat = any(_DOTTED_DIGITS.fullmatch(name) for name in files)
    if nested and flat:
        raise ValueError("its folder holds chunks in both layouts ('0.0' files and '0/0' folders)")
    return True if nested else False if flat else None


def chunk_folders(subfolders: Sequence[str], files: Sequence[str], zarray: Any) -> list[str]:
    """The subfolders of a Zarr v2 array folder that hold its chunks (``zarray``: its parsed
    ``.zarray``): a walk does not enter them; any other may hold a node zarr 2 opens by its path.

    Chunks lie in folders only with two axes or more and the separator ``/``
    (chunk keys ``0/0``), named by digits. Where the ``.zarray`` names no
    ``dimension_separator``, the layout is the one the store shows (zarr
    before 2.8 wrote ``0/0`` under such metadata, with NestedDirectoryStore);
    where it shows both, or the ``.zarray`` is no array metadata, every digit
    folder (no node zarr reads lies in one).

    >>> chunk_folders(["0", "1", "sub"], [".zarray"], {"shape": [4, 4], "dimension_separator": "/"})
    ['0', '1']
    >>> chunk_folders(["0", "sub"], [".zarray"], {"shape": [4, 4], "dimension_separator": "."})
    []
    """
    shape = zarray.get("shape") if isinstance(zarray, dict) else None
    separator = zarray.get("dimension_separator") if isinstance(zarray, dict) else None
    digits = [name for name in subfolders if _DIGITS.fullmatch(name)]
    if not isinstance(shape, list):
        return digits
    try:
        shown = nested_layout(subfolders, files, len(shape)) if separator is None else None
    except ValueError:
        return digits
    if len(shape) < 2 or separator == "." or (separator is None and shown is False):
        return []
    return digits


def chunk_key(zarray: dict[str, Any], index: tuple[int, ...]) -> str:
    """The v2 key of the chunk at ``index`` of the chunk grid (``0.1``, ``0/1``; ``0`` for a 0-d
    array)."""
    return (zarray.get("dimension_separator") or ".").join(map(str, index)) or "0"


def chunk_region(zarray: dict[str, Any], index: tuple[int, ...]) -> tuple[slice, ...]:
    """The part of the array the chunk at ``index`` holds (edge chunks cut at the array's edge)."""
    return tuple(
        slice(i * size, min((i + 1) * size, extent))
        for i, size, extent in zip(index, zarray["chunks"], zarray["shape"], strict=True)
    )


def chunk_grid(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    """Chunks per axis."""
    return tuple(-(-extent // size) for extent, size in zip(shape, chunks, strict=True))


def chunk_indices(zarray: dict[str, Any], names: Iterable[str] | None) -> Iterator[tuple[int, ...]]:
    """The grid indices of an array's stored chunks, chunk 0 first, then in C order: those among
    ``names`` (the files of its folder) where chunks are files there; every index of the grid where
    ``names`` is None or the chunks lie in folders (``0/0``). Nothing for an array with no element.

    >>> zarray = {"shape": [4, 4], "chunks": [2, 2]}
    >>> list(chunk_indices(zarray, ["1.1", ".zarray", "0.1", "9.9"]))
    [(0, 0), (0, 1), (1, 1)]
    """
    grid = chunk_grid(zarray["shape"], zarray["chunks"])
    if not all(zarray["shape"]):
        return
    origin = tuple(0 for _ in grid)
    yield origin
    if not grid:  # 0-d: one chunk, "0"
        return
    separator = zarray.get("dimension_separator") or "."
    if names is None or (separator == "/" and len(grid) > 1):
        yield from (index for index in product(*map(range, grid)) if index != origin)
        return
    found = []
    for name in names:
        if (_DIGITS.fullmatch(name) or _DOTTED_DIGITS.fullmatch(name)) and name.count(".") == len(
            grid
        ) - 1:
            index = tuple(int(part) for part in name.split("."))
            if all(i < n for i, n in zip(index, grid, strict=True)) and index != origin:
                found.append(index)
    yield from sorted(found)


class ChunkKeys(NamedTuple):
    """Where an array's chunk files lie: under Zarr v2 keys (``0.1``, ``0/1``; ``0`` for a 0-d
    array: a v2 array, or a v3 array with the ``v2`` chunk key encoding), or under Zarr v3's default
    keys (``prefix`` ``c``: ``c/0/1``, ``c.0.1``; ``c`` for a 0-d array), below its folder.
    ``chunks``: the chunk shape (for the shards of a sharded array, the shard shape).

    >>> keys = ChunkKeys((4, 4), (2, 2), "/")
    >>> keys.key((1, 0)), keys.stored(["0/1", "1/1", "c/0/0", "zarr.json", "2/0"])
    ('1/0', {(0, 1): '0/1', (1, 1): '1/1'})
    >>> ChunkKeys((4, 4), (2, 2), ".", "c").stored(["c.1.0", "c/1/0", "1.0"])
    {(1, 0): 'c.1.0'}
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    separator: str  # "." or "/"
    prefix: str = ""  # "c": Zarr v3's default keys

    def key(self, index: tuple[int, ...]) -> str:
        parts = [self.prefix, *map(str, index)] if self.prefix else list(map(str, index))
        return self.separator.join(parts) or "0"

    def stored(self, names: Iterable[str]) -> dict[tuple[int, ...], str]:
        """The chunks among ``names`` (paths below the array's folder), by grid index."""
        grid = chunk_grid(self.shape, self.chunks)
        found: dict[tuple[int, ...], str] = {}
        for name in names:
            parts = name.split(self.separator)
            if self.prefix:
                if parts[0] != self.prefix:
                    continue
                parts = parts[1:]
            elif not grid:
                parts = [] if name == "0" else ["x"]
            if len(parts) != len(grid) or not all(_DIGITS.fullmatch(part) for part in parts):
                continue
            index = tuple(int(part) for part in parts)
            # "01" is no key
            if all(i < n for i, n in zip(index, grid, strict=True)) and self.key(index) == name:
                found[index] = name
        return found
