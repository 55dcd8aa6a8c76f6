"""The numcodecs codec against the limit and against what users use instead, side by side in one
run.

    python benchmarks/codec.py                  # 4 KiB .. 256 MiB, about 2 minutes
    python benchmarks/codec.py --quick          # 4 KiB and 64 KiB, seconds (a smoke test)
    python benchmarks/codec.py --plot out.png   # and draw int32's throughput

Every contender is timed on the same data, interleaved (one call of each in
turn, repeated), so drift on a busy machine hits all alike. Reported per case:
the median throughput with its min-max, and ratios of median times
(numcodecs-bytes against each contender): best times would hide a way that is
now and then much slower.

Contenders, each swapping native (little endian) data to big endian and back:
- memcpy: ``np.copyto`` into a preallocated buffer, one thread (no swap: the limit)
- numpy astype: ``a.astype(swapped dtype)``; into ``out``: ``np.copyto(out, swapped view)``
- numcodecs AsType: ``AsType(encode_dtype=">i4", decode_dtype="<i4")`` and its kin
- zarr BytesCodec: zarr-python's own codec, called synchronously. Its decode
  returns a view of the stored (big endian) bytes and swaps nothing, so its
  decode figure is the cost of making a view: listed, but not compared.

The targets, each a ratio to another way measured in the same run, are printed
last, PASS or FAIL with the figure: copy-free (no swap: the time does not grow
with the size), throughput (numpy astype's time over ours), per call (a 4 KiB
call against the bare numpy call and against AsType), bool checks (against
memcpy), memory (extra bytes decoding into ``out``). Whether splitting a copy
over threads pays is measured by ``threads.py``, against a plain two-thread split.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
from machine import describe

import numcodecs_bytes
from numcodecs_bytes import BytesCodec

KiB, MiB = 1 << 10, 1 << 20
SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB, 16 * MiB, 32 * MiB, 256 * MiB]
QUICK_SIZES = [4 * KiB, 64 * KiB]
DTYPES = ["<u2", "<i4", "<f8", "<c16", "|b1"]
OPS = ["encode", "decode", "decode into out"]
OURS = "numcodecs-bytes"
# pages, caches, the thread rule's helper threads started
WARM_UP_CALLS = 7
NOT_COMPARABLE = {("zarr BytesCodec", "decode")}  # a view in stored byte order: no swap happens


def _zarr_bytes_codec(
    dtype: np.dtype[Any], shape: tuple[int, ...]
) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """zarr-python's BytesCodec as sync encode/decode functions (its chunk-level API)."""
    try:
        from zarr.codecs import BytesCodec as ZarrBytesCodec
        from zarr.core.array_spec import ArrayConfig, ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.buffer.cpu import NDBuffer
        from zarr.core.dtype import get_data_type_from_native_dtype
    except ImportError:
        return None
    spec = ArraySpec(
        shape=shape,
        dtype=get_data_type_from_native_dtype(dtype),
        fill_value=0,
        config=ArrayConfig(order="C", write_empty_chunks=True),
        prototype=default_buffer_prototype(),
    )
    codec = ZarrBytesCodec(endian="big").evolve_from_array_spec(spec)
    # before zarr 3.1.6 its BytesCodec has only the async API
    if not hasattr(codec, "_encode_sync"):
        return None
    return (
        lambda a: codec._encode_sync(NDBuffer.from_numpy_array(a), spec),
        lambda e: codec._decode_sync(e, spec),
    )


def contenders(
    dtype: np.dtype[Any], data: np.ndarray[Any, Any]
) -> dict[str, dict[str, Callable[[], Any]]]:
    """For each contender, a zero-argument callable per operation, on this data."""
    swapped = dtype.newbyteorder(">")
    ours = BytesCodec(endian="big", dtype=dtype)
    astype = numcodecs.AsType(encode_dtype=swapped.str, decode_dtype=dtype.str)
    encoded = bytes(ours.encode(data))
    encoded_view = np.frombuffer(encoded, swapped)
    out = np.empty_like(data)
    prealloc = np.empty_like(data)
    result: dict[str, dict[str, Callable[[], Any]]] = {
        "memcpy": {op: (lambda: np.copyto(prealloc, data)) for op in OPS},
        "numpy astype": {
            "encode": lambda: data.astype(swapped),
            "decode": lambda: encoded_view.astype(dtype),
            "decode into out": lambda: np.copyto(out, encoded_view),
        },
        "numcodecs AsType": {
            "encode": lambda: astype.encode(data),
            "decode": lambda: astype.decode(encoded),
            "decode into out": lambda: astype.decode(encoded, out=out),
        },
        OURS: {
            "encode": lambda: ours.encode(data),
            "decode": lambda: ours.decode(encoded),
            "decode into out": lambda: ours.decode(encoded, out=out),
        },
    }
    zarr_codec = _zarr_bytes_codec(dtype, data.shape)
    if zarr_codec is not None:
        zarr_encode, zarr_decode = zarr_codec
        zarr_encoded = zarr_encode(data)
        result["zarr BytesCodec"] = {
            "encode": lambda: zarr_encode(data),
            "decode": lambda: zarr_decode(zarr_encoded),
        }
    return result


def time_calls(call: Callable[[], Any], nbytes: int) -> float:
    """Seconds per call: loops small calls so each sample lasts about 2 ms.

    The garbage collector is off while timing, as in ``timeit``: one contender's
    garbage must not be collected in another's time.
    """
    loops = max(1, (2 * MiB) // max(nbytes, 1) * 2) if nbytes < 16 * MiB else 1
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(loops):
            call()
        return (time.perf_counter() - start) / loops
    finally:
        gc.enable()


def measure(size: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for dtype_str in DTYPES:
        dtype = np.dtype(dtype_str)
        rng = np.random.default_rng(0)
        data = (
            rng.integers(0, 2, size // dtype.itemsize).astype(dtype)
            if dtype.kind == "b"
            else (
                rng.standard_normal(size // dtype.itemsize * (2 if dtype.kind == "c" else 1)).view(
                    dtype
                )
                if dtype.kind in "fc"
                else rng.integers(0, 1 << (8 * dtype.itemsize - 2), size // dtype.itemsize).astype(
                    dtype
                )
            )
        )
        calls = contenders(dtype, data)
        for op in OPS:
            timings: dict[str, list[float]] = {name: [] for name, ops in calls.items() if op in ops}
            # warm up: first touch, caches, lazy pools
            for name in timings:
                for _ in range(WARM_UP_CALLS):
                    calls[name][op]()
            for _ in range(repeats):
                for name in timings:
                    timings[name].append(time_calls(calls[name][op], size))
            for name, samples in timings.items():
                rows.append(
                    {
                        "dtype": dtype.name,
                        "size": size,
                        "op": op,
                        "contender": name,
                        "best_s": min(samples),
                        "median_s": statistics.median(samples),
                        "worst_s": max(samples),
                    }
                )
        del data, calls
    return rows


def copy_free_rows(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Encode and decode in the stored byte order: views, so the time should not grow with the
    size."""
    rows = []
    for size in sizes:
        data = np.arange(size // 4, dtype="<i4")
        codec = BytesCodec(endian="little", dtype="<i4")
        encoded = codec.encode(data)
        calls: tuple[tuple[str, Callable[[], Any]], ...] = (
            ("encode", partial(codec.encode, data)),
            ("decode", partial(codec.decode, encoded)),
        )
        for op, call in calls:
            call()
            samples = [time_calls(call, 4 * KiB) for _ in range(repeats)]
            rows.append(
                {
                    "size": size,
                    "op": op,
                    "best_s": min(samples),
                    "median_s": statistics.median(samples),
                }
            )
    return rows


def decode_into_out_peak_bytes(size: int) -> int:
    """Extra memory while decoding ``size`` bytes of float64 into ``out``."""
    data = np.arange(size // 8, dtype="<f8")
    codec = BytesCodec(endian="big", dtype="<f8")
    encoded = bytes(codec.encode(data))
    out = np.empty_like(data)
    tracemalloc.start()
    codec.decode(encoded, out=out)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def human(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


def gbps(size: int, seconds: float) -> float:
    return size / seconds / 1e9


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per case, throughput median [min-max] of each contender, and our ratio (median
    times)."""
    names = ["memcpy", "numpy astype", "numcodecs AsType", "zarr BytesCodec", OURS]
    lines = [
        "| dtype | size | op | " + " | ".join(f"{n} GB/s" for n in names) + " | ours vs astype / "
        "AsType / zarr |",
        "|" + " --- |" * (len(names) + 4),
    ]
    cases: dict[tuple[str, int, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        cases.setdefault((row["dtype"], row["size"], row["op"]), {})[row["contender"]] = row
    for (dtype, size, op), by_name in cases.items():
        cells = []
        for name in names:
            found = by_name.get(name)
            if found is None:
                cells.append("n/a")
                continue
            cells.append(
                f"{gbps(size, found['median_s']):.2f} "
                f"[{gbps(size, found['worst_s']):.2f}-{gbps(size, found['best_s']):.2f}]"
            )
        ours = by_name[OURS]["median_s"]
        ratios = [
            "n/a"
            if n not in by_name
            else "view, no swap"
            if (n, op) in NOT_COMPARABLE
            else f"{by_name[n]['median_s'] / ours:.2f}x"
            for n in ("numpy astype", "numcodecs AsType", "zarr BytesCodec")
        ]
        lines.append(
            f"| {dtype} | {human(size)} | {op} | "
            + " | ".join(cells)
            + " | "
            + " / ".join(ratios)
            + " |"
        )
    return "\n".join(lines)


class LeastWrapper:
    """The least a codec method in Python can do: check the input's type and dtype, make the numpy
    call.

    Not a codec (it resolves nothing and checks no bytes but bool's): it measures
    the floor of the per-call ratios on the machine at hand. No Python method can
    get below it, so a target under this floor cannot be met by one.
    """

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype, self.stored = dtype, dtype.newbyteorder(">")
        self.is_bool = dtype.kind == "b"  # decided once, as a codec would

    def encode(self, array: Any) -> np.ndarray[Any, Any]:
        if type(array) is not np.ndarray or array.dtype is not self.dtype:
            raise TypeError("not an array of the dtype")
        return array.astype(self.stored)

    def decode(self, buf: Any, out: Any = None) -> np.ndarray[Any, Any]:
        stored = np.frombuffer(buf, self.stored)
        if self.is_bool and stored.view(np.uint8).max() > 1:
            raise ValueError("corrupt bool data")
        if out is None:
            return stored.astype(self.dtype)
        if type(out) is not np.ndarray or out.dtype is not self.dtype:
            raise TypeError("out is not an array of the dtype")
        np.copyto(out, stored)
        return out


Case = tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]
"""Ours, the least wrapper, the bare numpy call."""


def per_call_rows(repeats: int) -> list[dict[str, Any]]:
    """A 4 KiB swap per call, against the bare numpy call it wraps and the least wrapper of it."""
    rows = []
    for dtype_str in ("<i4", "<f8"):
        rows += _interleaved(
            np.dtype(dtype_str).name, _per_call_cases(np.dtype(dtype_str)), repeats
        )
    flags = np.random.default_rng(0).integers(0, 2, 4 * KiB).astype(bool)
    bool_codec, least = BytesCodec(dtype="bool"), LeastWrapper(flags.dtype)
    stored = bytes(flags.view(np.uint8))
    out_bool, out_bytes = np.empty_like(flags), np.empty(4 * KiB, np.uint8)
    bool_case = (
        lambda: bool_codec.decode(stored, out=out_bool),
        lambda: least.decode(stored, out=out_bool),
        lambda: np.copyto(out_bytes, np.frombuffer(stored, np.uint8)),
    )
    return rows + _interleaved("bool", {"decode into out": bool_case}, repeats)


def _per_call_cases(dtype: np.dtype[Any]) -> dict[str, Case]:
    swapped = dtype.newbyteorder(">")
    data = np.arange(4 * KiB // dtype.itemsize).astype(dtype)
    codec, least = BytesCodec(endian="big", dtype=dtype), LeastWrapper(dtype)
    encoded = bytes(codec.encode(data))
    as_uint8, as_memoryview = np.frombuffer(encoded, np.uint8), memoryview(encoded)
    out = np.empty_like(data)
    cases: dict[str, Case] = {
        "encode": (
            partial(codec.encode, data),
            partial(least.encode, data),
            partial(data.astype, swapped),
        )
    }
    for name, buf in (("bytes", encoded), ("uint8", as_uint8), ("memoryview", as_memoryview)):
        cases[f"decode {name}"] = (
            partial(codec.decode, buf),
            partial(least.decode, buf),
            partial(lambda buf: np.frombuffer(buf, swapped).astype(dtype), buf),
        )
    cases["decode into out"] = (
        lambda: codec.decode(encoded, out=out),
        lambda: least.decode(encoded, out=out),
        lambda: np.copyto(out, np.frombuffer(encoded, swapped)),
    )
    return cases


def _interleaved(name: str, cases: dict[str, Case], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for op, calls in cases.items():
        samples: list[list[float]] = [[], [], []]
        for call in calls:
            call()
        for _ in range(repeats):
            for call, times in zip(calls, samples, strict=True):
                times.append(time_calls(call, 4 * KiB))
        ours_s, least_s, bare_s = (min(times) for times in samples)
        rows.append(
            {"dtype": name, "op": op, "ours_s": ours_s, "least_s": least_s, "bare_s": bare_s}
        )
    return rows


PER_CALL_LIMITS = {"encode": 1.4, "decode into out": 1.8}  # decode from any buffer: 1.3


def check_targets(
    rows: list[dict[str, Any]],
    copy_free: list[dict[str, Any]],
    per_call: list[dict[str, Any]],
    peak: int | None,
) -> list[str]:
    """Every target as a PASS/FAIL line with its figure; each is a ratio to a way measured in this
    run."""
    typical = {(r["dtype"], r["size"], r["op"], r["contender"]): r["median_s"] for r in rows}
    lines = []

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    best = {(r["size"], r["op"]): r["best_s"] for r in copy_free}
    small, large = min(r["size"] for r in copy_free), max(r["size"] for r in copy_free)
    for op in ("encode", "decode"):
        ratio = best[(large, op)] / best[(small, op)]
        verdict(
            ratio <= 3,
            f"copy-free: {op} in stored order: {human(large)} takes {ratio:.2f}x "
            f"the time of {human(small)} (<= 3x)",
        )
    for row in per_call:
        ratio = row["ours_s"] / row["bare_s"]
        floor = f"the least wrapper: {row['least_s'] / row['bare_s']:.2f}x"
        if row["dtype"] == "bool":
            verdict(
                ratio <= 2,
                f"per call: bool 4 KiB decode into out: {ratio:.2f}x a plain copy (<= 2x; {floor})",
            )
            continue
        limit = PER_CALL_LIMITS.get(row["op"], 1.3)
        verdict(
            ratio <= limit,
            f"per call: {row['dtype']} 4 KiB {row['op']}: {ratio:.2f}x the bare "
            f"numpy call (<= {limit}x; {floor})",
        )
    for dtype in (np.dtype(d).name for d in DTYPES if np.dtype(d).itemsize > 1):
        for op in ("encode", "decode"):
            ratio = (
                typical[(dtype, 4 * KiB, op, OURS)]
                / typical[(dtype, 4 * KiB, op, "numcodecs AsType")]
            )
            verdict(
                ratio <= 0.8,
                f"per call against AsType: {dtype} 4 KiB {op}: {ratio:.2f}x its time (<= 0.8x)",
            )
    for (dtype, size, op, contender), ours in typical.items():
        astype = typical.get((dtype, size, op, "numpy astype"))
        # 4 KiB: per call
        if contender == OURS and dtype != "bool" and size > 4 * KiB and astype is not None:
            verdict(
                astype / ours >= 0.95,
                f"throughput: {dtype} {human(size)} {op}: "
                f"{astype / ours:.2f}x numpy astype's speed (>= 0.95x)",
            )
    for size in sorted({r["size"] for r in rows if r["size"] >= 16 * MiB}):
        ratio = (
            typical[("bool", size, "decode into out", "memcpy")]
            / typical[("bool", size, "decode into out", OURS)]
        )
        verdict(
            ratio >= 0.9,
            f"bool checks: {human(size)} decode into out: {ratio:.2f}x memcpy's speed (>= 0.9x)",
        )
    if peak is not None:
        verdict(peak <= MiB, f"memory: extra bytes decoding 64 MiB into out: {peak} (<= 1 MiB)")
    return lines


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), sharey=True)
    for ax, op in zip(axes, OPS, strict=True):
        for color, name in enumerate(
            ["memcpy", "numpy astype", "numcodecs AsType", "zarr BytesCodec", OURS]
        ):
            if (name, op) in NOT_COMPARABLE:
                continue
            points = sorted(
                (r["size"], gbps(r["size"], r["median_s"]))
                for r in rows
                if r["op"] == op and r["contender"] == name and r["dtype"] == "int32"
            )
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(
                    xs,
                    ys,
                    marker="o",
                    label=name,
                    color=f"C{color}",
                    linewidth=2.5 if name == OURS else 1.2,
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(SIZES, [human(s) for s in SIZES])
        ax.set_title(f"int32 {op}, little -> big endian")
        ax.set_xlabel("chunk size")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput, GB/s (median of interleaved runs)")
    axes[0].legend()
    axes[1].text(
        0.02,
        0.02,
        "zarr's decode is a view, no swap: not shown",
        transform=axes[1].transAxes,
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 KiB and 64 KiB only, 3 repeats")
    parser.add_argument(
        "--repeats", type=int, default=None, help="interleaved runs per case (default 7, quick 3)"
    )
    parser.add_argument("--sizes", help="comma-separated sizes in KiB, e.g. 4,16384,262144")
    parser.add_argument(
        "--plot", type=Path, help="draw int32's throughput per contender into this PNG file"
    )
    args = parser.parse_args(argv)
    sizes = (
        [int(kib) * KiB for kib in args.sizes.split(",")]
        if args.sizes
        else QUICK_SIZES
        if args.quick
        else SIZES
    )
    sizes = sorted({4 * KiB, *sizes})  # the per-call targets read the 4 KiB rows
    repeats = args.repeats or (3 if args.quick else 7)

    print(
        f"{datetime.date.today()}, {os.cpu_count()} cores, {numcodecs_bytes.get_nthreads()} "
        f"threads; Python {platform.python_version()}, numpy {np.__version__}, numcodecs "
        f"{numcodecs.__version__}, numcodecs-bytes {numcodecs_bytes.__version__}\n{describe()}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    for size in sizes:
        print(f"measuring {human(size)} ...", file=sys.stderr, flush=True)
        rows += measure(size, repeats)
    copy_free = copy_free_rows([4 * KiB, 64 * KiB] if args.quick else [4 * KiB, 64 * MiB], repeats)
    peak = None if args.quick else decode_into_out_peak_bytes(64 * MiB)
    print("measuring per call ...", file=sys.stderr, flush=True)
    per_call = per_call_rows(repeats)
    print(table(rows))
    print()
    print("\n".join(check_targets(rows, copy_free, per_call, peak)))
    if args.plot:
        plot(rows, args.plot)
        print(f"\nwrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
