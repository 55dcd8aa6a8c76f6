"""OME-Zarr 0.4 made 0.5 in shards: ``to-v3 --shard-size`` against the tools that re-encode, and a
plain copy.

    python benchmarks/ome.py                 # about 2 GiB raw (image and labels), 3 rounds
    python benchmarks/ome.py --gib 0.1 --rounds 1

The data: an OME-Zarr 0.4 image (t, c, z, y, x) = (1, 2, Z, 2048, 4096)
uint16, three levels halving y and x, chunks (1, 1, 8, 256, 256) (1 MiB raw),
a smooth field plus noise as a microscope gives, in Blosc zstd with bit
shuffle; its label image ``labels/cells`` (uint8, one channel, the same
levels). Z sets the size. Each contender is a process of its own, on a fresh
copy of the 0.4 store where it writes into it (copied and flushed, untimed),
its time including what makes its files durable (ours flushes its own writes;
the others end with ``sync``). Shards: 64 MiB of raw data, by this package's
rule, the same for every contender.

- ``to-v3 --shard-size``: the 0.5 metadata, every chunk file packed byte for
  byte, each shard read back and compared, one chunk per array read through
  zarr's sharding codec, ``zarr.json`` switched.
- ``to-v3``, metadata only: the fixed cost.
- ``cp -r`` then ``sync``: the floor, the stored bytes read and written once.
- tensorstore, as ome2024-ngff-challenge's ``resave`` does it: each level array
  read and written into a new ``zarr3`` array with the same shards, codecs and
  dimension names (every chunk decoded and encoded), each group's 0.5
  metadata written.
- ngff-zarr (where installed): ``from_ngff_zarr`` then
  ``to_ngff_zarr(version="0.5", chunks_per_shard=...)`` for the image and the
  label image, through dask.

Reported: each contender's median seconds over the rounds (interleaved, in a
new order each round), min .. max, its peak memory, the ratio to the floor, and
the whole run against the faster re-encoder (goal: 5x faster or more); then
the peak memory of ours on a quarter of the data and on all of it (goal: flat).
Every contender's result is compared with the source (four regions of each
level of the image and the labels, zarr-python reading both).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from shard import Bench, has, run_process

from numcodecs_bytes.to_v3.rules.ome import attributes_05
from numcodecs_bytes.to_v3.rules.sharding import shard_shape

CHUNK = (1, 1, 8, 256, 256)
SHARD_MIB = 64
LEVELS = 3
AXES = [
    {"name": "t", "type": "time"},
    {"name": "c", "type": "channel"},
    *({"name": name, "type": "space", "unit": "micrometer"} for name in "zyx"),
]
NAMES = [axis["name"] for axis in AXES]
ARRAYS = [f"{level}" for level in range(LEVELS)] + [f"labels/cells/{i}" for i in range(LEVELS)]

TENSORSTORE = """
import json, os, sys, tensorstore as ts
source, target, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for path, (shard, dtype) in plan["arrays"].items():
    src = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": f"{source}/{path}"}},
                  read=True).result()
    layout = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": plan["chunk"],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                    "shuffle": "bitshuffle", "typesize": src.dtype.numpy_dtype.itemsize}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}]}}
    dst = ts.open({"driver": "zarr3", "create": True,
                   "kvstore": {"driver": "file", "path": f"{target}/{path}"},
                   "metadata": {"shape": list(src.shape), "data_type": dtype, "codecs": [layout],
                                "dimension_names": plan["names"],
                                "chunk_grid": {"name": "regular",
                                               "configuration": {"chunk_shape": shard}}}}).result()
    dst.write(src).result()
for path, attributes in plan["groups"].items():
    os.makedirs(f"{target}/{path}", exist_ok=True)
    with open(f"{target}/{path}/zarr.json", "w") as file:
        json.dump({"zarr_format": 3, "node_type": "group", "attributes": attributes}, file)
os.sync()
"""

NGFF_ZARR = """
import json, os, sys, ngff_zarr
source, target, per_shard = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for path, chunks_per_shard in per_shard.items():
    multiscales = ngff_zarr.from_ngff_zarr(f"{source}/{path}".rstrip("/"))
    ngff_zarr.to_ngff_zarr(f"{target}/{path}".rstrip("/"), multiscales, version="0.5",
                           chunks_per_shard=chunks_per_shard)
with open(f"{target}/labels/zarr.json", "w") as file:
    json.dump({"zarr_format": 3, "node_type": "group",
               "attributes": {"ome": {"version": "0.5", "labels": ["cells"]}}}, file)
os.sync()
"""


def multiscale(name: str) -> dict[str, Any]:
    datasets = [
        {
            "path": str(level),
            "coordinateTransformations": [
                {"type": "scale", "scale": [1.0, 1.0, 1.0, 2.0**level, 2.0**level]}
            ],
        }
        for level in range(LEVELS)
    ]
    return {"version": "0.4", "name": name, "axes": AXES, "datasets": datasets}


def write_ome_04(root: Path, planes: int) -> int:
    """The 0.4 image and its labels, eight planes at a time (bounded memory); the stored bytes."""
    import numcodecs
    import zarr

    blosc = numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE)
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    labels = group.create_group("labels")
    cells = labels.create_group("cells")

    def new_level(where: Any, level: int, channels: int, dtype: str) -> Any:
        shape = (1, channels, planes, 2048 >> level, 4096 >> level)
        return where.create_array(
            str(level), shape=shape, chunks=CHUNK, dtype=dtype, compressors=blosc
        )

    images = [new_level(group, i, 2, "<u2") for i in range(LEVELS)]
    masks = [new_level(cells, i, 1, "u1") for i in range(LEVELS)]
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:2048, 0:4096].astype("f4")
    for start in range(0, planes, CHUNK[2]):
        stop = min(planes, start + CHUNK[2])
        z = np.arange(start, stop, dtype="f4")[:, None, None]
        field = 800 + 400 * np.sin(xx / 90 + z / 7) * np.cos(yy / 70)
        noise = rng.normal(0, 20, (2, stop - start, 2048, 4096)).astype("f4")
        image = field[None] * np.array([1.0, 0.6], "f4")[:, None, None, None] + noise
        image = image.clip(0, 65535).astype("<u2")[None]
        mask = ((field > 1000) * (1 + (xx // 512).astype("u1") % 5)).astype("u1")[None, None]
        for level in range(LEVELS):
            step = 2**level
            images[level][:, :, start:stop] = image[..., ::step, ::step]
            masks[level][:, :, start:stop] = mask[..., ::step, ::step]
    group.attrs["multiscales"] = [multiscale("sample")]
    group.attrs["omero"] = {"channels": [{"label": f"ch{c}", "color": "FFFFFF"} for c in range(2)]}
    labels.attrs["labels"] = ["cells"]
    cells.attrs["multiscales"] = [multiscale("cells")]
    cells.attrs["image-label"] = {
        "version": "0.4",
        "colors": [{"label-value": 1, "rgba": [255, 0, 0, 255]}],
    }
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name[0].isdigit())


def shards_of(source: Path) -> dict[str, list[int]]:
    """Each array's shard shape by this package's rule (64 MiB of raw data)."""
    shards = {}
    for path in ARRAYS:
        zarray = json.loads((source / path / ".zarray").read_text())
        itemsize = np.dtype(zarray["dtype"]).itemsize
        shape = shard_shape(zarray["shape"], zarray["chunks"], itemsize, SHARD_MIB * 2**20)
        shards[path] = list(shape)
    return shards


def levels_of(root: Path, group: str, zarr_format: int) -> list[str]:
    """The paths of an image's level arrays, as its metadata names them (each tool its own)."""
    if zarr_format == 2:
        attributes = json.loads((root / group / ".zattrs").read_text())
    else:
        attributes = json.loads((root / group / "zarr.json").read_text())["attributes"]["ome"]
    datasets = attributes["multiscales"][0]["datasets"]
    return [f"{group}/{dataset['path']}".lstrip("/") for dataset in datasets]


def equal_samples(source: Path, target: Path) -> None:
    """Three regions of each level of the 0.5 target's image and labels equal the 0.4 source's."""
    import zarr

    for group in ("", "labels/cells"):
        pairs = zip(levels_of(source, group, 2), levels_of(target, group, 3), strict=True)
        for before, after in pairs:
            src = zarr.open_array(str(source / before), mode="r", zarr_format=2)
            dst = zarr.open_array(str(target / after), mode="r", zarr_format=3)
            if dst.shape != src.shape or dst.dtype != src.dtype:
                raise AssertionError(f"{target}/{after}: {dst.shape} {dst.dtype}, not {src.shape}")
            _, channels, planes, rows, columns = src.shape
            corners = ((0, 0, 0), (planes - 1, rows - 50, columns - 70), (planes // 2, 99, 333))
            for plane, row, column in corners:
                region = (0, channels - 1, plane, slice(row, row + 50), slice(column, column + 70))
                if not np.array_equal(src[region], dst[region]):
                    raise AssertionError(f"{target}/{after}: {region} differs from the source")


def contenders(source: Path, target: Path, shards: dict[str, list[int]]) -> dict[str, Any]:
    checked: set[str] = set()

    def fresh_copy() -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        os.sync()

    def timed(name: str, command: list[str], copy: bool) -> Callable[[int], tuple[float, float]]:
        def run(round_: int) -> tuple[float, float]:
            if copy:
                fresh_copy()
            else:
                shutil.rmtree(target, ignore_errors=True)
                os.sync()
            measured = run_process(command)
            if name not in checked and name != "cp -r, then sync":
                equal_samples(source, target)
                checked.add(name)
            return measured

        return run

    ours = [sys.executable, "-m", "numcodecs_bytes", "to-v3", str(target)]
    found: dict[str, Any] = {
        "to-v3 --shard-size": timed("ours", [*ours, "--shard-size", f"{SHARD_MIB}MiB"], True),
        "to-v3, metadata only": timed("metadata", ours, True),
        "cp -r, then sync": timed(
            "cp -r, then sync", ["sh", "-c", f"cp -r '{source}' '{target}' && sync"], False
        ),
    }
    if has("tensorstore"):
        groups = {
            path: attributes_05(json.loads((source / path / ".zattrs").read_text()))
            for path in ("", "labels", "labels/cells")
        }
        dtypes = {path: "uint16" if path[0].isdigit() else "uint8" for path in ARRAYS}
        plan = {
            "arrays": {path: [shards[path], dtypes[path]] for path in ARRAYS},
            "chunk": list(CHUNK),
            "names": NAMES,
            "groups": groups,
        }
        command = [sys.executable, "-c", TENSORSTORE, str(source), str(target), json.dumps(plan)]
        found["tensorstore (resave)"] = timed("tensorstore", command, False)
    if has("ngff_zarr"):
        per_shard = {}
        for image in ("", "labels/cells"):
            shard = shards[f"{image}/0".lstrip("/")]
            per_shard[image] = {
                name: size // chunk for name, size, chunk in zip(NAMES, shard, CHUNK, strict=True)
            }
        command = [sys.executable, "-c", NGFF_ZARR, str(source), str(target), json.dumps(per_shard)]
        found["ngff-zarr to_ngff_zarr"] = timed("ngff-zarr", command, False)
    found["fresh copy"] = fresh_copy
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gib", type=float, default=2.0, help="raw data (image and labels), GiB")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from machine import compile_package, describe

    compile_package()
    print(describe(), flush=True)
    # a plane of both channels and its label plane, over the three levels
    plane = (2 * 2 + 1) * 2048 * 4096 * (1 + 1 / 4 + 1 / 16)
    planes = max(1, round(args.gib * 2**30 / plane))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        source, target = Path(folder, "v04.ome.zarr"), Path(folder, "target.ome.zarr")
        stored = write_ome_04(source, planes)
        shards = shards_of(source)
        raw = planes * plane
        files = sum(1 for p in source.rglob("*") if p.is_file())
        print(
            f"OME-Zarr 0.4: image (1, 2, {planes}, 2048, 4096) uint16 and labels, {LEVELS} levels: "
            f"{raw / 2**30:.2f} GiB raw, {stored / 1e6:.0f} MB stored, {files:,} files; shards of "
            f"level 0: image {shards['0']}, labels {shards['labels/cells/0']}",
            flush=True,
        )
        found = contenders(source, target, shards)
        fresh_copy = found.pop("fresh copy")
        bench = Bench(args.rounds)
        bench.run(found)
        medians = bench.table(stored, "cp -r, then sync")
        encoders = [name for name in medians if name.startswith(("tensorstore", "ngff"))]
        if encoders:
            fastest = min(encoders, key=medians.__getitem__)
            print(
                f"\nthe whole run: {medians[fastest] / medians['to-v3 --shard-size']:.1f}x faster "
                f"than {fastest} (goal: 5x or more)"
            )
        memory_by_size(source, target, planes, fresh_copy)
    return 0


def memory_by_size(source: Path, target: Path, planes: int, fresh_copy: Callable[[], None]) -> None:
    """Peak memory of ``to-v3 --shard-size --remove-v2-metadata`` on a quarter of the planes and on
    all of them: it must not grow with the image."""
    print(f"\n{'planes':>6} {'seconds':>8} {'peak MiB':>9}")
    for part in sorted({max(1, planes // 4), planes}):
        fresh_copy()
        if part < planes:  # the same store cut to fewer planes: its metadata says so
            for path in ARRAYS:
                zarray_path = target / path / ".zarray"
                zarray = json.loads(zarray_path.read_text())
                zarray["shape"][2] = part
                zarray_path.write_text(json.dumps(zarray))
                for chunk in (target / path).iterdir():
                    if chunk.name[0].isdigit() and int(chunk.name.split(".")[2]) * CHUNK[2] >= part:
                        chunk.unlink()
        command = ["to-v3", str(target), "--shard-size", f"{SHARD_MIB}MiB", "--remove-v2-metadata"]
        seconds, peak = run_process([sys.executable, "-m", "numcodecs_bytes", *command])
        print(f"{part:>6} {seconds:8.2f} {peak:9.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
