"""The chunk mover: shards made of a store's chunk files, byte for byte, without decoding a chunk.

A shard (Zarr v3 ``sharding_indexed``, index at the end) is its inner
chunks' bytes one after another, then an index of (offset, nbytes) pairs,
little-endian uint64 in C order of the inner grid (both ``2**64 - 1`` for an
empty entry), then the index's crc32c, 4 bytes little endian. Where the inner
chunks are a Zarr v2 array's chunks and the inner codecs its own, each chunk
file is an inner chunk as it is: a shard is those files one after another plus
an index.

Each backend's packing strategy packs `Shard`s (`files.ShardPacking.pack`):
it reads the chunk files, writes each shard whole or not at all, reads it
back and compares every inner chunk with its source, and says what it read
of each source (a `Packed`), for the caller's later check that nothing
changed since (`Files.versions`) and for removals that hold only while a
file is unchanged. It also says what a shard in the store holds of the chunk
files it was made of (`files.ShardPacking.held`, a `Held`): where the chunk
files were kept, which of them a later run may remove.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "EMPTY",
    "INDEX_ENTRY",
    "ByteRange",
    "Held",
    "Packed",
    "Shard",
    "ShardError",
    "gone",
    "index_size",
    "parsed_index",
    "shard_index",
    "source_path",
]

EMPTY = 2**64 - 1
"""Offset and length of an inner chunk that is not stored."""
INDEX_ENTRY = 16
"""Bytes of one index entry: offset and length, uint64 each."""
CHECKSUM = 4
"""Bytes of the index's crc32c, after it."""


def index_size(count: int, checksum: bool = True) -> int:
    """Bytes of the index of a shard of ``count`` inner chunks, its checksum too (where it has one).

    >>> index_size(3), index_size(3, checksum=False)
    (52, 48)
    """
    return count * INDEX_ENTRY + (CHECKSUM if checksum else 0)


class ByteRange(NamedTuple):
    """Bytes ``start`` to ``end`` (exclusive) of a data file."""

    path: str
    start: int
    end: int


class Shard(NamedTuple):
    """One shard to write: its file, and each inner chunk's source in C order of the inner grid.

    A source is a chunk file, or a byte range of another shard (resharding), that was listed just
    before (None: no chunk there). One that is gone when the shard is made was removed by another
    writer meanwhile: the shard is not written (`ShardError`).
    """

    path: str
    sources: tuple[str | ByteRange | None, ...]


def source_path(source: str | ByteRange) -> str:
    """The file a shard's source lies in."""
    return source if isinstance(source, str) else source.path


class Packed(NamedTuple):
    """What packing one shard read and wrote."""

    sizes: tuple[int | None, ...]  # each inner chunk's bytes; None where there is no source
    # what each source's file was when read (`Files.versions`); None: no source
    versions: tuple[str | None, ...]
    # False where nothing was written: no source (no shard), or the file held it already
    written: bool
    linked: int = 0  # sources that are symbolic links (packed from their targets)
    copied: int = 0  # bytes the store copied itself (S3's UploadPartCopy), not read by the client
    # why the store refused to copy (the shard was then packed through the client); None: it did not
    refused: str | None = None


class Held(NamedTuple):
    """What a shard in the store holds of the chunk files it was packed from (compared byte for
    byte)."""

    # per source: the shard holds exactly its bytes, at its place (None: no source)
    same: tuple[bool | None, ...]
    # each source's version as compared (None: no source, or none found)
    versions: tuple[str | None, ...]
    # when each source was last written (seconds since the epoch; None: unknown)
    written: tuple[float | None, ...]
    shard_written: float | None  # when the shard was last written


class ShardError(OSError):
    """A shard that could not be made as its sources say (a source changed or gone while it was
    read, a file system that stored other bytes)."""


def gone(path: str) -> ShardError:
    """The error of a chunk file listed for a shard and gone when the shard was made."""
    return ShardError(
        f"{path}: listed, then gone before its shard was made (another writer): no shard written"
    )


def shard_index(sizes: Sequence[int | None]) -> bytes:
    """The index of a shard whose inner chunks have ``sizes`` (None: empty), stored one after
    another in that order: the (offset, nbytes) pairs and their crc32c.

    >>> index = shard_index([3, None, 2])
    >>> index[:16].hex(), index[16:32].hex(), len(index)
    ('00000000000000000300000000000000', 'ffffffffffffffffffffffffffffffff', 52)
    """
    entries, offset = [], 0
    for size in sizes:
        if size is None:
            entries.append((EMPTY, EMPTY))
        else:
            entries.append((offset, size))
            offset += size
    index = b"".join(struct.pack("<QQ", start, length) for start, length in entries)
    return index + struct.pack("<I", _crc32c(index))


def parsed_index(
    data: bytes | memoryview, count: int, checksum: bool = True
) -> list[tuple[int, int] | None]:
    """The (offset, nbytes) of each of ``count`` inner chunks from the end of ``data`` (a shard's
    last bytes: its index, and the index's crc32c, checked, where ``checksum``)."""
    size = index_size(count, checksum=False)
    tail_size = index_size(count, checksum)
    if len(data) < tail_size:
        raise ShardError(
            f"shard of {len(data)} bytes is shorter than its index ({tail_size} bytes)"
        )
    # a copy: no view of the caller's buffer outlives the call
    tail = bytes(data[len(data) - tail_size :])
    index, stored = tail[:size], tail[size:]
    if checksum and struct.pack("<I", _crc32c(index)) != stored:
        raise ShardError("the shard's index does not match its checksum")
    pairs = struct.unpack(f"<{2 * count}Q", index)
    return [None if pairs[i] == EMPTY else (pairs[i], pairs[i + 1]) for i in range(0, 2 * count, 2)]


def _crc32c(data: bytes) -> int:
    """The CRC-32C of ``data``: by the library zarr's crc32c codec uses where one is installed
    (google-crc32c since zarr 3.1.4, numcodecs' crc32c before), else a table here (an index is
    small: 16 bytes a chunk)."""
    try:
        import google_crc32c
    except ImportError:
        try:
            from crc32c import crc32c
        except ImportError:
            return _table_crc32c(data)
        return int(crc32c(data))
    return int(google_crc32c.value(data))


def _table_crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), a byte at a time from a table.

    >>> hex(_table_crc32c(b"123456789"))  # the catalogue's check value for CRC-32/ISCSI
    '0xe3069283'
    """
    if not _CRC32C_TABLE:
        _CRC32C_TABLE.extend(_crc32c_row(byte) for byte in range(256))
    table, crc = _CRC32C_TABLE, 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_row(byte: int) -> int:
    for _ in range(8):
        byte = (byte >> 1) ^ (0x82F63B78 if byte & 1 else 0)
    return byte


_CRC32C_TABLE: list[int] = []
