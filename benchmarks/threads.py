"""The thread policy against the best way this machine has, measured side by side in one run.

    python benchmarks/threads.py             # the full run (about a minute)
    python benchmarks/threads.py --runs 5    # five runs in a row, each line's spread
    python benchmarks/threads.py --fresh 6   # six new processes, the first 20 calls of every size

The header names the machine: CPU model and caches as Linux reports them
(benchmarks/machine.py). For each size, ours (the codec as users call it,
from the main thread, after six warm-up calls of every way; each line says
what the thread rule does with it: a split from 16 MiB on) is timed
interleaved with the two plain ways of the same
copy: numpy on one thread (``astype`` for a fresh output, ``np.copyto`` into an
existing one) and a plain split into two halves on two threads. Decodes start
from the stored bytes, as ours does: a plain way makes its ``np.frombuffer``
view in the call. A line's ratio is the better plain way's median time over
ours (1.0: as fast as the best way; the target is at least 0.9). Each line has
a control: the same ratio for the plain ways timed a second time (an A/A
test), which shows how far this machine's noise alone moves a line. Then:

- a fresh process: the total time of a new process's first 20 encodes of
  16 MiB, ours against the best plain way, each in its own new process
  (target: at most 1.15x);
- ``--fresh N``: instead, N new processes, each timing every size (encode,
  and decode into ``out``) against the plain ways, one call of each way in
  turn, in a new order each round, 37 rounds: a line's ratio is the better
  plain way's time over ours, min .. max over the processes, in the first 20
  calls (totals: fresh pages and cold caches for every way) and in the 31
  after 6 warm-up calls (medians), with a control (the plain ways timed a
  second time, as in the full run) beside each line;
- zarr v3: reading a 256 MiB float64 array of 4 MiB chunks from a MemoryStore
  with zarr's default concurrency, our native codec against zarr-python's own,
  and ours with threads allowed against ``use_threads=False`` (targets: at
  least 0.95x zarr's, and no slower with threads allowed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from interleave import median_times, print_spread
from machine import describe

import numcodecs_bytes
from numcodecs_bytes import BytesCodec
from numcodecs_bytes._threads import SPLIT_BYTES

MiB = 1 << 20
SIZES = [1, 4, 16, 64, 256]
WARM_UP_CALLS = 6
"""Calls of every way before a line is timed: pages, caches, the helper threads started."""
SWAPPED = np.dtype(">i4")
_pool = ThreadPoolExecutor(1)


def _split_into(dst: np.ndarray[Any, Any], src: np.ndarray[Any, Any]) -> None:
    half = len(src) // 2
    future = _pool.submit(dst[half:].__setitem__, Ellipsis, src[half:])
    dst[:half] = src[:half]
    future.result()


def _split_fresh(src: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    out = np.empty(src.shape, dtype)
    _split_into(out, src)
    return out


def _cases(mib: int, codec: BytesCodec) -> dict[str, dict[str, Callable[[], object]]]:
    """Per operation at ``mib`` MiB: ours and the two plain ways, each on memory of its own.

    Each way writes its own output: decodes into ``out`` each have an ``out`` of their own, and a
    way that makes a new array keeps its latest one until its next call (so its next array is not
    the block another way just freed). Shared, the outputs' cache lines would still be held by the
    core that wrote them last (the helper thread of a split): the next way to write them, whichever
    it is, paid 2.4x its time here, and a line's median fell on one side or the other of that by
    chance. Inputs are shared (only read).
    """
    data = np.arange(mib * MiB // 4, dtype="<i4")
    # every decode starts from the stored bytes: plain ways view them per call
    raw = data.astype(SWAPPED).tobytes()
    kept: dict[str, object] = {}

    def keeping(name: str, call: Callable[[], object]) -> Callable[[], object]:
        def kept_call() -> object:
            kept[name] = call()
            return kept[name]

        return kept_call

    ways = ("ours", "one thread", "one thread again", "two threads", "two threads again")
    outs = {way: np.empty_like(data) for way in ways}
    encodes: dict[str, Callable[[], object]] = {
        "ours": lambda: codec.encode(data),
        "one thread": lambda: data.astype(SWAPPED),
        "one thread again": lambda: data.astype(SWAPPED),
        "two threads": lambda: _split_fresh(data, SWAPPED),
        "two threads again": lambda: _split_fresh(data, SWAPPED),
    }
    decodes: dict[str, Callable[[], object]] = {
        "ours": lambda: codec.decode(raw),
        "one thread": lambda: np.frombuffer(raw, SWAPPED).astype("<i4"),
        "one thread again": lambda: np.frombuffer(raw, SWAPPED).astype("<i4"),
        "two threads": lambda: _split_fresh(np.frombuffer(raw, SWAPPED), np.dtype("<i4")),
        "two threads again": lambda: _split_fresh(np.frombuffer(raw, SWAPPED), np.dtype("<i4")),
    }
    return {
        "encode": {name: keeping(f"encode {name}", call) for name, call in encodes.items()},
        "decode": {name: keeping(f"decode {name}", call) for name, call in decodes.items()},
        "decode into out": {
            "ours": lambda: codec.decode(raw, out=outs["ours"]),
            "one thread": lambda: np.copyto(outs["one thread"], np.frombuffer(raw, SWAPPED)),
            "one thread again": lambda: np.copyto(
                outs["one thread again"], np.frombuffer(raw, SWAPPED)
            ),
            "two threads": lambda: _split_into(outs["two threads"], np.frombuffer(raw, SWAPPED)),
            "two threads again": lambda: _split_into(
                outs["two threads again"], np.frombuffer(raw, SWAPPED)
            ),
        },
    }


def _chosen(mib: int) -> str:
    """What ours does with this line's work (the rule: a split from `SPLIT_BYTES` on)."""
    return "split" if mib * MiB >= SPLIT_BYTES else "one thread"


def copy_lines() -> dict[str, float]:
    """Per size and operation: the better plain way's median time over ours."""
    ratios: dict[str, float] = {}
    codec = BytesCodec(endian="big", dtype="<i4")
    for mib in SIZES:
        # 15 at least: fresh 64-256 MiB outputs vary with the huge pages given
        rounds = max(15, 240 // mib)
        for operation, ways in _cases(mib, codec).items():
            # warm-up: pages, caches, the pool's threads
            for _ in range(WARM_UP_CALLS):
                for way in ways.values():
                    way()
            medians = median_times(ways, rounds)
            best_plain = min(medians["one thread"], medians["two threads"])
            ratio = best_plain / medians["ours"]
            ratios[f"{mib} MiB {operation}"] = ratio
            # The control: the same statistic for the plain ways timed a second time (an A/A test),
            # how far from 1.0 this machine's noise alone moves a line.
            control = best_plain / min(medians["one thread again"], medians["two threads again"])
            ratios[f"{mib} MiB {operation}, control: plain ways again"] = control
            best = "one" if medians["one thread"] <= medians["two threads"] else "two"
            print(
                f"{mib:4d} MiB {operation:<16} ours {medians['ours'] * 1e3:8.3f} ms  one thread "
                f"{medians['one thread'] * 1e3:8.3f}  two threads "
                f"{medians['two threads'] * 1e3:8.3f}  best/ours {ratio:.2f} (best: {best}; ours: "
                f"{_chosen(mib)}; control {control:.2f})",
                flush=True,
            )
    return ratios


_FRESH = """
import sys, time, numpy as np
from concurrent.futures import ThreadPoolExecutor
way = sys.argv[1]
data = np.arange(4 << 20, dtype="<i4")  # 16 MiB
if way == "ours":
    from numcodecs_bytes import BytesCodec
    codec = BytesCodec(endian="big", dtype="<i4")
    call = lambda: codec.encode(data)
elif way == "one thread":
    call = lambda: data.astype(">i4")
else:
    pool = ThreadPoolExecutor(1)
    def call():
        out = np.empty(data.shape, ">i4")
        half = len(data) // 2
        future = pool.submit(out[half:].__setitem__, Ellipsis, data[half:])
        out[:half] = data[:half]
        future.result()
start = time.perf_counter()
for _ in range(20):
    call()
print(time.perf_counter() - start)
"""


def fresh_process_line(repeats: int = 5) -> float:
    """A new process's first 20 encodes of 16 MiB: ours over the best plain way (medians of
    ``repeats``)."""
    totals: dict[str, list[float]] = {"ours": [], "one thread": [], "two threads": []}
    for _ in range(repeats):
        for way in totals:
            result = subprocess.run(
                [sys.executable, "-c", _FRESH, way], capture_output=True, text=True, check=True
            )
            totals[way].append(float(result.stdout))
    medians = {way: statistics.median(values) for way, values in totals.items()}
    ratio = medians["ours"] / min(medians["one thread"], medians["two threads"])
    print(
        f"fresh process, 20 encodes of 16 MiB: ours {medians['ours'] * 1e3:.1f} ms, one thread "
        f"{medians['one thread'] * 1e3:.1f}, two threads {medians['two threads'] * 1e3:.1f}: "
        f"ours/best {ratio:.2f}",
        flush=True,
    )
    return ratio


_FRESH_ALL = """
import json, sys, time, numpy as np
from concurrent.futures import ThreadPoolExecutor
from numcodecs_bytes import BytesCodec
from numcodecs_bytes._threads import SPLIT_BYTES
MiB = 1 << 20
sys.path.insert(0, sys.argv[2])  # benchmarks/
from interleave import balanced_orders
codec, pool, seed = BytesCodec(endian="big", dtype="<i4"), ThreadPoolExecutor(1), int(sys.argv[1])

def split_into(dst, src):
    half = len(src) // 2
    future = pool.submit(dst[half:].__setitem__, Ellipsis, src[half:])
    dst[:half] = src[:half]
    future.result()

def split_new(src, dtype):
    out = np.empty(src.shape, dtype)
    split_into(out, src)
    return out

lines = {}
for mib in (1, 4, 16, 64, 256):
    data = np.arange(mib * MiB // 4, dtype="<i4")
    raw = data.astype(">i4").tobytes()
    # "again": the control
    ways = ("ours", "one thread", "two threads", "one thread again", "two threads again")
    outs = {way: np.empty_like(data) for way in ways}  # each way's own (_cases)
    kept = {}
    big = np.dtype(">i4")
    keep = kept.__setitem__
    from_raw = lambda: np.frombuffer(raw, big)  # noqa: E731 (one of the ways: a view of raw)
    cases = {
        "encode": {
            "ours": lambda: keep("ours", codec.encode(data)),
            **{way: lambda way=way: keep(way, data.astype(big)) for way in ways[1::2]},
            **{way: lambda way=way: keep(way, split_new(data, big)) for way in ways[2::2]},
        },
        "decode into out": {
            "ours": lambda: codec.decode(raw, out=outs["ours"]),
            **{way: lambda way=way: np.copyto(outs[way], from_raw()) for way in ways[1::2]},
            **{way: lambda way=way: split_into(outs[way], from_raw()) for way in ways[2::2]},
        },
    }
    for operation, ways in cases.items():
        times = {name: [] for name in ways}
        # each way in turn, in a new order each round
        for names in balanced_orders(list(ways), 6 + 31, seed):
            for name in names:
                start = time.perf_counter()
                ways[name]()
                times[name].append(time.perf_counter() - start)
        way = "split" if mib * MiB >= SPLIT_BYTES else "one thread"
        first = {name: sum(values[:20]) for name, values in times.items()}
        after = {name: sorted(values[6:])[15] for name, values in times.items()}  # medians of 31
        lines[f"{mib} MiB {operation}"] = [first, after, way]
print(json.dumps(lines))
"""


def fresh_lines(processes: int) -> None:
    """Each size in ``processes`` new processes: the better plain way over ours, in the first 20
    calls and in the 31 calls after 6 warm-up calls (medians), with the control."""
    import json

    ratios: dict[str, dict[str, list[float]]] = {
        "first 20 calls": {},
        "after 6 warm-up calls": {},
        "control": {},
    }
    chosen: dict[str, list[str]] = {}
    for index in range(processes):
        command = [
            sys.executable,
            "-c",
            _FRESH_ALL,
            str(index),
            os.path.dirname(os.path.abspath(__file__)),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        for line, (first, after, choice) in json.loads(result.stdout).items():
            for measure, times in (("first 20 calls", first), ("after 6 warm-up calls", after)):
                best = min(times["one thread"], times["two threads"])
                ratios[measure].setdefault(line, []).append(best / times["ours"])
            # The A/A control: the plain ways timed a second time, after warm-up, as ours is.
            again = min(after["one thread again"], after["two threads again"])
            ratios["control"].setdefault(line, []).append(
                min(after["one thread"], after["two threads"]) / again
            )
            chosen.setdefault(line, []).append(choice)
        latest = ", ".join(
            f"{line} {values[-1]:.2f}" for line, values in ratios["after 6 warm-up calls"].items()
        )
        print(f"-- process {index + 1} of {processes}, after warm-up: {latest}", flush=True)
    print(
        f"\n-- {processes} new processes: best plain / ours, min .. max (1.0: as fast as the best "
        "way)"
    )
    print(
        f"{'line':<24} {'first 20 calls':>16} {'after 6 warm-up':>16} {'control':>16}   ours chose"
    )
    for line, values in ratios["first 20 calls"].items():
        after, control = ratios["after 6 warm-up calls"][line], ratios["control"][line]
        choices = ", ".join(f"{chosen[line].count(c)} {c}" for c in sorted(set(chosen[line])))
        print(
            f"{line:<24} {min(values):6.2f} .. {max(values):.2f} {min(after):7.2f} .. "
            f"{max(after):.2f} {min(control):7.2f} .. {max(control):.2f}   {choices}"
        )


def zarr_line(rounds: int = 7) -> tuple[float, float] | None:
    """A 256 MiB MemoryStore read, 4 MiB chunks: zarr's time over ours, and ours (threads off) over
    ours."""
    try:
        import zarr
        from zarr.codecs import BytesCodec as ZarrBytesCodec

        from numcodecs_bytes.zarr3 import BytesCodec as NativeBytesCodec
    except ImportError:
        print("zarr v3: zarr-python 3 is not installed; skipped")
        return None
    data = np.arange(32 * MiB, dtype="<f8")  # 256 MiB
    arrays = {}
    for name, serializer in (
        ("ours", NativeBytesCodec(endian="big")),
        ("zarr", ZarrBytesCodec(endian="big")),
    ):
        array = zarr.create_array(
            store=zarr.storage.MemoryStore(),
            shape=data.shape,
            chunks=(MiB // 2,),
            dtype=data.dtype,
            serializer=serializer,
            compressors=None,
        )
        array[...] = data
        arrays[name] = array

    def ours_without_threads() -> object:
        numcodecs_bytes.use_threads = False
        try:
            return arrays["ours"][...]
        finally:
            numcodecs_bytes.use_threads = None

    ways: dict[str, Callable[[], object]] = {
        "ours": lambda: arrays["ours"][...],
        "zarr": lambda: arrays["zarr"][...],
        "ours, use_threads=False": ours_without_threads,
    }
    assert all(np.array_equal(np.asarray(way()), data) for way in ways.values())
    medians = median_times(ways, rounds)
    zarr_ratio = medians["zarr"] / medians["ours"]
    threads_ratio = medians["ours, use_threads=False"] / medians["ours"]
    print(
        f"zarr v3, 256 MiB in 4 MiB chunks: ours {medians['ours'] * 1e3:.1f} ms, zarr's own "
        f"{medians['zarr'] * 1e3:.1f}, ours with use_threads=False "
        f"{medians['ours, use_threads=False'] * 1e3:.1f}: zarr/ours {zarr_ratio:.2f}, threads "
        f"off/default {threads_ratio:.2f}",
        flush=True,
    )
    return zarr_ratio, threads_ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1, help="runs in a row; the spread of each line is reported"
    )
    parser.add_argument(
        "--fresh", type=int, default=0, metavar="N", help="N new processes' first 20 calls instead"
    )
    args = parser.parse_args()
    print(
        f"{describe()}; numcodecs-bytes {numcodecs_bytes.__version__}, "
        f"{numcodecs_bytes.get_nthreads()} threads"
    )
    if args.fresh:
        fresh_lines(args.fresh)
        return 0
    lines: dict[str, list[float]] = {}
    for run in range(args.runs):
        print(f"-- run {run + 1} of {args.runs}")
        for name, ratio in copy_lines().items():
            lines.setdefault(name, []).append(ratio)
        lines.setdefault("fresh process: ours/best (<= 1.15)", []).append(fresh_process_line())
        zarr_ratios = zarr_line()
        if zarr_ratios is not None:
            lines.setdefault("zarr v3 read: zarr/ours (>= 0.95)", []).append(zarr_ratios[0])
            lines.setdefault("zarr v3 read: threads off/default (>= 1.0, noise aside)", []).append(
                zarr_ratios[1]
            )
    print_spread(lines, 58)
    return 0


if __name__ == "__main__":
    sys.exit(main())
