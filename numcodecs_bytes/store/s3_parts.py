"""A shard as the parts of an S3 multipart upload: which bytes S3 copies itself, which go up.

S3 assembles an object from parts of 5 MiB or more (all but the last), each
either uploaded or copied by S3 from a byte range of an object it holds
(``UploadPartCopy``). A shard is its inner chunks' bytes one after another,
then its index: its chunks of 5 MiB or more are copied inside S3, and only the
smaller ones pass through the client. The rule (`shard_parts`), chunk after
chunk in the shard's order:

- a chunk of 5 MiB or more is a part copied by S3, unless smaller chunks wait
  before it: then the smaller ones go up with as many of its first bytes as
  make 5 MiB, and S3 copies the rest of it (where the rest is 5 MiB or more;
  else the whole chunk goes up with them);
- chunks under 5 MiB wait, and go up as one part once they hold 5 MiB;
- what waits at the end goes up with the index, as the last part.

So the bytes through the client are the small chunks' and, per run of small
chunks, less than 10 MiB of the next chunk (5 MiB of it, or the whole of it
where it is under 10 MiB and the rest would be too small to copy). Where no
part would be copied, the shard is better one plain PUT (`shard_parts` says
None), unless it is large: then every chunk goes up, in parts of 5 MiB or more
(``copy=False``), so that the client holds a few parts of it at a time, never
the whole shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["LARGEST_PART", "MAX_PARTS", "SMALLEST_PART", "Part", "Piece", "multipart_tag"]

SMALLEST_PART = 5 * 2**20
"""The fewest bytes of a part of a multipart upload, but the last (S3's limit)."""
LARGEST_PART = 5 * 2**30
"""The most bytes of one part, copied or uploaded (S3's limit)."""
MAX_PARTS = 10_000
"""The most parts of one multipart upload (S3's limit)."""


class Piece(NamedTuple):
    """Bytes ``start`` to ``end`` (exclusive) of a shard's inner chunk ``chunk`` (its position among
    the shard's sources)."""

    chunk: int
    start: int
    end: int


class Part(NamedTuple):
    """One part of the upload: one piece copied by S3, or pieces (and, last, the index) uploaded."""

    copied: bool
    pieces: tuple[Piece, ...]

    @property
    def size(self) -> int:
        """The part's bytes, the index left out."""
        return sum(piece.end - piece.start for piece in self.pieces)


def shard_parts(
    sizes: Sequence[int | None], smallest: int = SMALLEST_PART, copy: bool = True
) -> list[Part] | None:
    """The parts of a shard whose inner chunks have ``sizes`` (None: no chunk), by the rule of the
    module; the index goes with the last part, which is uploaded. None where S3 would copy no part,
    or the upload would break S3's limits (more than `MAX_PARTS` parts, a chunk of more than
    `LARGEST_PART` bytes): the shard is better written in one request. With ``copy`` False, every
    chunk goes up, in parts of ``smallest`` bytes or more (a chunk whole, but where the part before
    it would be too small and the part too large with all of it); None only where S3's limits say.

    >>> MiB = 2**20
    >>> [(p.copied, [tuple(x) for x in p.pieces]) for p in shard_parts([8 * MiB, None, 8 * MiB])]
    [(True, [(0, 0, 8388608)]), (True, [(2, 0, 8388608)]), (False, [])]
    >>> [(p.copied, p.size // 2**10) for p in shard_parts([MiB, 12 * MiB, MiB])]
    [(False, 5120), (True, 8192), (False, 1024)]
    >>> shard_parts([MiB, MiB]) is None
    True
    >>> [(p.copied, p.size // MiB) for p in shard_parts([3 * MiB, 8 * MiB, MiB], copy=False)]
    [(False, 11), (False, 1)]
    """
    parts: list[Part] = []
    waiting: list[Piece] = []
    held = 0  # the waiting pieces' bytes

    def go_up() -> None:
        nonlocal held
        parts.append(Part(False, tuple(waiting)))
        waiting.clear()
        held = 0

    for chunk, size in enumerate(sizes):
        if not size:  # no chunk, or an empty one: no bytes in any part
            continue
        if size > LARGEST_PART:
            return None
        if not copy and waiting and held + size > LARGEST_PART:
            # (a part holds at most S3's largest, and all but the last at least the smallest: what
            # waits is made up to that with the chunk's first bytes where it holds less)
            if held < smallest:
                first = smallest - held
                waiting.append(Piece(chunk, 0, first))
                go_up()
                waiting.append(Piece(chunk, first, size))
                held = size - first
                if held >= smallest:
                    go_up()
                continue
            go_up()
        if size < smallest or not copy:
            waiting.append(Piece(chunk, 0, size))
            held += size
            if held >= smallest:
                go_up()
        elif not waiting:
            parts.append(Part(True, (Piece(chunk, 0, size),)))
        elif size - (smallest - held) >= smallest:
            # the waiting chunks made 5 MiB with this one's first bytes; S3 copies the rest
            first = smallest - held
            waiting.append(Piece(chunk, 0, first))
            go_up()
            parts.append(Part(True, (Piece(chunk, first, size),)))
        else:
            waiting.append(Piece(chunk, 0, size))
            go_up()
    go_up()  # the last part: what waits, and the index
    if (copy and not any(part.copied for part in parts)) or len(parts) > MAX_PARTS:
        return None
    return parts


def multipart_tag(part_tags: Sequence[str]) -> str:
    """The ETag S3 gives the object a multipart upload of parts with these ETags (each the MD5 of
    its part's bytes) makes: the MD5 of their MD5s, then their number.

    >>> multipart_tag(['"' + "00" * 16 + '"'])
    '"4ae71336e44bf9bf79d2752e234818a5-1"'
    """
    digests = b"".join(bytes.fromhex(tag.strip('"')) for tag in part_tags)
    return f'"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(part_tags)}"'


def is_md5(tag: str) -> bool:
    """Whether an ETag is the MD5 of its object's bytes, as S3 makes it for an object written in one
    request without KMS: 32 hexadecimal digits."""
    digits = tag.strip('"')
    return len(digits) == 32 and all(c in "0123456789abcdef" for c in digits)
