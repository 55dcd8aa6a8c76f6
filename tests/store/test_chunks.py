"""The chunk mover (`store.shard_format`, each backend's ``pack`` and ``versions``): shards made of
chunk files, byte for byte, on a local disk, an fsspec file system (memory), S3 (moto) and Azure.

The oracle is the shard format as the spec gives it, rebuilt here with a CRC-32C
that shares no code with the package's: each chunk file's bytes one after
another, then (offset, nbytes) pairs, little-endian uint64 (2**64 - 1 twice for
an empty entry), then their crc32c.
"""

from __future__ import annotations

import os
import struct
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numcodecs_bytes.store import ByteRange, Store, disk, local_shards, open_store
from numcodecs_bytes.store.local import LocalFiles
from numcodecs_bytes.store.shard_format import (
    Held,
    Packed,
    Shard,
    ShardError,
    parsed_index,
    shard_index,
)

EMPTY = 2**64 - 1


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def expected_shard(chunks: list[bytes | None]) -> bytes:
    """The spec's shard of these inner chunks (None: not stored), in the order given."""
    pairs, offset = [], 0
    for chunk in chunks:
        pairs.append((EMPTY, EMPTY) if chunk is None else (offset, len(chunk)))
        offset += 0 if chunk is None else len(chunk)
    index = b"".join(struct.pack("<QQ", *pair) for pair in pairs)
    return (
        b"".join(chunk for chunk in chunks if chunk is not None)
        + index
        + struct.pack("<I", crc32c(index))
    )


def test_the_crc32c_oracle_gives_the_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the catalogue's check value for CRC-32/ISCSI


@given(st.binary(max_size=300))
def test_the_crc32c_without_a_library_is_the_oracles(data: bytes) -> None:
    """Where neither google-crc32c nor crc32c is installed (no zarr), the index's checksum comes
    from a table."""
    from numcodecs_bytes.store.shard_format import _table_crc32c

    assert _table_crc32c(data) == crc32c(data)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=12))
def test_the_index_is_the_specs_and_reads_back(chunks: list[bytes | None]) -> None:
    sizes = [None if chunk is None else len(chunk) for chunk in chunks]
    shard = b"".join(chunk for chunk in chunks if chunk is not None) + shard_index(sizes)
    assert shard == expected_shard(chunks)
    entries = parsed_index(shard, len(chunks))
    assert [
        None if entry is None else shard[entry[0] : entry[0] + entry[1]] for entry in entries
    ] == chunks
    if shard:
        broken = bytearray(shard)
        # one bit of the index (or of the checksum where there is no entry)
        broken[-5 if chunks else -1] ^= 1
        with pytest.raises(ShardError, match="index does not match its checksum"):
            parsed_index(bytes(broken), len(chunks))


# -- the same on every backend ---------------------------------------------------------------------


class Backend(NamedTuple):
    store: Store
    folder: str  # where the files are, as the store names them
    write: Callable[[str, bytes], None]  # a file's bytes, by its name in the folder
    read: Callable[[str], bytes | None]


@pytest.fixture(
    params=["local", "memory", "s3", pytest.param("azure", marks=pytest.mark.same_on_every_stack)]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "azure":
        yield azure_backend(request)
        return
    if request.param == "local":
        (tmp_path / ".zgroup").write_text("{}")

        def write(name: str, data: bytes) -> None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes(data)

        def read(name: str) -> bytes | None:
            return (tmp_path / name).read_bytes() if (tmp_path / name).exists() else None

        yield Backend(open_store(tmp_path), str(tmp_path), write, read)
        return
    fsspec = pytest.importorskip("fsspec")
    if request.param == "memory":
        fs, url = fsspec.filesystem("memory"), f"memory://chunks-{uuid.uuid4().hex}"
        root = fs._strip_protocol(url)
    else:
        endpoint = request.getfixturevalue("endpoint")
        from support.s3 import empty_bucket

        fs = next(empty_bucket(endpoint, request.getfixturevalue("monkeypatch"), "chunks"))
        url, root = "s3://chunks", "chunks"
    fs.pipe_file(f"{root}/.zgroup", b"{}")

    def write_object(name: str, data: bytes) -> None:
        fs.pipe_file(f"{root}/{name}", data)
        fs.invalidate_cache()

    def read_object(name: str) -> bytes | None:
        fs.invalidate_cache()
        return bytes(fs.cat_file(f"{root}/{name}")) if fs.exists(f"{root}/{name}") else None

    store = open_store(url)
    yield Backend(store, store.root, write_object, read_object)
    if request.param == "memory":
        fs.rm(root, recursive=True)


def azure_backend(request: pytest.FixtureRequest) -> Backend:
    """An empty container on Azurite, through obstore (`store.object_files`)."""
    endpoint = request.getfixturevalue("azurite")
    import obstore
    from support.azure import empty_container

    container = empty_container(endpoint, "chunks", request.getfixturevalue("monkeypatch"))
    obstore.put(container, ".zgroup", b"{}")

    def write_object(name: str, data: bytes) -> None:
        obstore.put(container, name, data)

    def read_object(name: str) -> bytes | None:
        try:
            return bytes(obstore.get(container, name).bytes())
        except FileNotFoundError:
            return None

    store = open_store("az://chunks")
    return Backend(store, store.root, write_object, read_object)


def packed_one(backend: Backend, name: str, sources: tuple[str | None, ...]) -> Any:
    path = f"{backend.folder}/{name}"
    named = tuple(None if source is None else f"{backend.folder}/{source}" for source in sources)
    return backend.store.packing.pack([Shard(path, named)])[path]


def test_a_shard_is_its_chunk_files_one_after_another_then_the_index(backend: Backend) -> None:
    backend.write("a", b"abc")
    backend.write("b", b"")  # an empty chunk file is a chunk of no bytes
    backend.write("d", b"defg")
    # None: no chunk there (not stored, or past the array's edge)
    sources = ("a", None, None, "b", "d")
    packed = packed_one(backend, "c/0", sources)
    assert isinstance(packed, Packed) and packed.written and packed.sizes == (3, None, None, 0, 4)
    expected = expected_shard([b"abc", None, None, b"", b"defg"])
    assert backend.read("c/0") == expected
    # an interrupted run's shard there: the same bytes again
    again = packed_one(backend, "c/0", sources)
    assert isinstance(again, Packed) and again.versions == packed.versions
    assert backend.store.files.versions([f"{backend.folder}/a"]) == {
        f"{backend.folder}/a": packed.versions[0]
    }

    backend.write("d", b"DEFG")  # the same size, other bytes: another version
    assert (
        backend.store.files.versions([f"{backend.folder}/d"])[f"{backend.folder}/d"]
        != packed.versions[4]
    )
    # no zarr.json reads it (the caller's part): replaced
    replaced = packed_one(backend, "c/0", sources)
    assert isinstance(replaced, Packed) and replaced.written
    assert backend.read("c/0") == expected_shard([b"abc", None, None, b"", b"DEFG"])


def test_a_chunk_file_listed_then_gone_makes_no_shard(backend: Backend) -> None:
    """Another writer removed a chunk file between the listing and the packing (zarr removes the
    chunks it fills with the fill value; another run removes those it packed): not taken for a
    missing chunk."""
    backend.write("a", b"abc")
    backend.write("c/0", b"another run's shard")
    problem = packed_one(backend, "c/0", ("a", "gone"))
    assert isinstance(problem, ShardError), problem
    assert (
        str(problem)
        == "gone: listed, then gone before its shard was made (another writer): no shard written"
    )
    assert backend.read("c/0") == b"another run's shard"


def test_a_shard_of_no_chunk_is_no_file(backend: Backend) -> None:
    backend.write("c/0", b"an interrupted run's shard, whose chunks are gone")
    packed = packed_one(backend, "c/0", (None, None))
    assert isinstance(packed, Packed) and not packed.written and packed.sizes == (None, None)
    assert backend.read("c/0") is None


def test_what_a_shard_holds_of_its_chunk_files(backend: Backend) -> None:
    """`held`: per chunk file, whether the shard holds its bytes at its place, its version, when
    each was written; a missing shard is a FileNotFoundError."""
    backend.write("a", b"abc")
    backend.write("b", b"xy")
    shard = Shard(f"{backend.folder}/c/0", (f"{backend.folder}/a", None, f"{backend.folder}/b"))
    assert isinstance(backend.store.packing.pack([shard])[shard.path], Packed)
    backend.write("b", b"XY")  # the same size, other bytes
    found = backend.store.packing.held([shard, Shard(f"{backend.folder}/c/9", shard.sources)])
    held, missing = found[shard.path], found[f"{backend.folder}/c/9"]
    assert isinstance(held, Held) and held.same == (True, None, False), held
    versions = backend.store.files.versions([f"{backend.folder}/a", f"{backend.folder}/b"])
    assert held.versions == (versions[f"{backend.folder}/a"], None, versions[f"{backend.folder}/b"])
    assert all(
        isinstance(when, float) for when in (held.written[0], held.written[2], held.shard_written)
    )
    assert isinstance(missing, FileNotFoundError), missing


def test_files_below_a_folder_and_tidying_up(backend: Backend) -> None:
    """Every file below a folder at any depth (none below one that does not exist); tidying removes
    the temporary files killed runs left below it, and the folders left empty."""
    for name in ("a/0/0", "a/0/1", "a/1/0", "a/.zarray"):
        backend.write(name, b"x")
    listed = backend.store.files.files_below([f"{backend.folder}/a", f"{backend.folder}/nothing"])
    assert sorted(listed[f"{backend.folder}/a"]) == [".zarray", "0/0", "0/1", "1/0"]  # type: ignore[arg-type]
    assert listed[f"{backend.folder}/nothing"] == []
    # temporary files, and folders that stay when emptied
    if isinstance(backend.store.files, LocalFiles):
        backend.write("a/1/.0.abc123.numcodecs-bytes-tmp", b"a killed run's")
        os.unlink(f"{backend.folder}/a/1/0")
        assert backend.store.packing.tidy([f"{backend.folder}/a/1", f"{backend.folder}/a/0"]) == {}
        assert not os.path.exists(f"{backend.folder}/a/1") and os.path.exists(
            f"{backend.folder}/a/0/1"
        )


def test_versions_of_many_chunk_files_and_byte_ranges(backend: Backend) -> None:
    """Versions of files in a folder of 1,050 (on S3 from listings of the range asked, a thousand
    keys a request, the rest from HEADs), a missing one None, a rewritten one another; byte ranges
    of a file, one past its end an error."""
    folder = f"{backend.folder}/v"
    # written as the tools write (batched, concurrent): a PUT at a time took half a minute on moto
    assert (
        backend.store.files.create({f"{folder}/{i}": i.to_bytes(2, "little") for i in range(1050)})
        == {}
    )
    asked = [f"{folder}/{i}" for i in (0, 5, 77, 500, 999, 1049)] + [f"{folder}/missing"]
    versions = backend.store.files.versions(asked)
    assert versions[f"{folder}/missing"] is None
    assert all(isinstance(versions[path], str) for path in asked[:-1]), versions
    backend.write("v/999", b"\xff\xff")  # the same size, other bytes
    again = backend.store.files.versions(asked)
    assert {path for path in asked if again[path] != versions[path]} == {f"{folder}/999"}
    backend.write("r", b"0123456789")
    wanted = [
        ByteRange(f"{backend.folder}/r", 2, 5),
        ByteRange(f"{backend.folder}/r", 8, 10),
        ByteRange(f"{backend.folder}/r", 8, 12),
    ]
    read = backend.store.files.read_ranges(wanted)
    assert read[wanted[0]] == b"234" and read[wanted[1]] == b"89"
    assert isinstance(read[wanted[2]], OSError), read[wanted[2]]


# -- a local disk ----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=3000)), min_size=1, max_size=9))
def test_local_shards_are_the_specs(chunks: list[bytes | None]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for i, chunk in enumerate(chunks):
            if chunk is not None:
                Path(folder, str(i)).write_bytes(chunk)
        target = os.path.join(folder, "s", "0")
        sources = tuple(
            None if chunk is None else os.path.join(folder, str(i))
            for i, chunk in enumerate(chunks)
        )
        packed = local_shards.pack([Shard(target, sources)], Path(folder))[target]
        assert isinstance(packed, Packed)
        if all(chunk is None for chunk in chunks):
            assert not os.path.exists(target) and not packed.written
        else:
            assert Path(target).read_bytes() == expected_shard(chunks)
            assert os.listdir(os.path.join(folder, "s")) == ["0"]  # no temporary file left


@pytest.mark.parametrize("kept", ["nanoseconds", "whole seconds"])
def test_the_mover_waits_out_the_tick_of_a_file_written_just_now(tmp_path: Path, kept: str) -> None:
    """Past the file's time written on the clock the kernel stamps files with (two seconds past it
    where the file system keeps whole seconds), a rewrite cannot give the file the time it has."""
    source = tmp_path / "0"
    source.write_bytes(b"x")
    now = time.clock_gettime_ns(disk._FILE_CLOCK)
    stamp = now + 30_000_000 if kept == "nanoseconds" else (now // 10**9 - 1) * 10**9
    os.utime(source, ns=(stamp, stamp))
    disk.past_their_tick([os.stat(source)])
    assert time.clock_gettime_ns(disk._FILE_CLOCK) > stamp + (
        0 if kept == "nanoseconds" else 2 * 10**9
    )


def test_a_chunk_rewritten_in_place_at_once_shows_a_new_version(tmp_path: Path) -> None:
    """A writer that rewrites a chunk in place, to the same size, just after it was packed: the
    kernel's clock stamps files in ticks of milliseconds, and the mover waits out the tick of a file
    just written, so the rewrite always has another version (before Linux 6.13, without that wait,
    most of these would not)."""
    (tmp_path / ".zgroup").write_text("{}")
    store = open_store(tmp_path)
    source = tmp_path / "0"
    for attempt in range(30):
        source.write_bytes(bytes([attempt]) * 64)
        packed = store.packing.pack([Shard(str(tmp_path / "s" / str(attempt)), (str(source),))])
        result = packed[str(tmp_path / "s" / str(attempt))]
        assert isinstance(result, Packed)
        with open(source, "r+b") as handle:
            handle.write(bytes([attempt + 100]) * 64)
        assert store.files.versions([str(source)])[str(source)] != result.versions[0], attempt


def test_a_chunk_changed_while_it_is_copied_makes_no_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".zgroup").write_text("{}")
    (tmp_path / "0").write_bytes(b"before")
    copy = local_shards._copy

    def copy_then_write(source: int, target: int, size: int, offset: int, start: int = 0) -> None:
        copy(source, target, size, offset, start)
        with open(tmp_path / "0", "r+b") as handle:
            handle.write(b"AFTER!")  # in place, the same size

    monkeypatch.setattr(local_shards, "_copy", copy_then_write)
    result = open_store(tmp_path).packing.pack(
        [Shard(str(tmp_path / "s" / "0"), (str(tmp_path / "0"),))]
    )
    problem = result[str(tmp_path / "s" / "0")]
    assert isinstance(problem, ShardError), problem
    assert str(problem) in (
        "0: changed while it was read: no shard written",
        "0: not what its sources hold, read back (a file system error)",
    )
    assert os.listdir(tmp_path / "s") == []  # no shard, no temporary file


def test_a_fifo_among_the_chunks_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    (tmp_path / ".zgroup").write_text("{}")
    os.mkfifo(tmp_path / "0")
    (tmp_path / "1").write_bytes(b"x")
    result = open_store(tmp_path).packing.pack(
        [Shard(str(tmp_path / "s" / "0"), (str(tmp_path / "0"), str(tmp_path / "1")))]
    )
    problem = result[str(tmp_path / "s" / "0")]
    assert (
        isinstance(problem, OSError)
        and str(problem) == f"{tmp_path / '0'}: not a regular file: not read"
    )
    assert not (tmp_path / "s" / "0").exists()


def test_a_linked_chunk_file_is_packed_as_v2_readers_read_it(tmp_path: Path) -> None:
    (tmp_path / ".zgroup").write_text("{}")
    (tmp_path / "elsewhere").write_bytes(b"the target's bytes")
    (tmp_path / "0").symlink_to(tmp_path / "elsewhere")
    result = open_store(tmp_path).packing.pack(
        [Shard(str(tmp_path / "s" / "0"), (str(tmp_path / "0"),))]
    )
    assert isinstance(result[str(tmp_path / "s" / "0")], Packed)
    assert (tmp_path / "s" / "0").read_bytes() == expected_shard([b"the target's bytes"])


BOUNDED = """
import os, resource, sys
from pathlib import Path
from numcodecs_bytes.store import local_shards
from numcodecs_bytes.store.shard_format import Packed, Shard
folder, count, size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
sources = []
for i in range(count):
    with open(folder / str(i), "wb") as handle:
        handle.truncate(size)  # sparse: the disk holds nothing of it
        handle.write(i.to_bytes(4, "little"))
    sources.append(str(folder / str(i)))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
packed = local_shards.pack([Shard(str(folder / "c" / "0"), tuple(sources))], folder)
assert isinstance(packed[str(folder / "c" / "0")], Packed), packed
held = local_shards.held([Shard(str(folder / "c" / "0"), tuple(sources))])[str(folder / "c" / "0")]
assert held.same == (True,) * count, held
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_shard_of_more_chunks_than_files_may_be_open_and_of_256_mib_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """Issue 55, items 6 and 7: 300 chunk files in one shard under a limit of 64 open files (one
    source is open at a time), and a shard of 256 MiB made, read back and compared in memory that
    does not grow with it (each side read a block at a time; nothing mapped whole): peak memory
    grows by less than 32 MiB."""
    import subprocess
    import sys

    for count, size in ((300, 16), (64, 4 << 20)):
        folder = tmp_path / f"{count}"
        folder.mkdir()
        result = subprocess.run(
            [sys.executable, "-c", BOUNDED, str(folder), str(count), str(size)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert int(result.stdout) < 32, f"peak memory grew by {result.stdout.strip()} MiB"
        assert (folder / "c" / "0").stat().st_size == count * size + count * 16 + 4
