"""``to-v3`` on Azure Blob Storage (Azurite, behind a proxy adding a round trip) against the floor
of the same client, and the peak memory of packing by shard size.

    AZURITE_BLOB=.../azurite-blob python benchmarks/azure_store.py        # 256 MiB raw, 3 rounds
    AZURITE_BLOB=.../azurite-blob python benchmarks/azure_store.py --mib 1024 --rounds 1

The data: `shard.py`'s float32 v2 array (Blosc zstd, about 3x smaller stored),
with chunks of 1 MiB raw (about 0.33 MiB stored) or of 32 MiB raw (about 10
MiB stored; ``--chunks 8``). Each contender is a process of its own, on a
fresh container holding the v2 array, through the proxy:

- ``to-v3 --shard-size 64MiB``: metadata converted and checked, every chunk
  object packed into shards through the client, each shard read back.
- ``to-v3``, metadata only: the fixed cost (interpreter, imports, listing, checks).
- the floor: a process that lists the chunk objects and copies each through
  obstore (one GET and one PUT of each, ``JOBS`` in flight): each byte read
  and written once, the same client.

Reported: each contender's median seconds (min .. max over the rounds, in a
new order each round), its peak memory, and what packing adds to the
metadata-only run against the floor (the issue's goal: 1.25x of it or less).
Then the peak memory of ``to-v3 --shard-size S --remove-v2-metadata --jobs 64``
at shards of 64 MiB, 256 MiB and 1 GiB raw (up to the array's size): it must
not grow with the shard size (goal: under 300 MiB). Azurite runs on the same
cores as the client: its CPU is in every figure, the floor's too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from shard import S3_CHUNKS, SHARD_MIB, Bench, run_process, write_v2_array
from store_tools import _free_port, _wait_for, delaying_proxy

from numcodecs_bytes.store import JOBS
from numcodecs_bytes.to_v3.rules.sharding import shard_shape

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's one account and its well-known key."""

FLOOR = """
import asyncio, os, sys, obstore
from obstore.store import AzureStore
container, source, target, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = AzureStore(container)  # the account, key and endpoint from AZURE_STORAGE_* as ours
names = [e["path"] for page in obstore.list(store, source + "/") for e in page
         if e["path"].rsplit("/", 1)[-1][0].isdigit()]
async def main():
    limit = asyncio.Semaphore(jobs)
    async def copy(name):
        async with limit:
            data = await (await obstore.get_async(store, name)).bytes_async()
            await obstore.put_async(store, target + name[len(source):], data)
    await asyncio.gather(*(copy(name) for name in names))
asyncio.run(main())
# (obstore's runtime may abort the interpreter's teardown after asyncio.run closed its loop:
# SIGABRT, seen here once in a few runs; the copy is done by then)
os._exit(0)
"""


METADATA_FLOOR = """
import asyncio, os, sys, obstore
from obstore.store import AzureStore
container, prefix, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = AzureStore(container)
names = [e["path"] for page in obstore.list(store, prefix + "/") for e in page
         if e["path"].rsplit("/", 1)[-1].startswith(".z")]
async def main():
    limit = asyncio.Semaphore(jobs)
    async def read(name):
        async with limit:
            await (await obstore.get_async(store, name)).bytes_async()
    await asyncio.gather(*(read(name) for name in names))
asyncio.run(main())
os._exit(0)  # (see FLOOR)
"""


@contextmanager
def azurite() -> Iterator[str]:
    """Azurite's blob service on a loopback port, in memory: its endpoint."""
    command = os.environ.get("AZURITE_BLOB") or shutil.which("azurite-blob")
    if not command:
        raise SystemExit("Azurite is needed: npm install azurite@3, AZURITE_BLOB=its azurite-blob")
    port = _free_port()
    server = subprocess.Popen(
        [
            command,
            *("--inMemoryPersistence", "--blobHost", "127.0.0.1", "--blobPort", str(port)),
            *("--skipApiVersionCheck", "--silent"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )
    try:
        _wait_for(port, server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


class Server:
    """Azurite behind the delaying proxy, for the length of a ``with`` block: fresh containers
    holding a local store under ``v2/``, and contenders run as processes on them, each on its own
    container, with the bytes each passed through the proxy (``passed``)."""

    def __init__(self, rtt: float) -> None:
        self.rtt, self.through, self.passed = rtt, [0], {}  # type: ignore[var-annotated]
        self.requests: list[tuple[float, str, str]] = []
        self.asked: dict[str, int] = {}  # requests each contender made (its last run)
        self._blocks = contextlib.ExitStack()
        self._counter = iter(range(10**6))

    def __enter__(self) -> Server:
        from azure.storage.blob import BlobServiceClient

        self.direct = self._blocks.enter_context(azurite())
        port = int(self.direct.rsplit(":", 1)[1])
        proxied = self._blocks.enter_context(
            delaying_proxy(port, self.rtt, self.through, self.requests)
        )
        self.service = BlobServiceClient.from_connection_string(
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.direct}/{ACCOUNT};"
        )
        self.env = {
            **os.environ,
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURE_STORAGE_ENDPOINT": f"{proxied}/{ACCOUNT}",
            "AZURE_ALLOW_HTTP": "true",
        }
        self.env.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        return self

    def __exit__(self, *exc: object) -> None:
        self._blocks.close()

    def fresh_container(self, local: Path) -> str:
        import obstore
        from obstore.store import AzureStore

        name = f"bench{next(self._counter)}"
        self.service.create_container(name)
        store = AzureStore(
            name,
            account_name=ACCOUNT,
            account_key=KEY,
            endpoint=f"{self.direct}/{ACCOUNT}",
            client_options={"allow_http": True},
        )
        for path in sorted(local.rglob("*")):
            if path.is_file():
                obstore.put(store, f"v2/{path.relative_to(local).as_posix()}", path.read_bytes())
        return name

    def contender(
        self, label: str, local: Path, command: Callable[[str], list[str]]
    ) -> Callable[[int], tuple[float, float]]:
        def run(round_: int) -> tuple[float, float]:
            name = self.fresh_container(local)
            try:
                self.through[0] = 0
                self.requests.clear()
                measured = run_process(command(name), env=self.env)
                self.passed[label] = self.through[0]
                self.asked[label] = len(self.requests)
                return measured
            finally:
                self.service.delete_container(name)

        return run


def ours(*options: str) -> Callable[[str], list[str]]:
    """``to-v3`` with ``options`` on a container's ``v2`` store, as a user runs it."""
    return lambda name: [
        sys.executable,
        "-m",
        "numcodecs_bytes",
        "to-v3",
        f"az://{name}/v2",
        *options,
    ]


def measure_shards(folder: Path, mib: int, rounds: int, rtt: float, chunk_mib: int) -> None:
    chunk = S3_CHUNKS[chunk_mib]
    rows = max(chunk[0], mib * 2**20 // (32768 * 4) // chunk[0] * chunk[0])
    local = folder / f"azure-source-{chunk_mib}.zarr"
    shutil.rmtree(local, ignore_errors=True)
    stored = write_v2_array(local, rows, chunk)
    objects = sum(1 for p in local.rglob("*") if p.is_file())
    shard = ",".join(map(str, shard_shape([rows, 32768], chunk, 4, SHARD_MIB * 2**20)))
    with Server(rtt) as server:
        print(
            f"\nAzure (Azurite) behind a {rtt * 1000:.0f} ms round trip: {rows} x 32768 float32 "
            f"({rows * 32768 * 4 / 2**20:.0f} MiB raw, {stored / 1e6:.0f} MB stored), chunks "
            f"{','.join(map(str, chunk))} ({objects - 1} objects), shards {shard}",
            flush=True,
        )
        floor = "floor: chunk objects copied"
        sharding = f"to-v3 --shard-size {SHARD_MIB}MiB"
        commands = {
            sharding: ours("--shard-size", f"{SHARD_MIB}MiB"),
            "to-v3, metadata only": ours(),
            floor: lambda name: [sys.executable, "-c", FLOOR, name, "v2", "copy", str(JOBS)],
        }
        bench = Bench(rounds)
        bench.run({label: server.contender(label, local, c) for label, c in commands.items()})
        medians = bench.table(stored, floor)
        adds = medians[sharding] - medians["to-v3, metadata only"]
        print(
            f"what packing adds to the metadata-only run: {adds:.2f} s, "
            f"{adds / medians[floor]:.2f}x the floor (goal: 1.25x or less)"
        )
        print(f"\n{'contender':<36} {'MB through the client':>22} {'of the stored data':>19}")
        for label, nbytes in server.passed.items():
            print(f"{label:<36} {nbytes / 1e6:22.1f} {nbytes / stored:18.1%}")
        print(f"\n{'shard size':>10} {'seconds':>8} {'peak MiB':>9}   (--jobs 64)")
        for shard_mib in (64, 256, 1024):
            if shard_mib * 2**20 > rows * 32768 * 4 and shard_mib != 64:
                continue
            command = ours(
                "--shard-size", f"{shard_mib}MiB", "--remove-v2-metadata", "--jobs", "64"
            )
            seconds, peak = server.contender(f"{shard_mib} MiB shards", local, command)(0)
            print(f"{shard_mib:>6} MiB {seconds:8.2f} {peak:9.0f}", flush=True)


def measure_arrays(folder: Path, arrays: int, rounds: int, rtt: float) -> None:
    """``to-v3`` (metadata only, checked and not) on a group of ``arrays`` small v2 arrays, against
    one listing of the store plus one concurrent read of all its metadata objects."""
    import zarr

    local = folder / f"azure-arrays-{arrays}.zarr"
    shutil.rmtree(local, ignore_errors=True)
    group = zarr.open_group(str(local), mode="w", zarr_format=2)
    for i in range(arrays):
        group.create_array(f"a{i}", shape=(4,), chunks=(4,), dtype="<i4", compressors=None)[...] = i
    stored = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
    with Server(rtt) as server:
        print(
            f"\nAzure (Azurite) behind a {rtt * 1000:.0f} ms round trip: a v2 group of {arrays} "
            "arrays (one chunk each)",
            flush=True,
        )
        floor = "floor: a listing, the metadata read"
        commands = {
            "to-v3": ours(),
            "to-v3 --no-sample-check": ours("--no-sample-check"),
            floor: lambda name: [sys.executable, "-c", METADATA_FLOOR, name, "v2", str(JOBS)],
        }
        bench = Bench(rounds)
        bench.run({label: server.contender(label, local, c) for label, c in commands.items()})
        medians = bench.table(stored, floor)
        print(f"to-v3 against the floor: {medians['to-v3'] / medians[floor]:.2f}x (goal: 1.5x)")
        print(f"\n{'contender':<36} {'requests':>9}")
        for label, count in server.asked.items():
            print(f"{label:<36} {count:9,}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mib", type=int, default=256, help="raw data, in MiB")
    parser.add_argument("--chunks", type=int, nargs="+", choices=sorted(S3_CHUNKS), default=[1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rtt", type=float, default=0.02, help="round trip the proxy adds, in s")
    parser.add_argument(
        "--arrays", type=int, default=0, help="also to-v3 on a group of this many small arrays"
    )
    args = parser.parse_args(argv)
    from machine import compile_package, describe

    compile_package()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        if args.mib > 0:
            for chunk_mib in args.chunks:
                measure_shards(Path(folder), args.mib, args.rounds, args.rtt, chunk_mib)
        if args.arrays > 0:
            measure_arrays(Path(folder), args.arrays, args.rounds, args.rtt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
