"""``numcodecs-bytes to-v3`` on a local disk: against zarr-python's own converter, against its own
dry run, and with tens of megabytes of attributes against ``json.loads``.

    python benchmarks/to_v3.py           # 5,000 arrays, 20,000 for the disk, 45 MB attributes
    python benchmarks/to_v3.py --runs 3  # the spread of three runs

1. Each contender converts its own fresh copy of the same v2 store (a group of
   N arrays of ``>i4``, one stored chunk each, no filter: what zarr's
   ``migrate_v2_to_v3`` accepts), writing a ``zarr.json`` beside each node's v2
   metadata; ours also takes the store lock and, before writing, reads each
   array's chunk 0 and fill value as v2 and as v3 and compares them. Reported:
   each total time and ours over zarr's (below 1.0: ours is faster), ours on
   the same store whose arrays use this codec as a filter (``<i4`` + ``bytes``
   big), which zarr's converter refuses, and that again with ``verify=False``
   (``--no-sample-check``): the check's cost.
2. The disk: ``numcodecs-bytes to-v3`` as a process on a fresh copy of a store
   of ``--disk-arrays`` tiny arrays as xarray writes them (``.zarray``,
   ``.zattrs`` with ``_ARRAY_DIMENSIONS``, one chunk), against the same command
   with ``--dry-run``, which reads and checks the same and writes nothing:
   their ratio is what writing the ``zarr.json`` files whole and durable costs.
3. Attributes: a group whose ``.zattrs`` holds ``--attributes-mb`` megabytes,
   converted by ``numcodecs-bytes to-v3`` as a process, against a process that
   does ``json.loads`` of that file and ``json.dumps`` of the result (the least
   any converter must do with it); peak memory of both.

Copies are made before each timed command and not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zarr
from zarr.metadata.migrate_v3 import migrate_v2_to_v3

from numcodecs_bytes.to_v3 import convert_store

PLAIN = {
    "zarr_format": 2,
    "shape": [4],
    "chunks": [4],
    "dtype": ">i4",
    "compressor": None,
    "fill_value": 0,
    "order": "C",
    "filters": None,
}


def _v2_store(root: Path, arrays: int, zarray: dict[str, object], xarray: bool = False) -> Path:
    root.mkdir()
    (root / ".zgroup").write_text('{"zarr_format": 2}')
    text = json.dumps(zarray)
    for i in range(arrays):
        (root / f"a{i}").mkdir()
        (root / f"a{i}" / ".zarray").write_text(text)
        if xarray:
            (root / f"a{i}" / ".zattrs").write_text(
                json.dumps({"_ARRAY_DIMENSIONS": ["x"], "units": "K"})
            )
        # chunk 0: four big endian int32, distinct (a chunk of one value throughout vouches for no
        # other array)
        (root / f"a{i}" / "0").write_bytes(b"".join((i + k).to_bytes(4, "big") for k in range(4)))
    return root


def against_zarr(arrays: int) -> dict[str, float]:
    """Seconds per contender, each on a fresh copy of its store."""
    filtered = {**PLAIN, "dtype": "<i4", "filters": [{"id": "bytes", "endian": "big"}]}
    with tempfile.TemporaryDirectory() as folder:
        plain_store = _v2_store(Path(folder, "plain.zarr"), arrays, PLAIN)
        _v2_store(Path(folder, "filtered.zarr"), arrays, filtered)
        shutil.copytree(Path(folder, "filtered.zarr"), Path(folder, "filtered-unchecked.zarr"))
        shutil.copytree(plain_store, Path(folder, "plain-for-zarr.zarr"))
        times = {}
        start = time.perf_counter()
        migrate_v2_to_v3(input_store=zarr.storage.LocalStore(Path(folder, "plain-for-zarr.zarr")))
        times["zarr's migrate_v2_to_v3"] = time.perf_counter() - start
        for name, store, sample_check in (
            ("ours", "plain.zarr", True),
            ("ours, with the filter", "filtered.zarr", True),
            ("ours, with the filter, --no-sample-check", "filtered-unchecked.zarr", False),
        ):
            start = time.perf_counter()
            report = convert_store(Path(folder, store), sample_check=sample_check)
            times[name] = time.perf_counter() - start
            assert not report.failures and len(report.converted) == arrays + 1, report.failures
        assert all(
            Path(folder, "plain-for-zarr.zarr", f"a{i}", "zarr.json").exists()
            for i in range(arrays)
        )
    return times


def _process(*command: str) -> tuple[float, int]:
    """A command's wall seconds and peak memory (KiB), run as a process of its own."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return seconds, usage.ru_maxrss


def on_the_disk(arrays: int) -> dict[str, float]:
    """to-v3 and its dry run, each as a process on a fresh copy of a store of tiny xarray arrays."""
    filtered = {**PLAIN, "dtype": "<i4", "filters": [{"id": "bytes", "endian": "big"}]}
    times = {}
    with tempfile.TemporaryDirectory() as folder:
        source = _v2_store(Path(folder, "source.zarr"), arrays, filtered, xarray=True)
        for name, options in (("to-v3 --dry-run", ["--dry-run"]), ("to-v3", [])):
            copy = Path(folder, "copy.zarr")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(source, copy)
            # the copy's own writes are not the command's to flush
            subprocess.run(["sync"], check=True)
            times[name], _ = _process(
                sys.executable, "-m", "numcodecs_bytes", "to-v3", str(copy), *options
            )
        assert len(list(Path(folder, "copy.zarr").glob("*/zarr.json"))) == arrays
    return times


def with_large_attributes(megabytes: int) -> dict[str, float]:
    """to-v3 on a group with ``megabytes`` of attributes, against json.loads and json.dumps of
    them."""
    attributes = {
        f"k{i}": {"values": list(range(i % 50)), "name": "x" * (i % 30), "f": i * 0.5}
        for i in range(9999)
    }
    scale = max(1, round(megabytes * 1e6 / len(json.dumps(attributes))))
    attributes = {
        f"{key}-{copy}": value for copy in range(scale) for key, value in attributes.items()
    }
    times = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder, "big.zarr")
        root.mkdir()
        (root / ".zgroup").write_text('{"zarr_format": 2}')
        (root / ".zattrs").write_text(json.dumps(attributes))
        times["megabytes"] = (root / ".zattrs").stat().st_size / 1e6
        floor = f"import json; json.dumps(json.loads(open({str(root / '.zattrs')!r}).read()))"
        times["json.loads + json.dumps"], times["json peak MiB"] = _process(
            sys.executable, "-c", floor
        )
        times["to-v3"], times["to-v3 peak MiB"] = _process(
            sys.executable, "-m", "numcodecs_bytes", "to-v3", str(root)
        )
        assert json.loads((root / "zarr.json").read_text())["attributes"] == attributes
    times["json peak MiB"] /= 1024
    times["to-v3 peak MiB"] /= 1024
    return times


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} .. {max(values):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--arrays", type=int, default=5000, help="arrays of the store converted by both"
    )
    parser.add_argument(
        "--disk-arrays", type=int, default=20000, help="arrays of the store of the disk part"
    )
    parser.add_argument(
        "--attributes-mb", type=int, default=45, help="megabytes of attributes of one group"
    )
    args = parser.parse_args()
    from machine import compile_package

    compile_package()
    ratios, checks, disk, attributes = [], [], [], []
    for run in range(args.runs):
        times = against_zarr(args.arrays)
        ratio = times["ours"] / times["zarr's migrate_v2_to_v3"]
        ratios.append(ratio)
        checks.append(
            times["ours, with the filter"] / times["ours, with the filter, --no-sample-check"]
        )
        print(
            f"-- run {run + 1} of {args.runs}, {args.arrays} arrays: "
            + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in times.items())
            + f"; ours/zarr {ratio:.2f}; checked/unchecked {checks[-1]:.2f}",
            flush=True,
        )
        local = on_the_disk(args.disk_arrays)
        disk.append(local["to-v3"] / local["to-v3 --dry-run"])
        print(
            f"   the disk, {args.disk_arrays} arrays: "
            + ", ".join(f"{n} {s:.2f} s" for n, s in local.items())
            + f"; run/dry run {disk[-1]:.2f}",
            flush=True,
        )
        big = with_large_attributes(args.attributes_mb)
        attributes.append(big["to-v3"] / big["json.loads + json.dumps"])
        print(
            f"   {big['megabytes']:.0f} MB of attributes: to-v3 {big['to-v3']:.2f} s "
            f"({big['to-v3 peak MiB']:.0f} MiB), json.loads + json.dumps "
            f"{big['json.loads + json.dumps']:.2f} s ({big['json peak MiB']:.0f} MiB); to-v3/json "
            f"{attributes[-1]:.2f}",
            flush=True,
        )
    print(f"ours/zarr over the runs: {_spread(ratios)}")
    print(f"the check's cost (with the filter, checked/unchecked) over the runs: {_spread(checks)}")
    print(f"the disk: to-v3 over its dry run, {args.disk_arrays} arrays: {_spread(disk)}")
    print(
        f"{args.attributes_mb} MB of attributes: to-v3 over json.loads + json.dumps: "
        f"{_spread(attributes)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
