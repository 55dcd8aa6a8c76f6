"""The parts of a shard assembled inside S3 (`store.s3_parts`): S3's limits hold, the parts put
together are the shard, and the bytes through the client are bounded as the guide says.

The oracle of the bytes is the shard itself: the chunks one after another, then the index, as a
client-packed shard is (`chunks.shard_index`); the parts are read back into bytes from the chunks.
"""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from numcodecs_bytes.store.s3_parts import Part, is_md5, multipart_tag, shard_parts

SMALLEST = 50  # bytes: the rule at a small scale (S3's is 5 MiB)

sizes_of_chunks = st.lists(
    st.one_of(st.none(), st.integers(0, 3 * SMALLEST), st.integers(SMALLEST, 3 * SMALLEST)),
    max_size=30,
)


def assembled(parts: list[Part], chunks: list[bytes | None], index: bytes) -> bytes:
    out = b""
    for part in parts:
        for piece in part.pieces:
            chunk = chunks[piece.chunk]
            assert chunk is not None
            out += chunk[piece.start : piece.end]
    return out + index


@given(sizes_of_chunks)
def test_the_parts_are_the_shard_and_hold_s3s_limits(sizes: list[int | None]) -> None:
    chunks = [None if size is None else bytes([i % 251]) * size for i, size in enumerate(sizes)]
    parts = shard_parts(sizes, SMALLEST)
    if parts is None:
        # nothing to copy: a chunk of twice the smallest part is copied at least in part
        assert all(size is None or size < 2 * SMALLEST for size in sizes)
        return
    assert assembled(parts, chunks, b"INDEX") == b"".join(c for c in chunks if c) + b"INDEX"
    assert all(part.size >= SMALLEST for part in parts[:-1])  # the last may be small
    assert not parts[-1].copied  # the index goes up with it
    assert all(len(part.pieces) == 1 for part in parts if part.copied)
    # through the client: the small chunks, and per part sent up less than twice SMALLEST of a
    # large one
    small = sum(size for size in sizes if size is not None and size < SMALLEST)
    sent = sum(part.size for part in parts if not part.copied)
    sent_up = sum(1 for part in parts if not part.copied)
    assert sent < small + sent_up * 2 * SMALLEST


@given(sizes_of_chunks)
def test_a_chunk_of_twice_the_smallest_part_or_more_is_always_copied_in_most_part(
    sizes: list[int | None],
) -> None:
    parts = shard_parts(sizes, SMALLEST)
    large = sum(size for size in sizes if size is not None and size >= 2 * SMALLEST)
    if large:
        assert parts is not None
        copied = sum(part.size for part in parts if part.copied)
        assert copied >= large - SMALLEST * sum(1 for part in parts if not part.copied)


@given(sizes_of_chunks, st.integers(SMALLEST, 4 * SMALLEST))
def test_without_copies_every_chunk_goes_up_whole_in_parts_within_s3s_limits(
    sizes: list[int | None], largest: int
) -> None:
    """``copy=False`` (a large shard S3 copies nothing of, or --no-server-copy): the parts put
    together are the shard, every chunk in them, none copied; every part but the last
    holds the smallest part's bytes or more, and none holds more than S3's largest (here
    ``largest``, at a small scale) unless one chunk alone is that large; none is empty but the last;
    a chunk past the largest a part may hold makes no upload (None)."""
    import numcodecs_bytes.store.s3_parts as s3_parts

    chunks = [None if size is None else bytes([i % 251]) * size for i, size in enumerate(sizes)]
    saved = s3_parts.LARGEST_PART
    s3_parts.LARGEST_PART = largest
    try:
        parts = shard_parts(sizes, SMALLEST, copy=False)
    finally:
        s3_parts.LARGEST_PART = saved
    if any(size is not None and size > largest for size in sizes):
        assert parts is None
        return
    assert parts is not None
    assert assembled(parts, chunks, b"INDEX") == b"".join(c for c in chunks if c) + b"INDEX"
    assert not any(part.copied for part in parts)
    pieces = [piece for part in parts for piece in part.pieces]
    assert {piece.chunk for piece in pieces} == {i for i, size in enumerate(sizes) if size}
    split = [
        chunk
        for chunk in {piece.chunk for piece in pieces}
        if len([p for p in pieces if p.chunk == chunk]) > 1
    ]
    for chunk in split:  # only where the part before it held less than the smallest
        assert sum(p.end - p.start for p in pieces if p.chunk == chunk) == sizes[chunk]
    assert all(part.size >= SMALLEST for part in parts[:-1])
    assert all(part.size <= largest for part in parts)
    assert all(part.pieces for part in parts[:-1])


def test_the_rule_by_example() -> None:
    MiB = 2**20
    cases = {
        # every chunk large: each copied, the index alone last
        (8 * MiB, 8 * MiB): [("copy", 8 * MiB), ("copy", 8 * MiB), ("up", 0)],
        # small ones before a large: up with its first bytes, the rest copied
        (MiB, MiB, 12 * MiB): [("up", 5 * MiB), ("copy", 9 * MiB), ("up", 0)],
        # the rest would be under 5 MiB: the large one goes up whole
        (MiB, 8 * MiB, 8 * MiB): [("up", 9 * MiB), ("copy", 8 * MiB), ("up", 0)],
        # small ones after: up with the index
        (8 * MiB, None, MiB): [("copy", 8 * MiB), ("up", MiB)],
        # small ones that make 5 MiB go up as one part
        (3 * MiB, 3 * MiB, 8 * MiB): [("up", 6 * MiB), ("copy", 8 * MiB), ("up", 0)],
    }
    for sizes, expected in cases.items():
        parts = shard_parts(list(sizes))
        assert parts is not None
        assert [("copy" if p.copied else "up", p.size) for p in parts] == expected, sizes
    assert shard_parts([MiB] * 10) is None  # nothing to copy: one PUT
    assert shard_parts([4 * MiB, 11 * MiB // 2]) is None  # the large one goes up with the small
    assert shard_parts([6 * 2**30]) is None  # larger than a part may be
    assert shard_parts([5 * MiB] * 10_001) is None  # more parts than S3 takes


def test_the_etag_of_a_multipart_object_is_the_md5_of_its_parts_md5s() -> None:
    parts = [b"a" * 10, b"b" * 3]
    tags = [f'"{hashlib.md5(p).hexdigest()}"' for p in parts]
    digests = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    assert multipart_tag(tags) == f'"{digests}-2"'
    assert is_md5(tags[0]) and not is_md5(multipart_tag(tags)) and not is_md5('"xyz"')
