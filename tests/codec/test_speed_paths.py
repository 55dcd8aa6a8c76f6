"""Threads, partial decode and the large-buffer paths (deterministic: no timing here).

Speed itself is measured by the scripts in benchmarks/, not by unit tests.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.split_parts import SMALL_SPLIT, split_from_small_sizes

import numcodecs_bytes
import numcodecs_bytes._threads
from numcodecs_bytes import BytesCodec, get_nthreads, set_nthreads


@pytest.fixture
def nthreads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Restores the thread count and use_threads; work of a few MiB is split, as the rule splits
    16 MiB (no test allocates that much)."""
    split_from_small_sizes(monkeypatch)
    monkeypatch.setattr(numcodecs_bytes, "use_threads", None)
    previous = get_nthreads()
    yield
    set_nthreads(previous)


# Above the split size, split unevenly.
LARGE = (3 << 20) + 24
# The CPUs this process may run on (its affinity), as Linux tells it: the most threads a copy uses.
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.mark.parametrize("dtype", ["<u2", "<i4", "<f8", "<c16", "<U3", "<M8[ns]"])
def test_results_are_identical_with_one_and_many_threads(dtype: str, nthreads: None) -> None:
    count = LARGE // np.dtype(dtype).itemsize
    data = np.random.default_rng(1).integers(0, 2**15, count).astype(dtype)
    codec = BytesCodec(endian="big", dtype=dtype)
    results = {}
    for n in (1, 2, 3, 8):
        set_nthreads(n)
        parts = _parts_used(codec, data)
        assert len(parts) == min(n, CPUS), "not split into one part per core"
        itemsize = np.dtype(dtype).itemsize  # equal parts, but for an element
        assert max(parts) - min(parts) <= itemsize
        encoded = bytes(codec.encode(data))
        decoded = codec.decode(encoded)
        out = np.empty_like(data)
        codec.decode(encoded, out=out)
        assert decoded.tobytes() == out.tobytes() == data.tobytes()
        results[n] = encoded
    assert len(set(results.values())) == 1
    assert results[1] == data.astype(np.dtype(dtype).newbyteorder(">")).tobytes()


@pytest.mark.parametrize(
    "layout",
    ["every other", "backwards by three", "offset", "2-D", "2-D Fortran", "2-D strided"],
)
def test_large_arrays_of_any_layout_split_to_numpys_bytes(
    split_pool: numcodecs_bytes._threads._Pool, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """Large arrays go from the codec's first checks to the split copy (the common case's path):
    elements in element order for 1-D views of any strides, in memory order for contiguous ones,
    as numpy lays them out."""
    base = np.random.default_rng(2).integers(-(2**31), 2**31, 3 * LARGE // 4, dtype="<i4")
    data = {
        "every other": base[::2],
        "backwards by three": base[::-3],
        "offset": base[5:],
        "2-D": base[: len(base) // 3 * 3].reshape(3, -1),
        "2-D Fortran": np.asfortranarray(base[: len(base) // 3 * 3].reshape(3, -1)),
        "2-D strided": base[: len(base) // 3 * 3].reshape(3, -1)[:, ::2],
    }[layout]
    assert data.nbytes >= numcodecs_bytes._threads.SPLIT_BYTES
    codec = BytesCodec(endian="big", dtype="<i4")
    order: Literal["A", "C"] = "A" if data.flags.forc else "C"
    expected = data.astype(">i4").tobytes(order=order)
    parts: list[int] = []
    original = numcodecs_bytes._threads._copy_part

    def recording(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
        parts.append(dst.size)
        original(dst, src)

    monkeypatch.setattr(numcodecs_bytes._threads, "_copy_part", recording)
    encoded = codec.encode(data)
    assert encoded.tobytes() == expected and not np.shares_memory(encoded, data)
    decoded = codec.decode(expected)
    out = np.full(data.size, -1, "<i4")
    assert codec.decode(expected, out=out) is out
    assert decoded.tobytes() == out.tobytes() == data.ravel(order=order).tobytes()
    # each of the three copies split in two parts, every element once
    assert len(parts) == 6 and sum(parts) == 3 * data.size


def _parts_used(codec: BytesCodec, data: np.ndarray[Any, Any]) -> list[int]:
    """The sizes of the parts a swapping decode into out is split into."""
    sizes: list[int] = []
    original = numcodecs_bytes._threads._copy_part

    def recording(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
        sizes.append(dst.nbytes)
        original(dst, src)

    encoded = bytes(codec.encode(data))
    numcodecs_bytes._threads._copy_part = recording
    try:
        codec.decode(encoded, out=np.empty_like(data))
    finally:
        numcodecs_bytes._threads._copy_part = original
    sizes = sizes or [data.nbytes]  # not split: one numpy assignment on the calling thread
    assert sum(sizes) == data.nbytes
    return sizes


def test_large_ml_dtypes_and_struct_paths(nthreads: None) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    set_nthreads(2)
    data = np.linspace(-4, 4, LARGE // 2).astype(ml_dtypes.bfloat16)
    codec = BytesCodec(endian="big", dtype="bfloat16")
    encoded = bytes(codec.encode(data))
    assert encoded == data.view("<u2").astype(">u2").tobytes()
    assert codec.decode(encoded).tobytes() == data.tobytes()
    struct = np.zeros(LARGE // 12, [("a", "<i4"), ("b", "<f8")])
    struct["a"] = np.arange(len(struct))
    codec = BytesCodec(endian="big", dtype=struct.dtype)
    assert bytes(codec.encode(struct)) == struct.astype(struct.dtype.newbyteorder(">")).tobytes()


def test_set_nthreads_validates_and_returns_the_previous_value(nthreads: None) -> None:
    previous = set_nthreads(3)
    assert get_nthreads() == 3
    assert set_nthreads(previous) == 3
    # numpy integers are whole numbers too
    assert set_nthreads(np.int64(5)) == previous and get_nthreads() == 5
    for bad in (0, -1, 1.5, "2", True, None, np.float64(2)):
        with pytest.raises(ValueError, match="whole number >= 1"):
            set_nthreads(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "expected"), [("1", "1"), ("3", "3"), ("", str(min(CPUS, 8)))])
def test_environment_variable_sets_the_default(value: str, expected: str) -> None:
    env = {**os.environ, "NUMCODECS_BYTES_NTHREADS": value}
    code = "import numcodecs_bytes; print(numcodecs_bytes.get_nthreads())"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == expected


def test_bad_environment_variable_is_a_warning_and_the_default() -> None:
    env = {**os.environ, "NUMCODECS_BYTES_NTHREADS": "many"}
    code = "import numcodecs_bytes; print(numcodecs_bytes.get_nthreads())"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == str(min(CPUS, 8))
    assert "ignoring NUMCODECS_BYTES_NTHREADS='many': not a whole number >= 1" in result.stderr


def test_many_threads_calling_one_codec_at_once(
    nthreads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No deadlock, identical results, and never more helper copies at once than get_nthreads() -
    1."""
    set_nthreads(2)
    monkeypatch.setattr(numcodecs_bytes, "use_threads", True)  # split from every thread
    codec = BytesCodec(endian="big", dtype="<i4")
    arrays = [np.arange(i, i + LARGE // 4, dtype="<i4") for i in range(6)]
    expected = [a.astype(">i4").tobytes() for a in arrays]
    barrier = threading.Barrier(6)
    running, most, helper_parts, lock = [0], [0], [0], threading.Lock()
    original = numcodecs_bytes._threads._copy_part

    def counting(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
        helper = threading.current_thread().name.startswith("numcodecs-bytes")
        with lock:
            running[0] += helper
            most[0] = max(most[0], running[0])
            helper_parts[0] += helper
        try:
            original(dst, src)
        finally:
            with lock:
                running[0] -= helper

    monkeypatch.setattr(numcodecs_bytes._threads, "_copy_part", counting)

    def work(index: int) -> bool:
        barrier.wait()
        ok = True
        for _ in range(3):
            encoded = codec.encode(arrays[index])
            out = np.empty_like(arrays[index])
            codec.decode(encoded, out=out)
            ok &= bytes(encoded) == expected[index] and np.array_equal(out, arrays[index])
        return ok

    with ThreadPoolExecutor(6) as callers:
        assert all(callers.map(work, range(6), timeout=120))
    assert helper_parts[0] > 0, "no copy was split"
    assert most[0] <= get_nthreads() - 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded, use of fork:DeprecationWarning"
)
def test_pool_survives_fork(nthreads: None) -> None:
    set_nthreads(2)
    codec = BytesCodec(endian="big", dtype="<f8")
    data = np.arange(LARGE // 8, dtype="<f8")
    expected = data.astype(">f8").tobytes()
    assert bytes(codec.encode(data)) == expected  # the parent's pool now exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the parent's threads are gone; the codec must start its own
        try:
            ok = bytes(codec.encode(data)) == expected and np.array_equal(
                codec.decode(expected), data
            )
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1" and status == 0
    assert bytes(codec.encode(data)) == expected


# -- partial decode --------------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["little", "big"])
def test_decode_partial(endian: str) -> None:
    data = np.arange(100, dtype="<i8") * 1_000_003
    codec = BytesCodec(endian=endian, dtype="<i8")  # type: ignore[arg-type]
    encoded = bytes(codec.encode(data))
    assert np.array_equal(codec.decode_partial(encoded, 10, 5), data[10:15])
    assert np.array_equal(codec.decode_partial(encoded, 0, 100), data)
    assert codec.decode_partial(encoded, 100, 0).size == 0
    out = np.zeros(7, "<i8")
    assert codec.decode_partial(memoryview(encoded), 93, 7, out=out) is out
    assert np.array_equal(out, data[93:])


def test_decode_partial_reads_only_its_bytes() -> None:
    codec = BytesCodec(endian="big", dtype="<u4")
    # 4 MiB of stored data: decoding 2 elements must not touch the rest
    big = np.zeros(1 << 22, np.uint8)
    big[8:16] = [0, 0, 0, 7, 0, 0, 1, 0]
    part = codec.decode_partial(big, 2, 2)
    assert part.tolist() == [7, 256]
    assert part.nbytes == 8


def test_decode_partial_out_of_range() -> None:
    codec = BytesCodec(endian="big", dtype="<u2")
    buf = bytes(20)
    with pytest.raises(
        ValueError,
        match=r"elements 8\.\.12 are out of range: the buffer holds 10 elements of uint16",
    ):
        codec.decode_partial(buf, 8, 4)
    for start, nitems in ((-1, 2), (0, -2), (1.5, 1), (0, True)):
        with pytest.raises(ValueError, match="must be a whole number >= 0"):
            codec.decode_partial(buf, start, nitems)  # type: ignore[arg-type]
    out = np.full(3, 9, "<u2")
    with pytest.raises(ValueError, match="does not match out"):
        codec.decode_partial(buf, 0, 2, out=out)
    assert out.tolist() == [9, 9, 9]
    with pytest.raises(ValueError, match="needs a dtype"):
        BytesCodec(endian="big").decode_partial(buf, 0, 1)


def test_public_names() -> None:
    assert {"BytesCodec", "DATA_TYPES", "migrate_config", "set_nthreads", "get_nthreads"} <= set(
        numcodecs_bytes.__all__
    )


def test_a_pool_shut_down_by_set_nthreads_meanwhile_does_not_break_a_copy(
    nthreads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_nthreads(3)
    pool = numcodecs_bytes._threads._Pool(3)
    pool.close()
    monkeypatch.setattr(numcodecs_bytes._threads, "_get_pool", lambda: pool)
    data = np.arange(LARGE // 4, dtype="<i4")
    out = np.empty_like(data)
    BytesCodec(endian="big", dtype="<i4").decode(data.astype(">i4").tobytes(), out=out)
    assert np.array_equal(out, data)


def _parts_from(thread: str, setting: bool | None, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many parts a large decode into out is split into, called from the main thread or
    another."""
    monkeypatch.setattr(numcodecs_bytes, "use_threads", setting)
    codec = BytesCodec(endian="big", dtype="<i4")
    data = np.arange(LARGE // 4, dtype="<i4")
    if thread == "main":
        return len(_parts_used(codec, data))
    with ThreadPoolExecutor(1) as other:
        return len(other.submit(_parts_used, codec, data).result())


@pytest.mark.parametrize(
    ("thread", "setting", "parts"),
    [
        ("main", None, 2),
        ("other", None, 1),
        ("other", True, 2),
        ("main", False, 1),
        ("other", False, 1),
    ],
)
def test_threads_by_default_only_from_the_main_thread_and_use_threads_forces_it(
    nthreads: None, monkeypatch: pytest.MonkeyPatch, thread: str, setting: bool | None, parts: int
) -> None:
    set_nthreads(2)
    if CPUS < 2:
        parts = 1  # one core: never split
    assert _parts_from(thread, setting, monkeypatch) == parts


def test_a_huge_thread_count_splits_no_more_than_the_cores(nthreads: None) -> None:
    set_nthreads(2_000_000)
    parts = _parts_used(BytesCodec(endian="big", dtype="<i4"), np.arange(LARGE // 4, dtype="<i4"))
    assert 1 <= len(parts) <= CPUS
    set_nthreads(1)
    assert (
        len(_parts_used(BytesCodec(endian="big", dtype="<i4"), np.arange(LARGE // 4, dtype="<i4")))
        == 1
    )


@pytest.mark.skipif(
    CPUS < 2 or not hasattr(os, "sched_setaffinity"), reason="needs two CPUs to take one away"
)
@pytest.mark.parametrize(("setting", "expected"), [("", "1"), ("2", "2")])
def test_threads_count_the_cpus_the_process_may_use_not_the_machines(
    setting: str, expected: str
) -> None:
    """Under ``taskset -c 0`` (or a container's cpuset) on a machine of several cores: one thread by
    default, and a setting above it is kept but splits nothing (a helper on the caller's only CPU
    would take turns with it)."""
    code = f"""
import os
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
import numpy as np, numcodecs_bytes
from numcodecs_bytes import BytesCodec, _threads
numcodecs_bytes.use_threads = True
import numcodecs_bytes.codec
_threads.SPLIT_BYTES = numcodecs_bytes.codec.SPLIT_BYTES = {SMALL_SPLIT}  # split a few MiB
parts = []
copy_part = _threads._copy_part
# a split's parts
_threads._copy_part = lambda dst, src: (parts.append(len(src)), copy_part(dst, src))[1]
data = np.arange({LARGE // 4}, dtype="<i4")
assert BytesCodec(endian="big", dtype="<i4").encode(data).tobytes() == data.astype(">i4").tobytes()
print(numcodecs_bytes.get_nthreads(), len(parts))
"""
    env = {**os.environ, "NUMCODECS_BYTES_NTHREADS": setting}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == [expected, "0"]  # numpy's own call: no parts


@pytest.fixture
def fresh_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A new pool of two threads, threads allowed from here, work of a few MiB split."""
    if CPUS < 2:
        pytest.skip("one core: work is never split")
    split_from_small_sizes(monkeypatch)
    monkeypatch.setattr(numcodecs_bytes, "use_threads", True)
    previous = set_nthreads(2)
    set_nthreads(3)  # a new setting, a new pool
    set_nthreads(2)
    yield
    set_nthreads(previous)


@pytest.fixture
def split_pool(fresh_pool: None) -> numcodecs_bytes._threads._Pool:
    """`fresh_pool`'s pool."""
    return numcodecs_bytes._threads._get_pool()


@pytest.mark.parametrize("failing", ["the caller's part", "the helper's part"])
def test_an_error_in_a_part_is_raised_once_every_part_is_done_and_the_helper_is_free_again(
    split_pool: numcodecs_bytes._threads._Pool, failing: str
) -> None:
    finished: list[int] = []

    def part(start: int, stop: int) -> int:
        if (start == 0) == (failing == "the caller's part"):
            raise ZeroDivisionError(f"{failing} failed")
        threading.Event().wait(0.05)  # the other part outlasts the failure
        finished.append(start)
        return stop - start

    with pytest.raises(ZeroDivisionError, match=failing):
        numcodecs_bytes._threads.in_parts(LARGE, LARGE, part)
    assert len(finished) == 1  # the part that did not fail was done before the error came out
    assert split_pool.free == split_pool.helpers == 1
    assert (
        sum(numcodecs_bytes._threads.in_parts(LARGE, LARGE, lambda start, stop: stop - start))
        == LARGE
    )


def test_a_helper_keeps_no_array_alive_after_its_part(
    split_pool: numcodecs_bytes._threads._Pool,
) -> None:
    codec = BytesCodec(endian="big", dtype="<i4")
    data = np.arange(LARGE // 4, dtype="<i4")
    assert len(_parts_used(codec, data)) == 2
    encoded = codec.encode(data)
    freed = weakref.ref(data), weakref.ref(encoded)
    del data, encoded
    gc.collect()
    assert [ref() for ref in freed] == [None, None]


def test_set_nthreads_stops_the_helpers_of_the_pool_it_replaces(
    split_pool: numcodecs_bytes._threads._Pool,
) -> None:
    assert len(split_pool.threads) == 1 and split_pool.threads[0].is_alive()
    set_nthreads(3)
    for thread in split_pool.threads:
        thread.join(timeout=10)
        assert not thread.is_alive()


@given(nbytes=st.integers(0, 4 * SMALL_SPLIT), length=st.integers(0, 1 << 40))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
def test_work_from_the_split_size_on_is_one_equal_part_per_core_and_below_it_one_call(
    fresh_pool: None, nbytes: int, length: int
) -> None:
    """The rule alone: below the split size, the caller's one call; from it on, a part for the
    caller and for each helper (two threads here), equal but for one element, every element once,
    in order."""
    parts: list[tuple[int, int]] = []
    numcodecs_bytes._threads.in_parts(nbytes, length, lambda a, b: parts.append((a, b)))
    if nbytes < SMALL_SPLIT:
        assert parts == [(0, length)]
        return
    parts.sort()
    assert len(parts) == 2 and parts[0][0] == 0 and parts[-1][1] == length
    assert parts[0][1] == parts[1][0]
    sizes = [stop - start for start, stop in parts]
    assert max(sizes) - min(sizes) <= 1


def test_a_call_that_finds_no_helper_free_works_alone(
    split_pool: numcodecs_bytes._threads._Pool,
) -> None:
    """A caller never waits for a helper: with every helper held by another caller, its work is one
    call here."""
    taken = split_pool.take()
    try:
        parts: list[tuple[int, int]] = []
        numcodecs_bytes._threads.in_parts(LARGE, 10, lambda a, b: parts.append((a, b)))
        assert parts == [(0, 10)]
    finally:
        split_pool.give_back(taken)
    assert split_pool.free == split_pool.helpers == 1


def test_the_rule_splits_from_16_mib_as_its_docstring_and_the_benchmarks_say() -> None:
    """The size is the module's one constant, stated where a reader checks it against the
    measurements."""
    import numcodecs_bytes._threads as threads

    assert threads.SPLIT_BYTES == 16 << 20
    assert "2. It is large: at least `SPLIT_BYTES` (16 MiB)." in (threads.__doc__ or "")
