"""Benchmark numcodecs-bytes against the limit and against what users use instead.

    python benchmarks/run.py            # the full run: 4 KiB .. 256 MiB, writes results + plot
    python benchmarks/run.py --quick    # small sizes only, nothing written (a smoke test)

Every contender is timed on the same data, interleaved (one call of each in
turn, repeated), so drift on a busy machine hits all alike. Reported per case:
the median throughput with its min-max, and ratios of median times
(numcodecs-bytes against each contender): best times would hide a way that is
now and then much slower. The speed targets (throughput, per call, Zarr v3 arrays) are checked at the end.

Contenders, each swapping native (little endian) data to big endian and back:
- memcpy: ``np.copyto`` into a preallocated buffer, one thread (no swap: the limit)
- numpy astype: ``a.astype(swapped dtype)``; into ``out``: ``np.copyto(out, swapped view)``
- numcodecs AsType: ``AsType(encode_dtype=">i4", decode_dtype="<i4")`` and its kin
- zarr BytesCodec: zarr-python's own codec, called synchronously. Its decode
  returns a view of the stored (big endian) bytes and swaps nothing, so its
  decode figure is the cost of making a view: listed, but not compared.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
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

import numcodecs_bytes
from numcodecs_bytes import BytesCodec

HERE = Path(__file__).parent
KiB, MiB = 1 << 10, 1 << 20
SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB, 16 * MiB, 32 * MiB, 256 * MiB]
QUICK_SIZES = [4 * KiB, 64 * KiB]
DTYPES = ["<u2", "<i4", "<f8", "<c16", "|b1"]
OPS = ["encode", "decode", "decode into out"]
OURS = "numcodecs-bytes"
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
    if not hasattr(codec, "_encode_sync"):  # before zarr 3.1.6 its BytesCodec has only the async API
        return None
    return (
        lambda a: codec._encode_sync(NDBuffer.from_numpy_array(a), spec),
        lambda e: codec._decode_sync(e, spec),
    )


def contenders(dtype: np.dtype[Any], data: np.ndarray[Any, Any]) -> dict[str, dict[str, Callable[[], Any]]]:
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
        result["zarr BytesCodec"] = {"encode": lambda: zarr_encode(data), "decode": lambda: zarr_decode(zarr_encoded)}
    return result


def time_calls(call: Callable[[], Any], nbytes: int) -> float:
    """Seconds per call: loops small calls so each sample lasts about 2 ms."""
    loops = max(1, (2 * MiB) // max(nbytes, 1) * 2) if nbytes < 16 * MiB else 1
    start = time.perf_counter()
    for _ in range(loops):
        call()
    return (time.perf_counter() - start) / loops


def measure(size: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for dtype_str in DTYPES:
        dtype = np.dtype(dtype_str)
        rng = np.random.default_rng(0)
        data = (
            rng.integers(0, 2, size // dtype.itemsize).astype(dtype)
            if dtype.kind == "b"
            else (
                rng.standard_normal(size // dtype.itemsize * (2 if dtype.kind == "c" else 1)).view(dtype)
                if dtype.kind in "fc"
                else rng.integers(0, 1 << (8 * dtype.itemsize - 2), size // dtype.itemsize).astype(dtype)
            )
        )
        calls = contenders(dtype, data)
        for op in OPS:
            timings: dict[str, list[float]] = {name: [] for name, ops in calls.items() if op in ops}
            for name in timings:  # warm up: first touch, caches, lazy pools
                calls[name][op]()
            for _ in range(repeats):
                for name in timings:
                    gc.collect()
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
        gc.collect()
    return rows


def native_rows(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Target 1: no swap needed, so no copy: time should not grow with size."""
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
            rows.append({"size": size, "op": op, "best_s": min(samples), "median_s": statistics.median(samples)})
    return rows


def decode_into_out_peak_bytes(size: int) -> int:
    """Target 3: extra memory while decoding ``size`` bytes of float64 into out."""
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
    """Markdown: per case, throughput median [min-max] of each contender, and our ratio (median times)."""
    names = ["memcpy", "numpy astype", "numcodecs AsType", "zarr BytesCodec", OURS]
    lines = [
        "| dtype | size | op | " + " | ".join(f"{n} GB/s" for n in names) + " | ours vs astype / AsType / zarr |",
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
        lines.append(f"| {dtype} | {human(size)} | {op} | " + " | ".join(cells) + " | " + " / ".join(ratios) + " |")
    return "\n".join(lines)


def check_targets(rows: list[dict[str, Any]], native: list[dict[str, Any]], peak: int | None) -> list[str]:
    """The throughput targets, as PASS/FAIL lines with the measured figures."""
    typical = {(r["dtype"], r["size"], r["op"], r["contender"]): r["median_s"] for r in rows}
    lines = []

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    by_size = {(r["size"], r["op"]): r["best_s"] for r in native}
    sizes = sorted({r["size"] for r in native})
    for op in ("encode", "decode"):
        ratio = by_size[(sizes[-1], op)] / by_size[(sizes[0], op)]
        verdict(
            ratio <= 3,
            f"no swap is a view: {op}: {human(sizes[-1])} takes {ratio:.2f}x the time of {human(sizes[0])} (<= 3x)",
        )
    swap_dtypes = [d for d in DTYPES if np.dtype(d).itemsize > 1]
    for size in sorted({r["size"] for r in rows}):
        for dtype in (np.dtype(d).name for d in swap_dtypes):
            ours = typical.get((dtype, size, "encode", OURS))
            if ours is None:
                continue
            if size >= 16 * MiB:
                for other in ("numpy astype", "numcodecs AsType", "zarr BytesCodec"):
                    theirs = typical.get((dtype, size, "encode", other))
                    if theirs is not None:
                        verdict(
                            theirs / ours >= 1.6,
                            f"large encode: {dtype} {human(size)}: {theirs / ours:.2f}x {other} (>= 1.6x)",
                        )
                memcpy = typical[(dtype, size, "decode into out", "numpy astype")]
                into_out = typical[(dtype, size, "decode into out", OURS)]
                verdict(
                    memcpy / into_out >= 1.6,
                    f"large decode into out: {dtype} {human(size)}: "
                    f"{memcpy / into_out:.2f}x single-thread np.copyto (>= 1.6x)",
                )
            if size == 4 * KiB:
                for op in ("encode", "decode"):
                    ratio = typical[(dtype, size, op, OURS)] / typical[(dtype, size, op, "numcodecs AsType")]
                    text = f"per call vs AsType: {dtype} 4 KiB {op}: {ratio:.2f}x the time of AsType (<= 0.8x)"
                    verdict(ratio <= 0.8, text)
    if peak is not None:
        verdict(peak <= MiB, f"memory: extra memory decoding 64 MiB into out: {peak} bytes (<= 1 MiB)")
    return lines


class LeastWrapper:
    """The least a codec method in Python can do: check the input's type and dtype, make the numpy call.

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
        rows += _interleaved(np.dtype(dtype_str).name, _per_call_cases(np.dtype(dtype_str)), repeats)
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
        "encode": (partial(codec.encode, data), partial(least.encode, data), partial(data.astype, swapped))
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
        rows.append({"dtype": name, "op": op, "ours_s": ours_s, "least_s": least_s, "bare_s": bare_s})
    return rows


PER_CALL_LIMITS = {"encode": 1.4, "decode into out": 1.8}  # decode from any buffer: 1.3


def check_per_call_targets(rows: list[dict[str, Any]], per_call: list[dict[str, Any]]) -> list[str]:
    """The per-call targets, as PASS/FAIL lines with the measured figures."""
    typical = {(r["dtype"], r["size"], r["op"], r["contender"]): r["median_s"] for r in rows}
    lines = []

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    for row in per_call:
        ratio = row["ours_s"] / row["bare_s"]
        floor = f"the least wrapper: {row['least_s'] / row['bare_s']:.2f}x" if "least_s" in row else ""
        if row["dtype"] == "bool":
            verdict(ratio <= 2, f"per call: bool 4 KiB decode into out: {ratio:.2f}x a plain copy (<= 2x; {floor})")
            continue
        limit = PER_CALL_LIMITS.get(row["op"], 1.3)
        verdict(
            ratio <= limit,
            f"per call: {row['dtype']} 4 KiB {row['op']}: {ratio:.2f}x the bare numpy call (<= {limit}x; {floor})",
        )
    for dtype in ("uint16", "int32", "float64", "complex128"):
        for size in sorted({r["size"] for r in rows}):
            for op in ("encode", "decode"):
                ours, theirs = typical.get((dtype, size, op, OURS)), typical.get((dtype, size, op, "numpy astype"))
                if ours is None or theirs is None:
                    continue
                ratio = theirs / ours
                if 8 * MiB <= size <= 32 * MiB:
                    verdict(ratio >= 1.4, f"threads: {dtype} {human(size)} {op}: {ratio:.2f}x numpy astype (>= 1.4x)")
                else:
                    text = f"as fast as numpy: {dtype} {human(size)} {op}: {ratio:.2f}x numpy astype (>= 0.95x)"
                    verdict(ratio >= 0.95, text)
    for size in sorted({r["size"] for r in rows if r["size"] >= 16 * MiB}):
        ours, memcpy = (
            typical.get(("bool", size, "decode into out", OURS)),
            typical.get(("bool", size, "decode into out", "memcpy")),
        )
        if ours is not None and memcpy is not None:
            text = f"bool checks: {human(size)} decode into out: {memcpy / ours:.2f}x memcpy (>= 0.9x)"
            verdict(memcpy / ours >= 0.9, text)
    return lines


def zarr_v3_rows(repeats: int, total: int = 256 * MiB, chunk: int = 4 * MiB) -> list[dict[str, Any]]:
    """Whole Zarr v3 arrays (float64, stored big endian) written and read, contenders interleaved.

    Contenders: numcodecs_bytes.zarr3 (read with ``codecs.bytes`` pointing at it),
    zarr-python's own BytesCodec, zarr-any-numcodecs and the zarrs pipeline where
    they are installed. Stores: in memory and a local folder.
    """
    import tempfile

    try:
        import zarr
        from zarr.codecs import BytesCodec as ZarrBytesCodec

        from numcodecs_bytes.zarr3 import BytesCodec as Zarr3BytesCodec
    except ImportError:
        return []
    data = np.random.default_rng(0).standard_normal(total // 8)
    contenders: dict[str, tuple[Any, dict[str, Any]]] = {
        OURS: (Zarr3BytesCodec(endian="big"), {"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}),
        "zarr native": (ZarrBytesCodec(endian="big"), {}),
    }
    try:
        from zarr_any_numcodecs import AnyNumcodecsArrayBytesCodec

        contenders["any-numcodecs"] = (AnyNumcodecsArrayBytesCodec(BytesCodec(endian="big")), {})
    except ImportError:
        pass
    try:
        import zarrs  # noqa: F401

        contenders["zarrs pipeline"] = (
            ZarrBytesCodec(endian="big"),
            {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"},
        )
    except ImportError:
        pass
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for where in ("memory", "local disk"):
            arrays = {}
            for name, (serializer, settings) in contenders.items():
                store: Any = {} if where == "memory" else f"{folder}/{name.replace(' ', '_')}.zarr"
                with zarr.config.set(settings):
                    arrays[name] = zarr.create_array(
                        store=store, shape=data.shape, chunks=(chunk // 8,), dtype="<f8",
                        serializer=serializer, compressors=None, overwrite=True,
                    )  # fmt: skip
            timings: dict[tuple[str, str], list[float]] = {}
            names = list(contenders)
            for repeat in range(repeats):
                # Each round starts with another contender: the disk's write-back of one
                # contender's data must not land on the same other one every time.
                for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                    settings = contenders[name][1]
                    with zarr.config.set(settings):
                        array = arrays[name]
                        start = time.perf_counter()
                        array[...] = data
                        timings.setdefault((name, "write"), []).append(time.perf_counter() - start)
                        reopened = zarr.open_array(array.store, mode="r")
                        start = time.perf_counter()
                        read = reopened[...]
                        timings.setdefault((name, "read"), []).append(time.perf_counter() - start)
                        assert np.array_equal(read, data), name
                        del read
                        gc.collect()
            rows += [
                {"where": where, "contender": name, "op": op, "best_s": min(samples), "size": total}
                for (name, op), samples in timings.items()
            ]
        rows += _one_element_rows(zarr, ZarrBytesCodec, Zarr3BytesCodec, folder, repeats)
    return rows


def _one_element_rows(zarr: Any, native_codec: Any, our_codec: Any, folder: str, repeats: int) -> list[dict[str, Any]]:
    """One element from an uncompressed 64 MiB chunk (and from a 4 KiB one) on local disk."""
    rows = []
    for size in (4 * KiB, 64 * MiB):
        data = np.arange(size // 4, dtype="<i4")
        for name, codec, settings in (
            (OURS, our_codec(endian="big"), {"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}),
            ("zarr native", native_codec(endian="big"), {}),
        ):
            path = f"{folder}/one_{size}_{name.replace(' ', '_')}.zarr"
            zarr.create_array(store=path, data=data, chunks=data.shape, serializer=codec, compressors=None)
            with zarr.config.set(settings):
                array = zarr.open_array(path, mode="r")
                array[5]
                samples = []
                for _ in range(repeats * 3):
                    start = time.perf_counter()
                    assert int(array[len(data) // 2]) == len(data) // 2
                    samples.append(time.perf_counter() - start)
            rows.append({"where": "local disk", "contender": name, "op": f"one element of {human(size)}",
                         "best_s": min(samples), "size": size})  # fmt: skip
    return rows


def zarr_v3_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| store | op | contender | best time | time vs numcodecs-bytes |", "| --- | --- | --- | --- | --- |"]
    ours = {(r["where"], r["op"]): r["best_s"] for r in rows if r["contender"] == OURS}
    for r in rows:
        ratio = "-" if r["contender"] == OURS else f"{r['best_s'] / ours[(r['where'], r['op'])]:.2f}x"
        lines.append(f"| {r['where']} | {r['op']} | {r['contender']} | {r['best_s'] * 1e3:.2f} ms | {ratio} |")
    return "\n".join(lines)


def check_zarr_v3_targets(rows: list[dict[str, Any]]) -> list[str]:
    """The Zarr v3 array targets, as PASS/FAIL lines with the measured figures."""
    best = {(r["where"], r["op"], r["contender"]): r["best_s"] for r in rows}
    lines = []

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}  Zarr v3 arrays: {text}")

    for where in ("memory", "local disk"):
        for op in ("write", "read"):
            if (where, op, OURS) in best:
                ratio = best[(where, op, "zarr native")] / best[(where, op, OURS)]
                verdict(ratio >= 1.0, f"{where} {op}: {ratio:.2f}x zarr native (>= 1.0x; aim 1.2x on read)")
    big, small = ("local disk", "one element of 64 MiB"), ("local disk", "one element of 4 KiB")
    if (*big, OURS) in best:
        ratio = best[(*big, "zarr native")] / best[(*big, OURS)]
        verdict(ratio >= 20, f"one element of a 64 MiB chunk: {ratio:.1f}x faster than zarr native (>= 20x)")
        growth = best[(*big, OURS)] / best[(*small, OURS)]
        verdict(growth <= 2, f"one element: from a 64 MiB chunk {growth:.2f}x the time from a 4 KiB one (<= 2x)")
    return lines


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), sharey=True)
    for ax, op in zip(axes, OPS, strict=True):
        for color, name in enumerate(["memcpy", "numpy astype", "numcodecs AsType", "zarr BytesCodec", OURS]):
            if (name, op) in NOT_COMPARABLE:
                continue
            points = sorted(
                (r["size"], gbps(r["size"], r["median_s"]))
                for r in rows
                if r["op"] == op and r["contender"] == name and r["dtype"] == "int32"
            )
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=name, color=f"C{color}", linewidth=2.5 if name == OURS else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(SIZES, [human(s) for s in SIZES])
        ax.set_title(f"int32 {op}, little -> big endian")
        ax.set_xlabel("chunk size")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput, GB/s (median of interleaved runs)")
    axes[0].legend()
    axes[1].text(0.02, 0.02, "zarr's decode is a view, no swap: not shown", transform=axes[1].transAxes, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def environment() -> dict[str, str]:
    import os

    versions = {"python": platform.python_version(), "numpy": np.__version__, "numcodecs": numcodecs.__version__}
    try:
        import zarr

        versions["zarr"] = zarr.__version__
    except ImportError:
        pass
    versions["numcodecs-bytes"] = numcodecs_bytes.__version__
    return {
        "date": datetime.date.today().isoformat(),
        "cores": str(os.cpu_count()),
        "threads": str(numcodecs_bytes.get_nthreads()),
        **versions,
    }


def report(
    rows: list[dict[str, Any]],
    native: list[dict[str, Any]],
    peak: int | None,
    per_call: list[dict[str, Any]],
    zarr_v3: list[dict[str, Any]],
) -> tuple[str, list[str]]:
    """The tables (chunks; Zarr v3 arrays) and every target's PASS/FAIL line."""
    text = table(rows)
    if zarr_v3:
        text += "\n\nZarr v3 arrays (float64 stored big endian; best of interleaved runs):\n\n" + zarr_v3_table(zarr_v3)
    targets = check_targets(rows, native, peak) + check_per_call_targets(rows, per_call)
    return text, targets + check_zarr_v3_targets(zarr_v3)


def write_results(
    env: dict[str, str],
    rows: list[dict[str, Any]],
    native: list[dict[str, Any]],
    peak: int | None,
    per_call: list[dict[str, Any]],
    zarr_v3: list[dict[str, Any]],
) -> None:
    """Print the tables and the targets; write results.md, results.json and throughput.png."""
    text, targets = report(rows, native, peak, per_call, zarr_v3)
    print(text)
    print()
    print("\n".join(targets))
    (HERE / "results.md").write_text(
        f"Measured {env['date']} on a machine with {env['cores']} cores; "
        + ", ".join(f"{k} {v}" for k, v in env.items() if k not in ("date", "cores"))
        + ".\n\nThroughput in GB/s: median [min-max] of interleaved runs; ratios compare median times"
        + " (above 1x: numcodecs-bytes is faster).\n\n"
        + text
        + "\n\n"
        + "\n".join(f"    {line}" for line in targets)
        + "\n"
    )
    (HERE / "results.json").write_text(
        json.dumps(
            {
                "environment": env,
                "rows": rows,
                "native": native,
                "peak_bytes": peak,
                "per_call": per_call,
                "zarr_v3": zarr_v3,
            },
            indent=1,
        )
    )
    plot(rows, HERE / "throughput.png")
    print(f"\nwrote {HERE / 'results.md'}, results.json and throughput.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats, write nothing")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved runs per case (default 7, quick 3)")
    parser.add_argument("--sizes", help="comma-separated sizes in KiB, e.g. 16384,262144 (writes nothing)")
    parser.add_argument(
        "--render", action="store_true", help="measure nothing: rebuild table and plot from results.json"
    )
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads((HERE / "results.json").read_text())
        write_results(
            saved["environment"],
            saved["rows"],
            saved["native"],
            saved["peak_bytes"],
            saved.get("per_call", []),
            saved.get("zarr_v3", []),
        )
        return 0
    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = [int(kib) * KiB for kib in args.sizes.split(",")]
        args.quick = True  # a partial run: print, write nothing
    repeats = args.repeats or (3 if args.quick else 7)

    env = environment()
    print("environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        print(f"measuring {human(size)} ...", file=sys.stderr, flush=True)
        rows += measure(size, repeats)
    native = native_rows([4 * KiB, 64 * MiB] if not args.quick else [4 * KiB, 64 * KiB], repeats)
    peak = None if args.quick else decode_into_out_peak_bytes(64 * MiB)
    print("measuring per call ...", file=sys.stderr, flush=True)
    per_call = per_call_rows(repeats)
    print("measuring Zarr v3 arrays ...", file=sys.stderr, flush=True)
    zarr_v3 = zarr_v3_rows(repeats, total=4 * MiB, chunk=MiB) if args.quick else zarr_v3_rows(5)
    if args.quick:
        text, targets = report(rows, native, peak, per_call, zarr_v3)
        print(text)
        print()
        print("\n".join(targets))
    else:
        write_results(env, rows, native, peak, per_call, zarr_v3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
