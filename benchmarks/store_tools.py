"""The store tools on an object store with a real round trip: S3 (moto's server) behind a delaying
proxy.

    python benchmarks/store_tools.py                       # 100 arrays, 20 ms round trip, one run
    python benchmarks/store_tools.py --arrays 100 --rtt 0.02 --runs 3
    python benchmarks/store_tools.py --arrays 3 --listing 10000 --runs 3   # and a folder's listing

moto's S3 API server runs on 127.0.0.1; a small asyncio TCP proxy in front of
it holds every piece of data it forwards for half the round-trip time in each
direction, so a request costs one round trip at least. Three v2 groups of N
arrays (``<i4``, one stored chunk each) are uploaded: with the bytes filter,
consolidated; the same with the legacy id ``endian``; and plain, without the
filter, unconsolidated (zarr-python's converter refuses ``.zmetadata``); and a
fourth of N arrays of 8 chunks each, consolidated. Each command runs as a user
runs it, in its own process, on its own copy of a store: ``to-v3`` (checked and
not) on the filter store and on the plain one, zarr-python's converter
(``migrate_v2_to_v3``) on the plain one, ``migrate`` (and its dry run) on the
legacy one, ``to-v3 --shard-size 32B`` (two chunks a shard: every array packed,
checked and switched) on the fourth. The floor is one listing of the store plus
one concurrent read of all its metadata objects through obstore (the fastest
client here), as many requests in flight as the tools make, in a process of
its own as well (the least any tool must read). Reported: seconds per
command, min .. max over the runs, and each over the floor.

Then a kill and a rerun: ``to-v3 --remove-v2-metadata`` is killed (SIGKILL)
halfway through its measured time and run again; every array must then read
through the v3 root, consolidated, the values written, with no v2 metadata left.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from numcodecs_bytes.store import JOBS


def upload(fs: Any, local: Path, bucket: str) -> str:
    """``local`` as the only store in a new bucket: moto lists a prefix by scanning every key of its
    bucket (S3 keeps an index), so stores sharing a bucket would slow each other's listings."""
    fs.mkdir(bucket)
    fs.put(str(local), f"{bucket}/store", recursive=True)
    return f"{bucket}/store"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline or (process is not None and process.poll() is not None):
                raise RuntimeError(f"nothing listens on port {port}") from None
            time.sleep(0.1)


# moto's S3 app alone, served as `python -m moto.server` serves all of moto's services: that server
# looks for each request's service among them all, under one lock, which cost 2 ms of its CPU per
# HEAD here (5.1 ms against 3.3 ms; benchmarks/README.md). Nobody reads its log of each request.
_MOTO_S3 = """
import logging
import sys

from moto.moto_server import werkzeug_app
from werkzeug.serving import run_simple

logging.getLogger("werkzeug").setLevel(logging.WARNING)

handler = getattr(werkzeug_app, "MotoRequestHandler", None)  # (moto 5.1+: S3 metadata keys kept)
app = werkzeug_app.create_backend_app("s3")
run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True, request_handler=handler)
"""


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 API server on a loopback port, for the length of the block: its endpoint."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _MOTO_S3, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port, server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


_REQUEST_LINE = re.compile(rb"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/1\.1\r\n")


@contextmanager
def delaying_proxy(
    target_port: int,
    rtt: float,
    through: list[int] | None = None,
    requests: list[tuple[float, str, str]] | None = None,
) -> Iterator[str]:
    """A TCP proxy on 127.0.0.1 that holds each piece of data rtt/2 in each direction (a round
    trip's latency; the pieces of a large body follow each other without a wait of their own).
    ``through[0]`` counts the bytes it passes, both ways: what went through the client;
    ``requests`` gets each request's arrival (``time.monotonic()``), method and target."""
    port = _free_port()
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool
    ) -> None:
        """Each piece passed on rtt/2 after it arrived: latency, not a bandwidth (pieces in flight
        overlap)."""
        pieces: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while (piece := await pieces.get())[1]:
                await asyncio.sleep(max(0.0, piece[0] + rtt / 2 - loop.time()))
                writer.write(piece[1])
                await writer.drain()

        delivering = asyncio.ensure_future(deliver())
        try:
            while data := await reader.read(65536):
                if through is not None:
                    through[0] += len(data)
                if upstream and requests is not None:
                    # a request starts a piece: the client sends one request at a time on a
                    # connection, after the answer to the one before
                    line = _REQUEST_LINE.match(data)
                    if line is not None:
                        method, target = line.group(1).decode(), line.group(2).decode()
                        requests.append((time.monotonic(), method, target))
                pieces.put_nowait((loop.time(), data))
            pieces.put_nowait((loop.time(), b""))
            await delivering
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            delivering.cancel()
            writer.close()

    async def handle(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(
            pipe(client_reader, server_writer, True), pipe(server_reader, client_writer, False)
        )

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        with suppress(asyncio.CancelledError):  # the end of the benchmark cancels it
            loop.run_until_complete(serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for task in asyncio.all_tasks(loop):
            loop.call_soon_threadsafe(task.cancel)


def write_v2_store(
    root: Path, arrays: int, filtered: bool = True, chunks: int = 1
) -> dict[str, np.ndarray[Any, Any]]:
    import zarr

    from numcodecs_bytes import BytesCodec

    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    written = {}
    for i in range(arrays):
        values = np.arange(4 * chunks, dtype="<i4") + i
        filters = [BytesCodec(endian="big", dtype="<i4")] if filtered else None
        group.create_array(f"a{i:05d}", data=values, chunks=(4,), compressors=None, filters=filters)
        written[f"a{i:05d}"] = values
    if filtered:
        zarr.consolidate_metadata(str(root))
    return written


def legacy_copy(source: Path, target: Path) -> None:
    """``source`` with the filter named by its legacy id, as the spec draft's writers wrote it."""
    shutil.copytree(source, target)
    for path in target.rglob("*"):
        if path.name in (".zarray", ".zmetadata"):
            path.write_text(path.read_text().replace('"id": "bytes"', '"id": "endian"'))


ZARR_CONVERTER = """
import sys, zarr
from zarr.metadata.migrate_v3 import migrate_v2_to_v3
migrate_v2_to_v3(input_store=zarr.storage.FsspecStore.from_url(sys.argv[1]))
"""


def command(args: list[str], endpoint: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    scripts = {"zarr": ZARR_CONVERTER, "floor": FLOOR}
    program = (
        ["-c", scripts[args[0]], *args[1:]]
        if args[0] in scripts
        else ["-m", "numcodecs_bytes", *args]
    )
    return subprocess.Popen(
        [sys.executable, *program],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def timed(args: list[str], endpoint: str) -> float:
    start = time.perf_counter()
    process = command(args, endpoint)
    out, err = process.communicate()
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{args} exited {process.returncode}: {err or out}")
    return seconds


FLOOR = """
import asyncio, os, sys
import obstore
from obstore.store import S3Store

bucket, _, prefix = sys.argv[1].removeprefix("s3://").partition("/")
jobs = int(sys.argv[2])
endpoint = os.environ["FSSPEC_S3_ENDPOINT_URL"]
store = S3Store(bucket, config={"endpoint": endpoint}, client_options={"allow_http": True})
metadata = (".zarray", ".zgroup", ".zattrs", ".zmetadata")


async def main():
    names = [
        entry["path"]
        async for page in obstore.list(store, prefix)
        for entry in page
        if entry["path"].rsplit("/", 1)[-1] in metadata
    ]
    slots = asyncio.Semaphore(jobs)

    async def read(path):
        async with slots:
            await (await obstore.get_async(store, path)).bytes_async()

    await asyncio.gather(*(read(path) for path in names))


asyncio.run(main())
os._exit(0)  # obstore 0.12's runtime may abort the interpreter's teardown (see cli.console)
"""


# (what is timed, the store it runs on, the command)
COMMANDS = (
    ("to-v3", "filter", ["to-v3"]),
    ("to-v3 --no-sample-check", "filter", ["to-v3", "--no-sample-check"]),
    ("to-v3, plain store", "plain", ["to-v3"]),
    ("zarr-python's converter, plain store", "plain", ["zarr"]),
    ("migrate", "legacy", ["migrate"]),
    ("migrate --dry-run", "legacy", ["migrate", "--dry-run"]),
    # each array's 8 chunks packed two to a shard, checked, switched
    ("to-v3 --shard-size, 8 chunks an array", "chunked", ["to-v3", "--shard-size", "32B"]),
)


def one_run(
    fs: Any, proxied: str, stores: dict[str, Path], run: int, skip_zarr: bool
) -> dict[str, float]:
    times: dict[str, float] = {}
    floor_store = upload(fs, stores["filter"], f"r{run}-floor")
    copies = [
        upload(fs, stores[store], f"r{run}-{number}")
        for number, (_, store, _) in enumerate(COMMANDS)
    ]
    fs.invalidate_cache()
    times["floor: list + concurrent cat"] = timed(
        ["floor", f"s3://{floor_store}", str(JOBS)], proxied
    )
    for number, (name, _, args) in enumerate(COMMANDS):
        if skip_zarr and args == ["zarr"]:
            continue
        url = f"s3://{copies[number]}"
        times[name] = timed([args[0], url, *args[1:]], proxied)
    return times


def kill_and_rerun(
    fs: Any, direct: str, proxied: str, local: Path, written: dict[str, Any], after: float
) -> str:
    """to-v3 --remove-v2-metadata killed after ``after`` seconds, run again, then every array read
    back."""
    import zarr

    store = upload(fs, local, "killed")
    url = f"s3://{store}"
    process = command(["to-v3", url, "--remove-v2-metadata"], proxied)
    time.sleep(after)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    fs.invalidate_cache()
    written_before_rerun = len([p for p in fs.find(store) if p.endswith("/zarr.json")])
    rerun = command(["to-v3", url, "--remove-v2-metadata"], proxied)
    out, err = rerun.communicate()
    if rerun.returncode != 0:
        raise RuntimeError(f"the rerun exited {rerun.returncode}: {err}")
    fs.invalidate_cache()
    left = [p for p in fs.find(store) if p.rsplit("/", 1)[-1].startswith(".z")]
    group: Any = zarr.open_consolidated(
        url,
        zarr_format=3,
        storage_options={"endpoint_url": direct, "key": "testing", "secret": "testing"},
    )
    wrong = [
        name for name, values in written.items() if not np.array_equal(group[name][...], values)
    ]
    if left or wrong or len(group.metadata.consolidated_metadata.metadata) != len(written):
        raise RuntimeError(f"after the rerun: v2 files left {left[:3]}, arrays wrong {wrong[:3]}")
    return (
        f"killed after {after:.1f} s with {written_before_rerun} zarr.json written; the rerun "
        f"exited 0 ({out.strip().splitlines()[-1]}); all {len(written)} arrays read right through "
        "the consolidated v3 root, no v2 metadata left"
    )


def listing(fs: Any, proxied: str, count: int, runs: int) -> None:
    """One array folder of ``count`` chunk objects: what a sharding run asks of it after packing
    (its files and the chunk objects' ETags: `Files.files_and_versions`), in this process through
    the proxy, against the floor of one listing of the folder, a page after another (``fs.find``,
    what `files_below` asks), each in turn, ``runs`` times."""
    from numcodecs_bytes.store import StoreOptions, open_store

    bucket = "listing"
    fs.mkdir(bucket)
    folder = f"{bucket}/store/a"
    paths = [f"{folder}/{i}.0" for i in range(count)]
    fs.pipe({f"{bucket}/store/.zgroup": b'{"zarr_format": 2}', **dict.fromkeys(paths, b"")})
    options = {"endpoint_url": proxied, "key": "testing", "secret": "testing"}
    store = open_store(f"s3://{bucket}/store", StoreOptions(storage_options=options))
    files, packing = store.files, store.packing
    ways: dict[str, Callable[[], Mapping[str, list[str] | Exception]]] = {
        "floor: the folder listed, a page after another": lambda: files.files_below([folder]),
        "files and versions, ranges at once": lambda: packing.files_and_versions([folder], paths)[
            0
        ],
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, way in ways.items():
            start = time.perf_counter()
            names = way()
            times[name].append(time.perf_counter() - start)
            found = names[folder]
            assert isinstance(found, list) and len(found) == count, f"{name}: {found!r:.200}"
    floor = times["floor: the folder listed, a page after another"]
    print(f"\none folder of {count:,} chunk objects, {runs} run(s), in turn:")
    for name, seconds in times.items():
        ratio = [s / f for s, f in zip(seconds, floor, strict=True)]
        print(
            f"  {name:<48} {min(seconds):6.2f} .. {max(seconds):6.2f} s   "
            f"floor x {min(ratio):5.2f} .. {max(ratio):5.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrays", type=int, default=100)
    parser.add_argument(
        "--rtt", type=float, default=0.02, help="round-trip time the proxy adds, in seconds"
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--zarr-runs", type=int, default=None, help="runs of zarr's converter (default: --runs)"
    )
    parser.add_argument(
        "--listing",
        type=int,
        default=0,
        metavar="N",
        help="then list one folder of N chunk objects as a sharding run does after packing",
    )
    args = parser.parse_args()
    import s3fs
    from machine import compile_package

    compile_package()

    with tempfile.TemporaryDirectory() as folder, moto_server() as direct:
        local = Path(folder, "store.zarr")
        written = write_v2_store(local, args.arrays)
        stores = {
            "filter": local,
            "legacy": Path(folder, "legacy.zarr"),
            "plain": Path(folder, "plain.zarr"),
        }
        legacy_copy(local, stores["legacy"])
        write_v2_store(stores["plain"], args.arrays, filtered=False)
        stores["chunked"] = Path(folder, "chunked.zarr")
        write_v2_store(stores["chunked"], args.arrays, chunks=8)
        fs = s3fs.S3FileSystem(
            endpoint_url=direct, key="testing", secret="testing", skip_instance_cache=True
        )
        port = int(direct.rsplit(":", 1)[1])
        with delaying_proxy(port, args.rtt) as proxied:
            results: dict[str, list[float]] = {}
            for run in range(args.runs):
                zarr_runs = args.runs if args.zarr_runs is None else args.zarr_runs
                times = one_run(fs, proxied, stores, run, skip_zarr=run >= zarr_runs)
                for name, seconds in times.items():
                    results.setdefault(name, []).append(seconds)
                print(
                    f"-- run {run + 1} of {args.runs}: "
                    + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()),
                    flush=True,
                )
            base = results["floor: list + concurrent cat"]
            print(
                f"\n{args.arrays} arrays, {args.rtt * 1000:.0f} ms round trip, {args.runs} run(s):"
            )
            for name, runs in results.items():
                ratio = [s / b for s, b in zip(runs, base, strict=False)]
                print(
                    f"  {name:<38} {min(runs):7.2f} .. {max(runs):7.2f} s   "
                    f"floor x {min(ratio):6.1f} .. {max(ratio):6.1f}"
                )
            half = min(results["to-v3"]) / 2
            print("\nkill and rerun: " + kill_and_rerun(fs, direct, proxied, local, written, half))
            if args.listing:
                listing(fs, proxied, args.listing, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
