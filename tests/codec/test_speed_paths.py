"""Threads, partial decode and the large-buffer paths (deterministic: no timing here).

Speed itself is measured by the scripts in benchmarks/, not by unit tests.
"""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.split_parts import callers_part_larger

import numcodecs_bytes
import numcodecs_bytes._threads
from numcodecs_bytes import BytesCodec, get_nthreads, set_nthreads
from numcodecs_bytes._threads import Kind


@pytest.fixture
def nthreads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Restores the thread count and use_threads; work from MIN_SPLIT_BYTES on is split (as if found
    to pay)."""
    monkeypatch.setattr(
        numcodecs_bytes._threads._Learning, "next_way", lambda self: (True, self.add)
    )
    monkeypatch.setattr(numcodecs_bytes, "use_threads", None)
    previous = get_nthreads()
    yield
    set_nthreads(previous)


# Above the split size, split unevenly.
LARGE = (3 << 20) + 24
# The CPUs this process may run on (its affinity), as Linux tells it: the most threads a copy uses.
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.mark.parametrize("helpers", ["start at once", "start late"])
@pytest.mark.parametrize("dtype", ["<u2", "<i4", "<f8", "<c16", "<U3", "<M8[ns]"])
def test_results_are_identical_with_one_and_many_threads(
    dtype: str, helpers: str, nthreads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if helpers == "start late":  # the caller's part the larger, the helpers' parts of odd sizes
        callers_part_larger(monkeypatch)
    count = LARGE // np.dtype(dtype).itemsize
    data = np.random.default_rng(1).integers(0, 2**15, count).astype(dtype)
    codec = BytesCodec(endian="big", dtype=dtype)
    results = {}
    for n in (1, 2, 3, 8):
        set_nthreads(n)
        parts = _parts_used(codec, data)
        assert len(parts) == min(n, CPUS), "not split into one part per core"
        if len(parts) > 1:  # (recorded as the threads did them: in any order)
            assert (max(parts) > 1.3 * min(parts)) == (helpers == "start late")
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
    assert data.nbytes >= numcodecs_bytes._threads.MIN_SPLIT_BYTES
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
_threads._Learning.next_way = lambda self: (True, self.add)  # split wherever a split is possible
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


class _Clock:
    """Stands in for ``time`` in the thread module: work advances it by a cost per way, alone or
    split."""

    def __init__(self, alone: float, split: float) -> None:
        self.now, self.cost = 0.0, {False: alone, True: split}
        self.ways: list[bool] = []
        self.reads = 0

    def perf_counter(self) -> float:
        self.reads += 1
        return self.now

    def part(self, length: int) -> Any:
        def work(start: int, stop: int) -> int:
            split = stop - start < length
            if start == 0:
                self.ways.append(split)
            self.now += self.cost[split] * (stop - start) / length
            return stop - start

        return work


@pytest.fixture
def learning(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh pool (nothing learned yet) of two threads, and threads allowed from here."""
    if CPUS < 2:
        pytest.skip("one core: work is never split")
    monkeypatch.setattr(numcodecs_bytes, "use_threads", True)
    previous = set_nthreads(2)
    set_nthreads(3)  # a new setting, a new pool: what earlier tests taught it is gone
    set_nthreads(2)
    yield
    set_nthreads(previous)


@pytest.fixture
def split_pool(learning: None, monkeypatch: pytest.MonkeyPatch) -> numcodecs_bytes._threads._Pool:
    """`learning`'s fresh pool of two threads, splitting work from MIN_SPLIT_BYTES on (as if found
    to pay)."""
    monkeypatch.setattr(
        numcodecs_bytes._threads._Learning, "next_way", lambda self: (True, self.add)
    )
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
        numcodecs_bytes._threads.in_parts("check", LARGE, LARGE, part)
    assert len(finished) == 1  # the part that did not fail was done before the error came out
    assert split_pool.free == split_pool.helpers == 1
    assert (
        sum(
            numcodecs_bytes._threads.in_parts(
                "check", LARGE, LARGE, lambda start, stop: stop - start
            )
        )
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


@pytest.mark.parametrize(("alone", "split", "kept"), [(2.0, 1.0, True), (1.0, 2.0, False)])
def test_each_kind_and_size_learns_whether_splitting_pays_and_checks_the_choice_now_and_then(
    learning: None, monkeypatch: pytest.MonkeyPatch, alone: float, split: float, kept: bool
) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(alone, split)
    monkeypatch.setattr(threads, "time", clock)
    size = 3 << 20
    for _ in range(40):
        # every element, once
        assert sum(threads.in_parts("check", size, size, clock.part(size))) == size
    learned = [False, True] * 2  # pairs, alone first: one way faster in two of them is the choice
    checks = {8, 16, 32}  # calls that try the other way (the next one is timed the chosen way)
    assert clock.ways == learned + [kept ^ (call in checks) for call in range(5, 41)]
    assert threads.split_choices() == {"check 2 MiB..4 MiB": kept}
    assert (
        threads.split_choice("check", size) is kept
        and threads.split_choice("copy into", size) is None
    )
    # Another size class, and another kind, learn apart.
    others: list[tuple[Kind, int]] = [("check", 5 << 20), ("copy into", size)]
    for kind, nbytes in others:
        clock.ways.clear()
        threads.in_parts(kind, nbytes, nbytes, clock.part(nbytes))
        assert clock.ways == [False]
    assert len(threads.split_choices()) == 1


@pytest.mark.parametrize(
    ("before", "after", "ways", "kept"),
    [
        # As when a process starts (fresh pages, cold caches): a split stops being slow. Call 16
        # tries one, call 17 times the choice beside it: slower. One pair against the choice only
        # opens the question: calls 18 to 21 are a round of their own, the split winning both
        # pairs: the choice from call 22.
        ((1.0, 2.0), (1.0, 0.5), [True, False, True, False, True, False, True, True], True),
        # Everything got faster (neighbours went quiet): call 16, alone, beats the split's older
        # samples, but call 17, a split timed right after it, beats that: the pair agrees with the
        # choice, the check ends.
        ((2.0, 1.0), (0.6, 0.3), [False, True, True, True, True, True, True, True], True),
    ],
    ids=["a choice that stops holding changes", "a faster machine keeps the choice"],
)
def test_a_check_compares_both_ways_timed_back_to_back(
    learning: None,
    monkeypatch: pytest.MonkeyPatch,
    before: tuple[float, float],
    after: tuple[float, float],
    ways: list[bool],
    kept: bool,
) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(*before)
    monkeypatch.setattr(threads, "time", clock)
    size = 3 << 20
    for _ in range(15):
        threads.in_parts("copy into", size, size, clock.part(size))
    assert threads.split_choices() == {"copy into 2 MiB..4 MiB": before[1] < before[0]}
    clock.cost = {False: after[0], True: after[1]}
    clock.ways.clear()
    for _ in range(8):
        threads.in_parts("copy into", size, size, clock.part(size))
    assert clock.ways == ways
    assert threads.split_choices() == {"copy into 2 MiB..4 MiB": kept}


@pytest.mark.parametrize(
    ("splits", "ways", "kept"),
    [
        # A neighbour takes the other core for good: after call 20 the latest three splits were all
        # slower than one thread's median, so call 21 checks at once: alone, then a split beside
        # it, slower; calls 23 to 26 are a round of their own and say the same in both pairs: one
        # thread from call 27.
        ([3.0] * 10, [True, True, True, False, True, False, True, False, True, False], False),
        # A slow patch: the same check at once, but the split beside it is fast again: the check
        # ends there.
        (
            [3.0] * 3 + [1.0] * 7,
            [True, True, True, False, True, True, True, True, True, True],
            True,
        ),
        # Slow still at the check's own split (call 22), fast after: the round that follows (calls
        # 23 to 26) keeps the split.
        (
            [3.0] * 5 + [1.0] * 5,
            [True, True, True, False, True, False, True, False, True, True],
            True,
        ),
        # Slow splits not all in a row: no check before the next power of two.
        ([3.0, 3.0, 1.0, 3.0, 3.0, 1.0, 3.0, 3.0, 1.0, 3.0], [True] * 10, True),
    ],
    ids=[
        "a split that stays slow goes",
        "a slow patch keeps the split",
        "one slow split at the check keeps it",
        "a fast split between keeps it",
    ],
)
def test_splits_chosen_are_timed_and_slow_ones_bring_the_check_forward(
    learning: None,
    monkeypatch: pytest.MonkeyPatch,
    splits: list[float],
    ways: list[bool],
    kept: bool,
) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(2.0, 1.0)
    monkeypatch.setattr(threads, "time", clock)
    size = 3 << 20
    for _ in range(17):  # learned (a split), and the 16th call's check with the split beside it
        threads.in_parts("copy into", size, size, clock.part(size))
    clock.ways.clear()
    # calls 18 to 27 (a split's cost, whichever way each call goes); one thread takes 2 s
    for cost in splits:
        clock.cost[True] = cost
        threads.in_parts("copy into", size, size, clock.part(size))
    assert clock.ways == ways
    assert threads.split_choices() == {"copy into 2 MiB..4 MiB": kept}


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    alone=st.floats(0.5, 4.0),
    split=st.floats(0.5, 4.0),
    # (calls, factor): stretches at least SAMPLES pairs long
    slowdowns=st.lists(
        st.tuples(st.integers(6, 40), st.floats(1.0, 20.0)), min_size=1, max_size=10
    ),
)
def test_a_slowdown_of_both_ways_alike_never_turns_the_choice(
    learning: None,
    monkeypatch: pytest.MonkeyPatch,
    alone: float,
    split: float,
    slowdowns: list[tuple[int, float]],
) -> None:
    """Stretches of calls (at least `SAMPLES` pairs long) each slow both ways by one factor, however
    large, as new pages or a busy neighbour do: from the first choice on, every call finds the
    faster way chosen."""
    assume(abs(alone - split) > 1e-6 * alone)
    threads = numcodecs_bytes._threads
    assert 2 * threads.SAMPLES == 6
    set_nthreads(3)  # a fresh pool: nothing learned
    set_nthreads(2)
    clock = _Clock(alone, split)
    size = 3 << 20
    with monkeypatch.context() as patch:
        patch.setattr(threads, "time", clock)
        for length, factor in slowdowns:
            clock.cost = {False: alone * factor, True: split * factor}
            for _ in range(length):
                threads.in_parts("copy into", size, size, clock.part(size))
                assert threads.split_choice("copy into", size) in (None, split < alone), (
                    len(clock.ways),
                    factor,
                )
    assert threads.split_choice("copy into", size) is (split < alone)


def test_one_thread_chosen_is_not_timed(learning: None, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(1.0, 2.0)  # one thread pays
    monkeypatch.setattr(threads, "time", clock)
    size = 3 << 20
    for _ in range(9):  # learned, and the 8th call's check with one thread beside it
        threads.in_parts("copy into", size, size, clock.part(size))
    assert threads.split_choices() == {"copy into 2 MiB..4 MiB": False}
    reads = clock.reads
    for _ in range(6):  # calls 10 to 15: the choice, before the check at the 16th
        threads.in_parts("copy into", size, size, clock.part(size))
    assert clock.ways[-6:] == [False] * 6 and clock.reads == reads


def test_a_split_that_finds_no_helper_free_teaches_nothing(
    learning: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(1.0, 2.0)
    monkeypatch.setattr(threads, "time", clock)
    pool = threads._get_pool()
    size = 3 << 20
    threads.in_parts("check", size, size, clock.part(size))  # alone: one sample
    taken = pool.take()  # another caller holds every helper
    try:
        for _ in range(3):
            # a split's turn, done alone: not counted
            threads.in_parts("check", size, size, clock.part(size))
    finally:
        pool.give_back(taken)
    shown = pool.learning[("check", size.bit_length())]
    assert (list(shown.alone), shown.wins, shown.first) == (
        [1.0 / size],
        [0, 0],
        (False, 1.0 / size),
    )
    assert clock.ways == [False] * 4


def test_one_thread_while_learning_is_one_call_here_and_timed(
    learning: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = numcodecs_bytes._threads
    # one thread, timed
    monkeypatch.setattr(threads._Learning, "next_way", lambda self: (False, self.add))
    data = np.arange(LARGE // 4, dtype="<i4")
    swapped = data.astype(">i4")
    assert threads.copied_as(data, np.dtype(">i4")).tobytes() == swapped.tobytes()
    out = np.empty_like(data)
    threads.copy_into(out, swapped)
    assert np.array_equal(out, data)
    calls: list[tuple[int, int]] = []
    threads.in_parts("check", LARGE, 10, lambda start, stop: calls.append((start, stop)))
    assert calls == [(0, 10)]
    learned = threads._get_pool().learning
    assert {kind: len(shown.alone) for (kind, _), shown in learned.items()} == {
        "copy to new": 1,
        "copy into": 1,
        "check": 1,
    }
    assert all(0 < shown.alone[0] < 1 for shown in learned.values())  # seconds per byte, measured


def test_small_work_is_never_split_nor_timed(
    learning: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = numcodecs_bytes._threads
    monkeypatch.setattr(threads._Learning, "next_way", lambda self: (True, self.add))
    clock = _Clock(1.0, 1.0)
    monkeypatch.setattr(threads, "time", clock)
    small = threads.MIN_SPLIT_BYTES - 1
    for _ in range(10):
        threads.in_parts("copy into", small, small, clock.part(small))
    assert clock.ways == [False] * 10
    assert threads._get_pool().learning == {}


def test_set_nthreads_starts_learning_afresh(
    learning: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = numcodecs_bytes._threads
    clock = _Clock(2.0, 1.0)
    monkeypatch.setattr(threads, "time", clock)
    size = 3 << 20
    for _ in range(2 * threads.SAMPLES):
        threads.in_parts("copy into", size, size, clock.part(size))
    assert threads.split_choices() == {"copy into 2 MiB..4 MiB": True}
    set_nthreads(1)
    set_nthreads(2)
    assert threads.split_choices() == {}


@given(
    length=st.integers(0, 1 << 40),
    helpers=st.integers(0, 7),
    lead=st.floats(0.0, 10.0),
)
def test_the_caller_takes_its_lead_times_an_equal_part_and_every_part_keeps_its_least(
    length: int, helpers: int, lead: float
) -> None:
    threads = numcodecs_bytes._threads
    bounds = threads._bounds(length, helpers, lead)
    # every element, once
    assert len(bounds) == helpers + 2 and bounds[0] == 0 and bounds[-1] == length
    assert bounds == sorted(bounds)
    first, *parts = [stop - start for start, stop in itertools.pairwise(bounds)]
    equal = length / (helpers + 1)
    least = threads.MIN_HELPER_SHARE * equal
    # every part keeps its least share (elements are whole)
    assert all(part >= least - 1 for part in [first, *parts])
    assert max(parts, default=0) - min(parts, default=0) <= 1  # helpers alike: equal parts
    if not helpers:
        assert first == length
    elif threads.MIN_HELPER_SHARE <= lead <= helpers + 1 - helpers * threads.MIN_HELPER_SHARE:
        assert abs(first - lead * equal) <= 1


@given(
    helpers=st.integers(1, 3),
    # when helpers start after the caller, as a part of what the whole takes on one thread
    delay=st.floats(0.0, 0.4),
    # each thread's speed while all work, against one alone (memory shared)
    together=st.floats(0.4, 1.0),
)
def test_splits_learn_the_parts_that_end_together(
    helpers: int, delay: float, together: float
) -> None:
    """A machine whose helpers start late: after some splits, the caller's part is the one with
    which its part and the helpers' end together, whatever the delay and speeds."""
    threads = numcodecs_bytes._threads
    learning = threads._Learning()

    def ends(lead: float) -> tuple[float, float]:
        """One split of work taking 1 s alone: when the caller's part ends, and the helpers'."""
        first = lead / (helpers + 1)
        helper = (1 - first) / helpers
        # the caller alone (full speed) until the helpers start
        alone = min(first, delay)
        return alone + (first - alone) / together, delay + helper / together

    for _ in range(60):
        caller, helper = ends(learning.lead)
        learning.ended(helpers, caller, helper - caller)
    caller, helper = ends(learning.lead)
    assert abs(helper - caller) < 0.01 * max(caller, helper)


@given(helpers=st.integers(1, 7), late=st.sampled_from([-1.0, 1.0]))
def test_a_lead_stays_within_what_a_split_can_give(helpers: int, late: float) -> None:
    """Helpers that always end first (or last), however many splits: the lead stops where the
    parts' least shares stop it, and one split the other way moves it back at once."""
    threads = numcodecs_bytes._threads
    learning = threads._Learning()
    for _ in range(1000):
        learning.ended(helpers, 1.0, late)
    least = threads.MIN_HELPER_SHARE
    assert learning.lead == pytest.approx(least if late < 0 else helpers + 1 - helpers * least)
    before = learning.lead
    learning.ended(helpers, 1.0, -late)
    assert learning.lead == pytest.approx(before - late * threads.LEAD_STEP)


def test_a_split_moves_its_cut_at_most_a_step_at_a_time(
    split_pool: numcodecs_bytes._threads._Pool,
) -> None:
    """A helper that ends late (woken late, a page fault) gives the next split's caller more, one
    `LEAD_STEP` at most; one that ends early gives it less."""
    threads = numcodecs_bytes._threads

    def part(start: int, stop: int) -> None:
        if start:
            time.sleep(0.05)  # the helper's part ends 50 ms after the caller's

    threads.in_parts("check", LARGE, LARGE, part)
    (learning,) = split_pool.learning.values()
    assert learning.lead == pytest.approx(1 + threads.LEAD_STEP)
    parts: list[tuple[int, int]] = []

    def early(start: int, stop: int) -> None:
        parts.append((start, stop))
        if not start:
            time.sleep(0.05)  # now the caller's

    threads.in_parts("check", LARGE, LARGE, early)
    # that split's parts were cut for the lead learned
    assert sorted(parts)[0] == (0, round(LARGE * (1 + threads.LEAD_STEP) / 2))
    assert learning.lead == pytest.approx(1.0)
