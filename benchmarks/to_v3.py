"""``numcodecs-bytes to-v3`` against zarr-python's own converter, on stores of many small arrays.

    python benchmarks/to_v3.py              # one run, 5,000 arrays
    python benchmarks/to_v3.py --runs 3     # the spread of three runs

Each contender converts its own fresh copy of the same v2 store (a group of
N arrays of ``>i4``, one stored chunk each, no filter: what zarr's
``migrate_v2_to_v3`` accepts), writing a ``zarr.json`` beside each node's v2
metadata; ours also takes the store lock and, before writing, reads each
array's chunk 0 and fill value as v2 and as v3 and compares them. Reported:
each total time and ours over zarr's (below 1.0: ours is faster), ours on the
same store whose arrays use this codec as a filter (``<i4`` + ``bytes`` big),
which zarr's converter refuses, and that again with ``verify=False``
(``--no-verify``): the check's cost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import zarr
from zarr.metadata.migrate_v3 import migrate_v2_to_v3

from numcodecs_bytes.to_v3 import convert_store


def _v2_store(root: Path, arrays: int, zarray: dict[str, object]) -> Path:
    root.mkdir()
    (root / ".zgroup").write_text('{"zarr_format": 2}')
    text = json.dumps(zarray)
    for i in range(arrays):
        (root / f"a{i}").mkdir()
        (root / f"a{i}" / ".zarray").write_text(text)
        (root / f"a{i}" / "0").write_bytes(i.to_bytes(4, "big") * 4)  # chunk 0: four big endian int32
    return root


def one_run(arrays: int) -> dict[str, float]:
    """Seconds per contender, each on a fresh copy of its store."""
    plain = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": ">i4", "compressor": None,
             "fill_value": 0, "order": "C", "filters": None}  # fmt: skip
    filtered = {**plain, "dtype": "<i4", "filters": [{"id": "bytes", "endian": "big"}]}
    with tempfile.TemporaryDirectory() as folder:
        plain_store = _v2_store(Path(folder, "plain.zarr"), arrays, plain)
        _v2_store(Path(folder, "filtered.zarr"), arrays, filtered)
        shutil.copytree(Path(folder, "filtered.zarr"), Path(folder, "filtered-unchecked.zarr"))
        shutil.copytree(plain_store, Path(folder, "plain-for-zarr.zarr"))
        times = {}
        start = time.perf_counter()
        migrate_v2_to_v3(input_store=zarr.storage.LocalStore(Path(folder, "plain-for-zarr.zarr")))
        times["zarr's migrate_v2_to_v3"] = time.perf_counter() - start
        for name, store, verify in (
            ("ours", "plain.zarr", True),
            ("ours, with the filter", "filtered.zarr", True),
            ("ours, with the filter, --no-verify", "filtered-unchecked.zarr", False),
        ):
            start = time.perf_counter()
            report = convert_store(Path(folder, store), verify=verify)
            times[name] = time.perf_counter() - start
            assert not report.failures and len(report.converted) == arrays + 1, report.failures
        assert all(Path(folder, "plain-for-zarr.zarr", f"a{i}", "zarr.json").exists() for i in range(arrays))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--arrays", type=int, default=5000)
    args = parser.parse_args()
    ratios, checks = [], []
    for run in range(args.runs):
        times = one_run(args.arrays)
        ratio = times["ours"] / times["zarr's migrate_v2_to_v3"]
        ratios.append(ratio)
        checks.append(times["ours, with the filter"] / times["ours, with the filter, --no-verify"])
        print(f"-- run {run + 1} of {args.runs}, {args.arrays} arrays: "
              + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in times.items())
              + f"; ours/zarr {ratio:.2f}; checked/unchecked {checks[-1]:.2f}", flush=True)  # fmt: skip
    print(f"ours/zarr over the runs: {min(ratios):.2f} .. {max(ratios):.2f}")
    print(
        f"the check's cost (with the filter, checked/unchecked) over the runs: {min(checks):.2f} .. {max(checks):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
