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
from numcodecs_bytes.to_v3.sharding import shard_shape

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


def measure(folder: Path, mib: int, rounds: int, rtt: float, chunk_mib: int) -> None:
    import obstore
    from azure.storage.blob import BlobServiceClient
    from obstore.store import AzureStore

    chunk = S3_CHUNKS[chunk_mib]
    rows = max(chunk[0], mib * 2**20 // (32768 * 4) // chunk[0] * chunk[0])
    local = folder / f"azure-source-{chunk_mib}.zarr"
    shutil.rmtree(local, ignore_errors=True)
    stored = write_v2_array(local, rows, chunk)
    files = sorted(p for p in local.rglob("*") if p.is_file())
    shard = ",".join(map(str, shard_shape([rows, 32768], chunk, 4, SHARD_MIB * 2**20)))
    through = [0]
    passed: dict[str, int] = {}
    with (
        azurite() as direct,
        delaying_proxy(int(direct.rsplit(":", 1)[1]), rtt, through) as proxied,
    ):
        text = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={direct}/{ACCOUNT};"
        )
        service = BlobServiceClient.from_connection_string(text)
        env = {
            **os.environ,
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURE_STORAGE_ENDPOINT": f"{proxied}/{ACCOUNT}",
            "AZURE_ALLOW_HTTP": "true",
        }
        env.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        print(
            f"\nAzure (Azurite) behind a {rtt * 1000:.0f} ms round trip: {rows} x 32768 float32 "
            f"({rows * 32768 * 4 / 2**20:.0f} MiB raw, {stored / 1e6:.0f} MB stored), chunks "
            f"{','.join(map(str, chunk))} ({len(files) - 1} objects), shards {shard}",
            flush=True,
        )
        counter = iter(range(10**6))

        def fresh_container() -> str:
            name = f"bench{next(counter)}"
            service.create_container(name)
            store = AzureStore(
                name,
                account_name=ACCOUNT,
                account_key=KEY,
                endpoint=f"{direct}/{ACCOUNT}",
                client_options={"allow_http": True},
            )
            for path in files:
                obstore.put(store, f"v2/{path.relative_to(local).as_posix()}", path.read_bytes())
            return name

        def contender(
            label: str, command: Callable[[str], list[str]]
        ) -> Callable[[int], tuple[float, float]]:
            def run(round_: int) -> tuple[float, float]:
                name = fresh_container()
                try:
                    through[0] = 0
                    measured = run_process(command(name), env=env)
                    passed[label] = through[0]
                    return measured
                finally:
                    service.delete_container(name)

            return run

        def ours(*options: str) -> Callable[[str], list[str]]:
            return lambda name: [
                sys.executable,
                "-m",
                "numcodecs_bytes",
                "to-v3",
                f"az://{name}/v2",
                *options,
            ]

        floor = "floor: chunk objects copied"
        sharding = f"to-v3 --shard-size {SHARD_MIB}MiB"
        commands = {
            sharding: ours("--shard-size", f"{SHARD_MIB}MiB"),
            "to-v3, metadata only": ours(),
            floor: lambda name: [sys.executable, "-c", FLOOR, name, "v2", "copy", str(JOBS)],
        }
        bench = Bench(rounds)
        bench.run({label: contender(label, command) for label, command in commands.items()})
        medians = bench.table(stored, floor)
        adds = medians[sharding] - medians["to-v3, metadata only"]
        print(
            f"what packing adds to the metadata-only run: {adds:.2f} s, "
            f"{adds / medians[floor]:.2f}x the floor (goal: 1.25x or less)"
        )
        print(f"\n{'contender':<36} {'MB through the client':>22} {'of the stored data':>19}")
        for label, nbytes in passed.items():
            print(f"{label:<36} {nbytes / 1e6:22.1f} {nbytes / stored:18.1%}")
        print(f"\n{'shard size':>10} {'seconds':>8} {'peak MiB':>9}   (--jobs 64)")
        for shard_mib in (64, 256, 1024):
            if shard_mib * 2**20 > rows * 32768 * 4 and shard_mib != 64:
                continue
            command = ours(
                "--shard-size", f"{shard_mib}MiB", "--remove-v2-metadata", "--jobs", "64"
            )
            seconds, peak = contender(f"{shard_mib} MiB shards", command)(0)
            print(f"{shard_mib:>6} MiB {seconds:8.2f} {peak:9.0f}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mib", type=int, default=256, help="raw data, in MiB")
    parser.add_argument("--chunks", type=int, nargs="+", choices=sorted(S3_CHUNKS), default=[1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rtt", type=float, default=0.02, help="round trip the proxy adds, in s")
    args = parser.parse_args(argv)
    from machine import compile_package, describe

    compile_package()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        for chunk_mib in args.chunks:
            measure(Path(folder), args.mib, args.rounds, args.rtt, chunk_mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
