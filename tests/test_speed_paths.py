"""Threads, partial decode and the large-buffer paths (deterministic: no timing here).

Speed itself is measured by benchmarks/run.py, not by unit tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import numcodecs_bytes
import numcodecs_bytes._threads
from numcodecs_bytes import BytesCodec, get_nthreads, set_nthreads


@pytest.fixture
def nthreads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Restores the thread count; every copy from 1 MiB on is split, whatever the timings say."""
    monkeypatch.setattr(numcodecs_bytes._threads, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(numcodecs_bytes._threads, "_choose", lambda timing: True)
    previous = get_nthreads()
    yield
    set_nthreads(previous)


# Above MIN_BYTES, split unevenly.
LARGE = (3 << 20) + 24


@pytest.mark.parametrize("dtype", ["<u2", "<i4", "<f8", "<c16", "<U3", "<M8[ns]"])
def test_results_are_identical_with_one_and_many_threads(dtype: str, nthreads: None) -> None:
    count = LARGE // np.dtype(dtype).itemsize
    data = np.random.default_rng(1).integers(0, 2**15, count).astype(dtype)
    codec = BytesCodec(endian="big", dtype=dtype)
    results = {}
    for n in (1, 2, 3, 8):
        set_nthreads(n)
        assert n == 1 or len(_parts_used(codec, data)) == n, "not split into parts"
        encoded = bytes(codec.encode(data))
        decoded = codec.decode(encoded)
        out = np.empty_like(data)
        codec.decode(encoded, out=out)
        assert decoded.tobytes() == out.tobytes() == data.tobytes()
        results[n] = encoded
    assert len(set(results.values())) == 1
    assert results[1] == data.astype(np.dtype(dtype).newbyteorder(">")).tobytes()


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
    assert set_nthreads(np.int64(5)) == previous and get_nthreads() == 5  # numpy integers are whole numbers too
    for bad in (0, -1, 1.5, "2", True, None, np.float64(2)):
        with pytest.raises(ValueError, match="whole number >= 1"):
            set_nthreads(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "expected"), [("1", "1"), ("3", "3"), ("", str(min(os.cpu_count() or 1, 8)))])
def test_environment_variable_sets_the_default(value: str, expected: str) -> None:
    env = {**os.environ, "NUMCODECS_BYTES_NTHREADS": value}
    code = "import numcodecs_bytes; print(numcodecs_bytes.get_nthreads())"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == expected


def test_bad_environment_variable_is_a_warning_and_the_default() -> None:
    env = {**os.environ, "NUMCODECS_BYTES_NTHREADS": "many"}
    code = "import numcodecs_bytes; print(numcodecs_bytes.get_nthreads())"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == str(min(os.cpu_count() or 1, 8))
    assert "ignoring NUMCODECS_BYTES_NTHREADS='many': not a whole number >= 1" in result.stderr


def test_many_threads_calling_one_codec_at_once(nthreads: None) -> None:
    set_nthreads(2)
    codec = BytesCodec(endian="big", dtype="<i4")
    arrays = [np.arange(i, i + LARGE // 4, dtype="<i4") for i in range(6)]
    expected = [a.astype(">i4").tobytes() for a in arrays]
    barrier = threading.Barrier(6)

    def work(index: int) -> bool:
        barrier.wait()
        ok = True
        for _ in range(3):
            encoded = codec.encode(arrays[index])
            out = np.empty_like(arrays[index])
            codec.decode(encoded, out=out)
            ok &= bytes(encoded) == expected[index] and np.array_equal(out, arrays[index])
        return ok

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(work, range(6)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
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
            ok = bytes(codec.encode(data)) == expected and np.array_equal(codec.decode(expected), data)
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1" and status == 0
    assert bytes(codec.encode(data)) == expected


# -- partial decode ------------------------------------------------------------------------------------


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
    big = np.zeros(1 << 22, np.uint8)  # 4 MiB of stored data: decoding 2 elements must not touch the rest
    big[8:16] = [0, 0, 0, 7, 0, 0, 1, 0]
    part = codec.decode_partial(big, 2, 2)
    assert part.tolist() == [7, 256]
    assert part.nbytes == 8


def test_decode_partial_out_of_range() -> None:
    codec = BytesCodec(endian="big", dtype="<u2")
    buf = bytes(20)
    with pytest.raises(ValueError, match=r"elements 8\.\.12 are out of range: the buffer holds 10 elements of uint16"):
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
    closed = ThreadPoolExecutor(2)
    closed.shutdown()
    monkeypatch.setattr(numcodecs_bytes._threads, "_get_pool", lambda workers: closed)
    data = np.arange(LARGE // 4, dtype="<i4")
    out = np.empty_like(data)
    BytesCodec(endian="big", dtype="<i4").decode(data.astype(">i4").tobytes(), out=out)
    assert np.array_equal(out, data)


def test_the_thread_policy_measures_both_ways_then_keeps_the_faster_and_rechecks() -> None:
    from numcodecs_bytes._threads import EXPLORE_EVERY, _choose, _Timing

    timing = _Timing()
    first = [_choose(timing) for _ in range(4)]
    assert first == [False, True, False, True]  # each way twice, alternately
    timing.single.extend([2e-10, 2e-10])
    timing.threaded.extend([1e-10, 1e-10])  # threads twice as fast
    choices = [_choose(timing) for _ in range(8 * EXPLORE_EVERY - 4)]  # calls 4 .. 8 * EXPLORE_EVERY
    tries = [i + 4 for i, threads in enumerate(choices) if not threads]
    # The other way is tried again after EXPLORE_EVERY calls, times how much slower it measured (2x).
    assert tries == [EXPLORE_EVERY, 3 * EXPLORE_EVERY, 5 * EXPLORE_EVERY, 7 * EXPLORE_EVERY]


def test_a_way_with_a_heavy_tail_loses_to_a_steady_one_and_is_tried_rarely() -> None:
    from numcodecs_bytes._threads import EXPLORE_EVERY, _choose, _Timing

    timing = _Timing()
    [_choose(timing) for _ in range(4)]
    timing.single.extend([2e-10, 2e-10])
    timing.threaded.extend([1e-10, 1e-10, 1e-10, 21e-10])  # the best time, but one call in four 10x slower
    choices = [_choose(timing) for _ in range(10 * EXPLORE_EVERY - 4)]  # calls 4 .. 10 * EXPLORE_EVERY
    tries = [i + 4 for i, threads in enumerate(choices) if threads]
    # Mean 6e-10 against 2e-10: one thread is used, threads tried once in 3 * EXPLORE_EVERY calls.
    assert tries == [EXPLORE_EVERY, 4 * EXPLORE_EVERY, 7 * EXPLORE_EVERY]


def test_one_slow_call_of_one_thread_does_not_hand_the_copies_to_threads() -> None:
    from numcodecs_bytes._threads import EXPLORE_EVERY, _choose, _Timing

    timing = _Timing()
    [_choose(timing) for _ in range(4)]
    timing.single.extend([1e-10, 1e-10, 1e-10, 21e-10])  # one preempted call: mean 6e-10, median 1e-10
    timing.threaded.extend([2e-10, 2e-10])
    choices = [_choose(timing) for _ in range(8 * EXPLORE_EVERY - 4)]  # calls 4 .. 8 * EXPLORE_EVERY
    tries = [i + 4 for i, threads in enumerate(choices) if threads]
    # Threads win in the mean only: one thread is kept; threads are tried after 16 calls times 3.
    assert tries == [EXPLORE_EVERY, 4 * EXPLORE_EVERY, 7 * EXPLORE_EVERY]


def test_the_first_call_of_each_way_is_not_kept() -> None:
    # The first call of a size class pays one-off costs (fresh heap pages, a pool thread's
    # start); kept, it would weigh on that way's mean until four newer times push it out.
    import time

    from numcodecs_bytes._threads import _record, _Timing

    timing, nbytes = _Timing(), 1 << 22
    slow_start = time.perf_counter() - 1.0
    _record(timing, False, slow_start, nbytes)
    _record(timing, True, slow_start, nbytes)
    assert not timing.single and not timing.threaded
    _record(timing, False, time.perf_counter(), nbytes)
    _record(timing, True, time.perf_counter(), nbytes)
    assert len(timing.single) == len(timing.threaded) == 1
    assert timing.single[0] < 1e-6 and timing.threaded[0] < 1e-6
