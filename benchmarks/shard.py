"""``to-v3 --shard-size`` against the tools that decode and re-encode to shard, and against a plain
copy.

    python benchmarks/shard.py                # 1 GiB on the local disk, 64 MiB on S3, 3 rounds
    python benchmarks/shard.py --gib 0.25 --s3-mib 16 --rounds 1
    python benchmarks/shard.py --gib 0 --s3-mib 256 --profile   # where one run's time goes on S3

The data: a float32 v2 array (8192 x 32768 per GiB, chunks 256 x 1024: 1 MiB
raw each), a smooth field plus noise, bit-rounded to 16 mantissa bits as
climate data is (numcodecs' ``BitRound``), in Blosc zstd with byte shuffle:
about 3x smaller stored. Each contender is a process of its own, on a fresh
copy of the v2 store where it writes into it (copied, and flushed, untimed),
its time including what makes its files durable (ours flushes its own writes;
the others end with ``sync``). The shards: 64 MiB of raw data (64 chunks).

- ``to-v3 --shard-size``: metadata converted and checked, every chunk file
  packed into shards, byte for byte, each shard read back and compared, one
  chunk per array read through zarr's sharding codec, ``zarr.json`` switched.
- ``to-v3``, metadata only: the fixed cost (interpreter, imports, checks).
- ``cp -r`` then ``sync``: the floor, the same stored bytes read and written once.
- tensorstore: the v2 array copied into a ``zarr3`` array with the same shard
  layout and codecs (its ``write`` of the source), every chunk decoded and encoded.
- ``zarr.from_array`` with the same shards and codecs (and again with the zarrs
  codec pipeline where it is installed).

Then, locally, the peak memory of ``to-v3 --shard-size --remove-v2-metadata``
on the same data with shards of 16 MiB, 256 MiB and 1 GiB: it must not grow
with the shard size. And resharding: the sharded store (64 MiB shards) put in
shards of 256 MiB by ``reshard`` (each inner chunk's bytes moved), against
tensorstore's copy into the same shards and ``cp -r`` of the sharded store.

On S3 (moto's server behind a proxy adding a 20 ms round trip), once with
chunks of 1 MiB raw and once with chunks of 32 MiB raw (about 10 MiB stored:
shards S3 assembles itself from the chunk objects; ``--s3-chunks``), the same
contenders but ``cp``, and ours also with ``--no-server-copy``: the floor is
a process that lists the chunk objects and copies them through obstore (the
fastest client here: the network's floor, not a client's), each object read
then written, as many requests in flight as ours (``JOBS``), each byte read
and written once.
Reported: each contender's median seconds over the rounds (interleaved, in a
new order each round), min .. max, stored MB/s, its peak memory (maximum
resident set), the bytes it passed through the proxy both ways (what went
through the client), and ratios: locally the whole run against the faster
re-encoder (goal: 5x faster or more), what sharding adds to the
metadata-only run against the copy floor (goal: 1.25x of it or less); on S3
the whole run against tensorstore's (goal: faster), what packing adds
against the floor (goal 1.25x or less; with large chunks under 1x), and the
bytes through the client (goal with large chunks: under 1% of the data).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from numcodecs_bytes.to_v3.rules.sharding import shard_shape

CHUNK = (256, 1024)
CHUNK_TEXT = ",".join(map(str, CHUNK))
S3_CHUNKS = {1: CHUNK, 8: (2048, 4096)}
"""The chunks on S3 by their size stored (MiB, about): 1 MiB raw (Blosc makes them about a third),
or 32 MiB raw (about 10 MiB stored: shards S3 assembles itself)."""
SHARD_MIB = 64
TS_CODECS = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4},
    },
]

# One contender's work, run as ``python shard.py --contender NAME SOURCE TARGET ROWS`` in a process
# of its own.
TENSORSTORE = """
import os, sys, tensorstore as ts
source, target, shard, endpoint, chunk = sys.argv[1:6]
shard = [int(n) for n in shard.split(",")]
def kvstore(path):
    if not path.startswith("s3://"):
        return {"driver": "file", "path": path}
    bucket, _, prefix = path[5:].partition("/")
    return {
        "driver": "s3", "bucket": bucket, "path": prefix + "/", "endpoint": endpoint,
        "aws_region": "us-east-1", "aws_credentials": {"type": "environment"},
    }
driver = "zarr3" if len(sys.argv) > 6 and sys.argv[6] == "v3" else "zarr"
src = ts.open({"driver": driver, "kvstore": kvstore(source)}, read=True).result()
codecs = CODECS
index_codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
layout = {
    "name": "sharding_indexed",
    "configuration": {
        "chunk_shape": [int(n) for n in chunk.split(",")], "codecs": codecs,
        "index_codecs": index_codecs,
    },
}
dst = ts.open({"driver": "zarr3", "kvstore": kvstore(target), "create": True, "metadata": {
    "shape": list(src.shape), "data_type": "float32", "codecs": [layout],
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shard}}}}).result()
dst.write(src).result()
os.sync()
""".replace("CODECS", repr(TS_CODECS))

FROM_ARRAY = """
import os, sys, zarr
from zarr.codecs import BloscCodec
source, target, shard, endpoint, pipeline, chunk = sys.argv[1:7]
options = {"storage_options": {"endpoint_url": endpoint}} if source.startswith("s3://") else {}
if pipeline == "zarrs":
    zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
src = zarr.open_array(source, mode="r", zarr_format=2, **options)
zarr.from_array(
    target, data=src, chunks=tuple(int(n) for n in chunk.split(",")),
    shards=tuple(int(n) for n in shard.split(",")),
    zarr_format=3, compressors=BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"), filters=None,
    **options,
)
os.sync()
"""

S3_FLOOR = """
import asyncio, os, sys
import obstore
from obstore.store import S3Store

source, target, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
bucket, _, prefix = source.removeprefix("s3://").partition("/")
into = target.removeprefix("s3://").partition("/")[2]
endpoint = os.environ["FSSPEC_S3_ENDPOINT_URL"]
store = S3Store(bucket, config={"endpoint": endpoint}, client_options={"allow_http": True})


async def main():
    names = [
        entry["path"]
        async for page in obstore.list(store, prefix)
        for entry in page
        if entry["path"].rsplit("/", 1)[-1][0].isdigit()
    ]
    slots = asyncio.Semaphore(jobs)

    async def copy(path):
        async with slots:
            data = await (await obstore.get_async(store, path)).bytes_async()
            await obstore.put_async(store, into + path[len(prefix):], data)

    await asyncio.gather(*(copy(path) for path in names))


asyncio.run(main())
os._exit(0)  # obstore 0.12's runtime may abort the interpreter's teardown (see cli.console)
"""


def write_v2_array(root: Path, rows: int, chunk: tuple[int, int] = CHUNK) -> int:
    """The v2 array, a band of chunk rows at a time (bounded memory); its stored bytes."""
    import numcodecs
    import zarr

    array = zarr.create_array(
        str(root),
        shape=(rows, 32768),
        chunks=chunk,
        dtype="<f4",
        zarr_format=2,
        compressors=numcodecs.Blosc("zstd", 3, numcodecs.Blosc.SHUFFLE),
    )
    rng, bitround = np.random.default_rng(0), numcodecs.BitRound(16)
    x = np.linspace(0, 100, 32768, dtype="f4")[None, :]
    band = chunk[0]
    for start in range(0, rows, band):
        y = np.linspace(start / 300, (start + band) / 300, band, dtype="f4")[:, None]
        field = np.sin(y) * np.cos(x) * 10 + 280 + rng.normal(0, 0.2, (band, 32768)).astype("f4")
        array[start : start + band] = bitround.encode(field).view("f4")
    return sum(p.stat().st_size for p in root.iterdir() if p.name[0].isdigit())


PEAK = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and says its wall seconds and peak memory (KiB): from a small process, since a
child's peak memory counts the memory of the process it was forked from (Linux keeps it across
exec)."""


def run_process(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """A command's wall seconds and peak memory (MiB), run as a process of its own."""
    result = subprocess.run(
        [sys.executable, "-c", PEAK, *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"{command[:4]} failed ({result.returncode}): {result.stderr[-2000:]}")
    seconds, peak = result.stderr.splitlines()[-1].split()
    return float(seconds), int(peak) / 1024


def equal_samples(source: str, target: str, endpoint: str | None) -> None:
    """Four regions of the v3 target equal the v2 source's (zarr-python's reading of both)."""
    import zarr

    options: dict[str, Any] = {"storage_options": {"endpoint_url": endpoint}} if endpoint else {}
    src = zarr.open_array(source, mode="r", zarr_format=2, **options)
    dst = zarr.open_array(target, mode="r", zarr_format=3, **options)
    rows, columns = src.shape
    for row, column in (
        (0, 0),
        (rows - 300, columns - 2000),
        (rows // 2, 777),
        (123, columns // 3),
    ):
        region = (slice(row, row + 300), slice(column, column + 2000))
        if not np.array_equal(src[region], dst[region]):
            raise AssertionError(f"{target}: {region} differs from the source")


class Bench:
    """Contenders timed in rounds, interleaved, each on its own fresh target."""

    def __init__(self, rounds: int) -> None:
        self.rounds, self.times, self.memory = rounds, {}, {}  # type: ignore[var-annotated]

    def run(self, contenders: dict[str, Callable[[int], tuple[float, float]]]) -> None:
        names, order = list(contenders), random.Random(0)
        for round_ in range(self.rounds):
            order.shuffle(names)
            for name in names:
                seconds, peak = contenders[name](round_)
                self.times.setdefault(name, []).append(seconds)
                self.memory[name] = max(self.memory.get(name, 0.0), peak)
            print(
                f"-- round {round_ + 1} of {self.rounds}: "
                + ", ".join(f"{n} {self.times[n][-1]:.2f} s" for n in names),
                flush=True,
            )

    def table(self, stored: int, floor: str) -> dict[str, float]:
        medians = {name: statistics.median(values) for name, values in self.times.items()}
        print(
            f"\n{'contender':<36} {'median s':>9} {'min .. max':>15} {'MB/s':>7} {'peak MiB':>9} "
            f"{'x floor':>8}"
        )
        for name, values in self.times.items():
            print(
                f"{name:<36} {medians[name]:9.2f} {min(values):6.2f} .. {max(values):5.2f} "
                f"{stored / 1e6 / medians[name]:7.0f} {self.memory[name]:9.0f} "
                f"{medians[name] / medians[floor]:8.2f}"
            )
        return medians


def goals(medians: dict[str, float], floor: str) -> None:
    encoders = [name for name in medians if name.startswith(("tensorstore", "zarr.from_array"))]
    fastest = min(encoders, key=medians.__getitem__)
    added = medians["to-v3 --shard-size"] - medians["to-v3, metadata only"]
    print(
        f"\nthe whole run: {medians[fastest] / medians['to-v3 --shard-size']:.1f}x faster than "
        f"{fastest} (goal: 5x or more)"
    )
    print(
        f"what sharding adds to the metadata-only run: {added:.2f} s, "
        f"{added / medians[floor]:.2f}x the floor ({floor}; goal: 1.25x or less)"
    )


def has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def local_disk(folder: Path, gib: float, rounds: int) -> None:
    rows = int(8192 * gib) // CHUNK[0] * CHUNK[0]
    source = folder / "v2.zarr"
    stored = write_v2_array(source, rows)
    # ours, by its rule
    shard = ",".join(map(str, shard_shape([rows, 32768], CHUNK, 4, SHARD_MIB * 2**20)))
    raw = rows * 32768 * 4
    print(
        f"{rows} x 32768 float32 ({raw / 2**30:.2f} GiB raw, {stored / 1e6:.0f} MB stored, "
        f"{raw / stored:.1f}x), {rows // CHUNK[0] * 32} chunk files; shards {shard}",
        flush=True,
    )
    target = folder / "target.zarr"
    checked: set[str] = set()

    def fresh_copy() -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        os.sync()

    def ours(options: list[str], name: str) -> Callable[[int], tuple[float, float]]:
        def run(round_: int) -> tuple[float, float]:
            fresh_copy()
            measured = run_process(
                [sys.executable, "-m", "numcodecs_bytes", "to-v3", str(target), *options]
            )
            if name not in checked:
                equal_samples(str(source), str(target), None)
                checked.add(name)
            return measured

        return run

    contenders = {
        "to-v3 --shard-size": ours(["--shard-size", f"{SHARD_MIB}MiB"], "ours"),
        "to-v3, metadata only": ours([], "metadata"),
        "cp -r, then sync": writer(
            ["sh", "-c", f"cp -r '{source}' 'TARGET' && sync"],
            "cp -r, then sync",
            target,
            source,
            checked,
        ),
    }
    if has("tensorstore"):
        contenders["tensorstore copy"] = writer(
            [sys.executable, "-c", TENSORSTORE, str(source), "TARGET", shard, "-", CHUNK_TEXT],
            "tensorstore",
            target,
            source,
            checked,
        )
    contenders["zarr.from_array"] = writer(
        [sys.executable, "-c", FROM_ARRAY, str(source), "TARGET", shard, "-", "zarr", CHUNK_TEXT],
        "zarr.from_array",
        target,
        source,
        checked,
    )
    if has("zarrs"):
        contenders["zarr.from_array, zarrs pipeline"] = writer(
            [
                sys.executable,
                "-c",
                FROM_ARRAY,
                str(source),
                "TARGET",
                shard,
                "-",
                "zarrs",
                CHUNK_TEXT,
            ],
            "zarrs",
            target,
            source,
            checked,
        )
    bench = Bench(rounds)
    bench.run(contenders)
    files_before = sum(1 for _ in source.iterdir())
    fresh_copy()
    shard_removing_v2(target)
    files_after = sum(1 for p in target.rglob("*") if p.is_file())
    print(f"\nfiles: {files_before:,} before (v2), {files_after:,} after --remove-v2-metadata")
    goals(bench.table(stored, "cp -r, then sync"), "cp -r, then sync")
    memory_by_shard_size(raw, fresh_copy, target)
    resharding(folder, rows, stored, fresh_copy, target, rounds)
    shutil.rmtree(target, ignore_errors=True)


def shard_removing_v2(target: Path) -> None:
    """``to-v3 --shard-size`` (this benchmark's size) with ``--remove-v2-metadata``, quietly."""
    command = ["to-v3", str(target), "--shard-size", f"{SHARD_MIB}MiB", "--remove-v2-metadata"]
    subprocess.run(
        [sys.executable, "-m", "numcodecs_bytes", *command], check=True, stdout=subprocess.DEVNULL
    )


def resharding(
    folder: Path, rows: int, stored: int, fresh_copy: Callable[[], None], target: Path, rounds: int
) -> None:
    """The sharded store (64 MiB shards, v2 files removed) put in shards four times as large:
    ``reshard`` (each inner chunk's bytes moved), against tensorstore copying the array into the new
    shards (every chunk decoded and encoded), and ``cp -r`` of the sharded store, then ``sync`` (the
    floor)."""
    sharded = folder / "sharded.zarr"
    fresh_copy()
    shard_removing_v2(target)
    shutil.rmtree(sharded, ignore_errors=True)
    shutil.move(str(target), sharded)
    shard = ",".join(map(str, shard_shape([rows, 32768], CHUNK, 4, 4 * SHARD_MIB * 2**20)))
    print(
        f"\nresharding: shards of {SHARD_MIB} MiB into shards of {4 * SHARD_MIB} MiB ({shard})",
        flush=True,
    )
    checked: set[str] = set()

    def copy_sharded() -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(sharded, target)
        os.sync()

    def ours(round_: int) -> tuple[float, float]:
        copy_sharded()
        measured = run_process(
            [
                sys.executable,
                "-m",
                "numcodecs_bytes",
                "reshard",
                str(target),
                "--shard-size",
                f"{4 * SHARD_MIB}MiB",
            ]
        )
        if "ours" not in checked:
            equal_samples(str(folder / "v2.zarr"), str(target), None)
            checked.add("ours")
        return measured

    contenders = {
        "reshard": ours,
        "cp -r, then sync": writer(
            ["sh", "-c", f"cp -r '{sharded}' 'TARGET' && sync"],
            "cp -r, then sync",
            target,
            sharded,
            checked,
        ),
    }
    if has("tensorstore"):
        contenders["tensorstore copy"] = writer(
            [
                sys.executable,
                "-c",
                TENSORSTORE,
                str(sharded),
                "TARGET",
                shard,
                "-",
                CHUNK_TEXT,
                "v3",
            ],
            "tensorstore",
            target,
            folder / "v2.zarr",
            checked,
        )
    bench = Bench(rounds)
    bench.run(contenders)
    medians = bench.table(stored, "cp -r, then sync")
    if "tensorstore copy" in medians:
        print(
            f"\nresharding: {medians['tensorstore copy'] / medians['reshard']:.1f}x faster than "
            "tensorstore copy (goal: 5x or more); "
            f"{medians['reshard'] / medians['cp -r, then sync']:.2f}x the floor"
        )
    shutil.rmtree(sharded, ignore_errors=True)


def writer(
    command: list[str], name: str, target: Path, source: Path, checked: set[str]
) -> Callable[[int], tuple[float, float]]:
    """A contender that writes ``target`` anew (``TARGET`` in its command): its time and peak
    memory; the first time, four regions of what it wrote compared with the v2 ``source`` (not for
    the copy floor)."""

    def run(round_: int) -> tuple[float, float]:
        shutil.rmtree(target, ignore_errors=True)
        os.sync()
        measured = run_process([part.replace("TARGET", str(target)) for part in command])
        if name not in checked and name != "cp -r, then sync":
            equal_samples(str(source), str(target), None)
            checked.add(name)
        return measured

    return run


def memory_by_shard_size(raw: int, fresh_copy: Callable[[], None], target: Path) -> None:
    """Peak memory of ``to-v3 --shard-size --remove-v2-metadata`` on the same data at 16 MiB, 256
    MiB and 1 GiB shards (each shard size up to the array's size): memory must not grow with the
    shard size."""
    print(f"\n{'shard size':>10} {'shards':>7} {'seconds':>8} {'peak MiB':>9}")
    for mib in (16, 256, 1024):
        if mib * 2**20 > raw and mib != 16:
            continue
        fresh_copy()
        seconds, peak = run_process(
            [
                sys.executable,
                "-m",
                "numcodecs_bytes",
                "to-v3",
                str(target),
                "--shard-size",
                f"{mib}MiB",
                "--remove-v2-metadata",
            ]
        )
        shards = sum(1 for p in (target / "c").rglob("*") if p.is_file())
        print(f"{mib:>6} MiB {shards:>7} {seconds:8.2f} {peak:9.0f}", flush=True)


def object_store(
    folder: Path, mib: int, rounds: int, rtt: float, chunk_mib: int, profile: bool
) -> None:
    import s3fs
    from store_tools import delaying_proxy, moto_server

    from numcodecs_bytes.store import JOBS

    chunk = S3_CHUNKS[chunk_mib]
    chunk_text = ",".join(map(str, chunk))
    rows = max(chunk[0], mib * 2**20 // (32768 * 4) // chunk[0] * chunk[0])
    local = folder / f"s3-source-{chunk_mib}.zarr"
    shutil.rmtree(local, ignore_errors=True)
    stored = write_v2_array(local, rows, chunk)
    chunk_files = [p.stat().st_size for p in local.iterdir() if p.name[0].isdigit()]
    # ours, by its rule
    shard = ",".join(map(str, shard_shape([rows, 32768], chunk, 4, SHARD_MIB * 2**20)))
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    os.environ.update(
        {
            key: env[key]
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
        }
    )
    print(
        f"\nS3 (moto) behind a {rtt * 1000:.0f} ms round trip: {rows} x 32768 float32 "
        f"({rows * 32768 * 4 / 2**20:.0f} MiB raw, {stored / 1e6:.0f} MB stored), chunks "
        f"{chunk_text} ({len(chunk_files)}, {min(chunk_files) / 2**20:.1f} .. "
        f"{max(chunk_files) / 2**20:.1f} MiB stored), shards {shard}",
        flush=True,
    )
    through = [0]
    requests: list[tuple[float, str, str]] = []
    with (
        moto_server() as direct,
        delaying_proxy(int(direct.rsplit(":", 1)[1]), rtt, through, requests) as proxied,
    ):
        fs = s3fs.S3FileSystem(endpoint_url=direct, skip_instance_cache=True)
        counter = iter(range(10**6))
        checked: set[str] = set()
        passed: dict[str, int] = {}

        def bucket_with_source() -> str:
            bucket = f"shard-bench-{next(counter)}"
            fs.mkdir(bucket)
            fs.put(str(local), f"{bucket}/v2", recursive=True)
            return bucket

        def contender(
            name: str, command: Callable[[str], list[str]], in_place: bool
        ) -> Callable[[int], Any]:
            def run(round_: int) -> tuple[float, float]:
                # a bucket a run: moto lists by scanning every key of a bucket
                bucket = bucket_with_source()
                target = f"s3://{bucket}/{'v2' if in_place else 'v3'}"
                through[0] = 0
                measured = run_process(
                    command(bucket), env={**env, "FSSPEC_S3_ENDPOINT_URL": proxied}
                )
                passed[name] = through[0]
                if name not in checked and "floor" not in name:
                    equal_samples(f"s3://{bucket}/v2", target, direct)
                    checked.add(name)
                fs.rm(bucket, recursive=True)
                return measured

            return run

        def ours(*options: str) -> Callable[[str], list[str]]:
            return lambda bucket: [
                sys.executable,
                "-m",
                "numcodecs_bytes",
                "to-v3",
                f"s3://{bucket}/v2",
                *options,
            ]

        sharding = ("--shard-size", f"{SHARD_MIB}MiB")
        if profile:
            bucket = bucket_with_source()
            requests.clear()
            started = time.monotonic()
            run_process(ours(*sharding)(bucket), env={**env, "FSSPEC_S3_ENDPOINT_URL": proxied})
            print_phases(started, time.monotonic(), requests)
            return
        contenders = {
            "to-v3 --shard-size": contender("to-v3 --shard-size", ours(*sharding), True),
            "to-v3 --shard-size --no-server-copy": contender(
                "to-v3 --shard-size --no-server-copy", ours(*sharding, "--no-server-copy"), True
            ),
            "to-v3, metadata only": contender("to-v3, metadata only", ours(), True),
            "floor: chunk objects copied": contender(
                "floor: chunk objects copied",
                lambda bucket: [
                    sys.executable,
                    "-c",
                    S3_FLOOR,
                    f"s3://{bucket}/v2",
                    f"s3://{bucket}/copy",
                    str(JOBS),
                ],
                True,
            ),
        }

        def rewrite(script: str, *extra: str) -> Callable[[str], list[str]]:
            return lambda bucket: [
                sys.executable,
                "-c",
                script,
                f"s3://{bucket}/v2",
                f"s3://{bucket}/v3",
                shard,
                proxied,
                *extra,
            ]

        if has("tensorstore"):
            contenders["tensorstore copy"] = contender(
                "tensorstore copy", rewrite(TENSORSTORE, chunk_text), False
            )
        contenders["zarr.from_array"] = contender(
            "zarr.from_array", rewrite(FROM_ARRAY, "zarr", chunk_text), False
        )
        bench = Bench(rounds)
        bench.run(contenders)
        floor = "floor: chunk objects copied"
        medians = bench.table(stored, floor)
        print(f"\n{'contender':<36} {'MB through the client':>22} {'of the stored data':>19}")
        for name, nbytes in passed.items():
            print(f"{name:<36} {nbytes / 1e6:22.1f} {nbytes / stored:18.1%}")
        s3_goals(medians, passed, stored, floor)


def print_phases(started: float, ended: float, requests: list[tuple[float, str, str]]) -> None:
    """Where one ``to-v3 --shard-size`` run on S3 spent its time, told by the requests it made (as
    the proxy saw them arrive): the phases between its first lock write, first ``zarr.json``, first
    chunk read for a shard, last shard write, and last ``zarr.json``."""

    def shard_write(method: str, target: str) -> bool:
        path = target.split("?")[0]
        return ("/c/" in path or "/c." in path) and (
            method == "POST" or (method == "PUT" and "?" not in target)
        )

    def packing(method: str, target: str) -> bool:
        """A chunk object read for a shard, or a shard's upload begun."""
        name = target.split("?")[0].rsplit("/", 1)[-1]
        chunk_read = method == "GET" and name.replace(".", "").isdigit()
        return chunk_read or shard_write(method, target)

    documents = [t for t, m, target in requests if m == "PUT" and target.endswith("/zarr.json")]
    marks = [
        next(t for t, m, target in requests if m == "PUT" and target.endswith("-lock")),
        documents[0],
        next(t for t, m, target in requests if t > documents[0] and packing(m, target)),
        max(t for t, m, target in requests if shard_write(m, target)),
        documents[-1],
    ]
    names = [
        "start: interpreter, imports, S3 client, the store's probe",
        "lock taken, walk, metadata read, the check of one chunk",
        "the sharding pass's plan: documents read again, listings",
        "packing (the first chunk read to the last shard written)",
        "the check of the shards: one chunk through zarr, versions",
        "switch, lock released, exit",
    ]
    bounds = [started, *marks, ended]
    print(f"\n{'phase':<58} {'seconds':>8} {'requests':>9}")
    for name, (start, end) in zip(names, pairwise(bounds), strict=True):
        count = sum(1 for t, _, _ in requests if start <= t < end)
        print(f"{name:<58} {end - start:8.2f} {count:9}")
    print(f"{'the whole run':<58} {ended - started:8.2f} {len(requests):9}")


def s3_goals(medians: dict[str, float], passed: dict[str, int], stored: int, floor: str) -> None:
    """The S3 goals of issue 59, each said held or not."""
    ours, metadata = medians["to-v3 --shard-size"], medians["to-v3, metadata only"]
    if "tensorstore copy" in medians:
        ratio = medians["tensorstore copy"] / ours
        print(f"\nthe whole run: {ratio:.2f}x faster than tensorstore copy (goal: above 1)")
    for name in ("to-v3 --shard-size", "to-v3 --shard-size --no-server-copy"):
        added = medians[name] - metadata
        print(
            f"{name}: packing adds {added:.2f} s to the metadata-only run, "
            f"{added / medians[floor]:.2f}x the floor (goal: 1.25x or less; with large chunks, "
            "under 1x)"
        )
    share = passed["to-v3 --shard-size"] / stored
    print(
        f"bytes through the client: {share:.1%} of the stored data (goal, large chunks: under 1%)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gib", type=float, default=1.0, help="raw data on the local disk, in GiB")
    parser.add_argument(
        "--s3-mib", type=int, default=64, help="raw data on S3, in MiB (0: no S3 part)"
    )
    parser.add_argument(
        "--s3-chunks",
        type=int,
        nargs="+",
        choices=sorted(S3_CHUNKS),
        default=sorted(S3_CHUNKS),
        help="the chunks on S3 by their stored size, about, in MiB: 1, 8 (shards S3 assembles)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="on S3, one run of ours only, and where its time went, phase by phase",
    )
    parser.add_argument(
        "--rtt", type=float, default=0.02, help="round trip the proxy adds on S3, in seconds"
    )
    args = parser.parse_args(argv)
    from machine import compile_package, describe

    compile_package()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        if args.gib > 0:
            local_disk(Path(folder), args.gib, args.rounds)
        if args.s3_mib > 0:
            for chunk_mib in args.s3_chunks:
                object_store(
                    Path(folder), args.s3_mib, args.rounds, args.rtt, chunk_mib, args.profile
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
