"""Bool decode into ``out``: what checking every byte costs, and what checking in one pass would
gain.

    python benchmarks/bool_check.py             # 16, 32, 64 and 256 MiB (about 30 s)
    python benchmarks/bool_check.py --runs 3    # three runs in a row, each line's spread
    python benchmarks/bool_check.py --sizes 1   # 1 MiB only (a smoke test)

Bool bytes must be 0x00 or 0x01, so a decode reads every byte to check it. Ours
checks them all before it writes ``out`` (``out`` is untouched when decoding
fails): a second read of the data where it outgrows the caches. The ways timed,
interleaved, on the same bytes and ``out``:

- memcpy: ``np.copyto`` on one thread, no check (what ``codec.py``'s bool target is against);
- split copy: the same in two halves on two threads, no check (the ceiling
  of any check-and-copy on two threads);
- ours: ``BytesCodec(dtype="bool").decode(stored, out=out)``;
- two passes: ours' order in plain code, always on two threads: the largest
  byte of each half, then a split copy;
- one pass: each of two threads checks a block of 1 MiB and copies it while it is in cache, block
  after block (blocks of 0.5 to 4 MiB measured alike; 64 KiB ones cost more in Python per block than
  they save). It reads the data once, but a corrupt byte found late leaves the blocks before it
  written to ``out``: not what ours does.

A line's figure is memcpy's median time over that way's (above 1.0: faster than memcpy).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from interleave import median_times, print_spread
from machine import describe

import numcodecs_bytes
from numcodecs_bytes import BytesCodec
from numcodecs_bytes._threads import SPLIT_BYTES

MiB = 1 << 20
SIZES = [16, 32, 64, 256]
BLOCK = 1 << 20
_pool = ThreadPoolExecutor(1)
T = TypeVar("T")


def _halves(length: int, part: Callable[[int, int], T]) -> list[T]:
    """``part`` over the first half here and the second on the helper thread."""
    half = length // 2
    future = _pool.submit(part, half, length)
    return [part(0, half), future.result()]


def _ways(
    mib: int,
) -> tuple[dict[str, Callable[[], Any]], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The ways, and the bytes they read and the output they write (as uint8)."""
    stored = np.random.default_rng(0).integers(0, 2, mib * MiB, dtype=np.uint8).tobytes()
    source = np.frombuffer(stored, np.uint8)
    out = np.empty(len(source), bool)
    target = out.view(np.uint8)
    codec = BytesCodec(dtype="bool")

    def copy(start: int, stop: int) -> None:
        target[start:stop] = source[start:stop]

    def largest(start: int, stop: int) -> int:
        return int(source[start:stop].max())

    def two_passes() -> None:
        if max(_halves(len(source), largest)) > 1:
            raise ValueError("corrupt bool data")
        _halves(len(source), copy)

    def checked_blocks(start: int, stop: int) -> None:
        for block in range(start, stop, BLOCK):
            end = min(block + BLOCK, stop)
            if largest(block, end) > 1:
                raise ValueError("corrupt bool data")
            copy(block, end)

    ways = {
        "memcpy": lambda: np.copyto(target, source),
        "split copy": lambda: _halves(len(source), copy),
        "ours": lambda: codec.decode(stored, out=out),
        "two passes": two_passes,
        "one pass": lambda: _halves(len(source), checked_blocks),
    }
    return ways, source, target


def lines(sizes: list[int]) -> dict[str, float]:
    """Per size and way: memcpy's median time over the way's."""
    ratios: dict[str, float] = {}
    for mib in sizes:
        ways, source, target = _ways(mib)
        for name, way in ways.items():  # each way writes the right bytes, or its time means nothing
            target[...] = 2
            way()
            assert np.array_equal(target, source), name
        # warm-up: pages, caches, the helper threads started
        for _ in range(7):
            for way in ways.values():
                way()
        # medians of a few rounds swing by 0.1 below 64 MiB
        medians = median_times(ways, max(15, 960 // mib))
        figures = {
            name: medians["memcpy"] / seconds
            for name, seconds in medians.items()
            if name != "memcpy"
        }
        for name, ratio in figures.items():
            ratios[f"{mib} MiB {name}"] = ratio
        split = mib * MiB >= SPLIT_BYTES  # the thread rule, for the check and the copy alike
        print(
            f"{mib:4d} MiB  memcpy {medians['memcpy'] * 1e3:7.3f} ms  "
            + "  ".join(f"{name} {ratio:.2f}" for name, ratio in figures.items())
            + f"  (ours: {'split' if split else 'one thread'})",
            flush=True,
        )
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1, help="runs in a row; the spread of each line is reported"
    )
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="comma-separated sizes in MiB"
    )
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        f"{describe()}; numcodecs-bytes {numcodecs_bytes.__version__}, "
        f"{numcodecs_bytes.get_nthreads()} threads"
    )
    spread: dict[str, list[float]] = {}
    for run in range(args.runs):
        print(f"-- run {run + 1} of {args.runs}: memcpy's time over each way's")
        for name, ratio in lines(sizes).items():
            spread.setdefault(name, []).append(ratio)
    print_spread(spread, 24)
    return 0


if __name__ == "__main__":
    sys.exit(main())
