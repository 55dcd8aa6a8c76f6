"""Whole Zarr v3 arrays written and read with each codec that can, side by side in one run.

    python benchmarks/zarr_arrays.py            # 256 MiB of float64 in 4 MiB chunks, about a minute
    python benchmarks/zarr_arrays.py --quick    # 4 MiB in 1 MiB chunks, seconds (a smoke test)

Contenders, each storing float64 big endian: numcodecs_bytes.zarr3 (read with
``codecs.bytes`` pointing at it), zarr-python's own BytesCodec, and where they
are installed zarr-any-numcodecs (our numcodecs codec wrapped) and the zarrs
codec pipeline (compiled, with zarr's codec). Stores: in memory and a local
folder. Each round starts with another contender, so that the disk's write-back
of one contender's data does not land on the same other one every time; best
times of the rounds are reported.

The target, printed last as PASS or FAIL with the figure: whole arrays at least
as fast as with zarr-python's own codec (its best time over ours >= 1.0).
Per chunk and one element of a large chunk: ``zarr_chunks.py``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BytesCodec as ZarrBytesCodec

from numcodecs_bytes import BytesCodec
from numcodecs_bytes.zarr3 import BytesCodec as Zarr3BytesCodec

MiB = 1 << 20
OURS = "numcodecs-bytes"


def contenders() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each contender's serializer and the zarr settings it is written and read with."""
    found: dict[str, tuple[Any, dict[str, Any]]] = {
        OURS: (Zarr3BytesCodec(endian="big"), {"codecs.bytes": "numcodecs_bytes.zarr3.BytesCodec"}),
        "zarr native": (ZarrBytesCodec(endian="big"), {}),
    }
    try:
        from zarr_any_numcodecs import AnyNumcodecsArrayBytesCodec

        found["any-numcodecs"] = (AnyNumcodecsArrayBytesCodec(BytesCodec(endian="big")), {})
    except ImportError:
        pass
    try:
        import zarrs  # noqa: F401

        found["zarrs pipeline"] = (
            ZarrBytesCodec(endian="big"),
            {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"},
        )
    except ImportError:
        pass
    return found


def best_times(repeats: int, total: int, chunk: int) -> dict[tuple[str, str, str], float]:
    """(store, op, contender) -> the best of ``repeats`` rounds, in seconds."""
    data = np.random.default_rng(0).standard_normal(total // 8)
    ways = contenders()
    best: dict[tuple[str, str, str], float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for where in ("memory", "local disk"):
            arrays = {}
            for name, (serializer, settings) in ways.items():
                store: Any = {} if where == "memory" else f"{folder}/{name.replace(' ', '_')}.zarr"
                with zarr.config.set(settings):
                    arrays[name] = zarr.create_array(
                        store=store,
                        shape=data.shape,
                        chunks=(chunk // 8,),
                        dtype="<f8",
                        serializer=serializer,
                        compressors=None,
                        overwrite=True,
                    )
            names = list(ways)
            for repeat in range(repeats):
                gc.collect()  # once a round; each round starts with another contender
                for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                    with zarr.config.set(ways[name][1]):
                        array = arrays[name]
                        start = time.perf_counter()
                        array[...] = data
                        written = time.perf_counter() - start
                        reopened = zarr.open_array(array.store, mode="r")
                        start = time.perf_counter()
                        read = reopened[...]
                        elapsed = time.perf_counter() - start
                        assert np.array_equal(read, data), name
                        del read
                    for op, seconds in (("write", written), ("read", elapsed)):
                        key = (where, op, name)
                        best[key] = min(best.get(key, seconds), seconds)
    return best


def table(best: dict[tuple[str, str, str], float]) -> str:
    lines = [
        "| store | op | contender | best time | its time over ours |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (where, op, name), seconds in best.items():
        ratio = "-" if name == OURS else f"{seconds / best[(where, op, OURS)]:.2f}x"
        lines.append(f"| {where} | {op} | {name} | {seconds * 1e3:.2f} ms | {ratio} |")
    return "\n".join(lines)


def check_targets(best: dict[tuple[str, str, str], float]) -> list[str]:
    lines = []
    for where, op, name in best:
        if name == OURS:
            ratio = best[(where, op, "zarr native")] / best[(where, op, OURS)]
            verdict = "PASS" if ratio >= 1.0 else "FAIL"
            lines.append(
                f"{verdict}  whole arrays: {where} {op}: {ratio:.2f}x zarr's own codec's "
                "speed (>= 1.0x)"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 MiB in 1 MiB chunks, 3 rounds")
    parser.add_argument("--repeats", type=int, default=None, help="rounds (default 5, quick 3)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    total, chunk = (4 * MiB, MiB) if args.quick else (256 * MiB, 4 * MiB)
    print(
        f"zarr {zarr.__version__}: {total // MiB} MiB of float64 in {chunk // MiB} MiB chunks, "
        f"best of {repeats}"
    )
    best = best_times(repeats, total, chunk)
    print(table(best))
    print()
    print("\n".join(check_targets(best)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
