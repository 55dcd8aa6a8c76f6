"""The native Zarr v3 codec per chunk, against zarr-python's own BytesCodec, side by side in one
run.

    python benchmarks/zarr_chunks.py            # one run
    python benchmarks/zarr_chunks.py --runs 3   # the spread of three runs

Lines (ours' median time over zarr's; below 1.0: ours is faster), interleaved
in a new order each round:
- a 4 KiB float64 chunk decoded plus the copy zarr's pipeline makes of it;
- a 16 MiB shard of 4096 inner chunks read whole, and 6 MiB of it, from a
  MemoryStore; where zarr has the FusedCodecPipeline (3.3+; in 3.4 it decodes
  a whole uncompressed shard in one pass), both again with it;
- 256 MiB of float64 in 1 MiB chunks read from a MemoryStore;
- one element of an uncompressed 64 MiB chunk, from a MemoryStore and from a local disk.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import zarr
from interleave import median_times, print_spread
from zarr.codecs import BytesCodec as ZarrBytesCodec
from zarr.codecs import ShardingCodec
from zarr.core import codec_pipeline
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.dtype import parse_dtype

from numcodecs_bytes.zarr3 import BytesCodec

MiB = 1 << 20


def _reads(made: dict[str, Any], selection: Any) -> dict[str, Callable[[], object]]:
    """Per contender, a call that reads ``selection`` of its array."""
    return {name: partial(array.__getitem__, selection) for name, array in made.items()}


def per_chunk() -> dict[str, float]:
    prototype = default_buffer_prototype()
    dtype = parse_dtype(np.dtype("<f8"), zarr_format=3)
    spec = ArraySpec(
        shape=(512,),
        dtype=dtype,
        fill_value=dtype.default_scalar(),
        config=ArrayConfig.from_dict({}),
        prototype=prototype,
    )
    data = np.arange(512, dtype="<f8")
    out = np.empty_like(data)
    ways: dict[str, Callable[[], object]] = {}
    for name, codec in (("ours", BytesCodec(endian="big")), ("zarr", ZarrBytesCodec(endian="big"))):
        evolved = codec.evolve_from_array_spec(spec)
        encoded = evolved._encode_sync(prototype.nd_buffer.from_ndarray_like(data), spec)  # type: ignore[arg-type]
        assert encoded is not None

        def decode(evolved: Any = evolved, encoded: Any = encoded) -> None:
            # and zarr's copy into its output
            out[...] = evolved._decode_sync(encoded, spec).as_ndarray_like()

        ways[name] = decode
    times = median_times(ways, 20_000)
    return {"4 KiB chunk decode + copy": times["ours"] / times["zarr"]}


def arrays(serializer: Any, shape: tuple[int, ...], chunks: tuple[int, ...], store: Any) -> Any:
    data = np.arange(int(np.prod(shape)), dtype="<f8").reshape(shape)
    array = zarr.create_array(
        store=store,
        shape=shape,
        chunks=chunks,
        dtype="<f8",
        serializer=serializer,
        compressors=None,
    )
    array[...] = data
    return array


def shard_reads(pipeline: str) -> dict[str, float]:
    """A 16 MiB shard of 4096 inner chunks read whole and in part, with ``pipeline``."""
    with zarr.config.set({"codec_pipeline.path": f"zarr.core.codec_pipeline.{pipeline}"}):
        shards = {
            name: arrays(
                ShardingCodec(chunk_shape=(512,), codecs=[codec]), (2 * MiB,), (2 * MiB,), {}
            )
            for name, codec in (
                ("ours", BytesCodec(endian="big")),
                ("zarr", ZarrBytesCodec(endian="big")),
            )
        }
        whole = median_times(_reads(shards, ...), 15)
        part = median_times(_reads(shards, slice(100_000, 900_000)), 15)
    return {
        f"16 MiB shard of 4096 inner chunks read whole, {pipeline}": whole["ours"] / whole["zarr"],
        f"6 MiB of it, {pipeline}": part["ours"] / part["zarr"],
    }


def whole_reads() -> dict[str, float]:
    lines = shard_reads("BatchedCodecPipeline")
    # zarr 3.3+; in 3.4 it decodes whole shards in bulk
    if hasattr(codec_pipeline, "FusedCodecPipeline"):
        lines |= shard_reads("FusedCodecPipeline")
    memory = {
        name: arrays(codec, (32 * MiB,), (MiB // 8,), zarr.storage.MemoryStore())
        for name, codec in (
            ("ours", BytesCodec(endian="big")),
            ("zarr", ZarrBytesCodec(endian="big")),
        )
    }
    times = median_times(_reads(memory, ...), 9)
    lines["256 MiB in 1 MiB chunks, MemoryStore read"] = times["ours"] / times["zarr"]
    return lines


def one_element() -> dict[str, float]:
    lines = {}
    with tempfile.TemporaryDirectory() as folder:
        for where in ("MemoryStore", "local disk"):
            made = {}
            for name, codec in (
                ("ours", BytesCodec(endian="big")),
                ("zarr", ZarrBytesCodec(endian="big")),
            ):
                store = (
                    zarr.storage.MemoryStore()
                    if where == "MemoryStore"
                    else f"{folder}/{name}.zarr"
                )
                made[name] = arrays(codec, (8 * MiB,), (8 * MiB,), store)
            times = median_times(_reads(made, 123_456), 41)
            lines[f"one element of a 64 MiB chunk, {where}"] = times["ours"] / times["zarr"]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    lines: dict[str, list[float]] = {}
    for run in range(args.runs):
        print(f"-- run {run + 1} of {args.runs}: ours' time over zarr's own codec")
        for part in (per_chunk, whole_reads, one_element):
            for name, ratio in part().items():
                print(f"{name:<68} {ratio:.2f}x", flush=True)
                lines.setdefault(name, []).append(ratio)
    print_spread(lines, 68, "x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
