"""The command line's arguments: the only place that names a flag."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from typing import Any

from .. import __version__
from ..store import JOBS, REQUEST_TIMEOUT, StoreOptions
from .demo import demo
from .reports import EXIT_CODES

__all__ = ["parser", "store_options"]


def parser() -> argparse.ArgumentParser:
    """The command line's parser: its commands, and each one's arguments."""
    command_line = argparse.ArgumentParser(
        prog="numcodecs-bytes", description="The Zarr v3 bytes codec for numcodecs."
    )
    command_line.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = command_line.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("demo", help="show the codec on sample data", description=demo.__doc__)
    commands.add_parser(
        "dtypes", help="print the data type table", description="Print the data type table."
    )
    migrate = _store_command(
        commands,
        "migrate",
        help="upgrade a store written with the legacy endian codec, or with v3 bytes codecs that "
        "state no endian",
        description=(
            "Rename every legacy 'endian' codec to 'bytes' in the metadata of a Zarr store (v2 "
            ".zarray, .zmetadata; v3 zarr.json, sharding, consolidated metadata), and give every "
            "v3 'bytes' codec of a multi-byte data type that states no byte order the draft's "
            'default, "endian": "little" (what zarr-python before 3.3 read; 3.3 refuses such '
            "metadata). Each file is replaced atomically, only if it still holds what was read; "
            "chunks are never touched."
        ),
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="say what would change; change nothing"
    )
    migrate.add_argument(
        "--backup", action="store_true", help="keep each original beside it as <name>.bak"
    )
    migrate.add_argument(
        "--struct-endian",
        choices=("little", "big"),
        help="the byte order of struct arrays' fields where their bytes codec states none "
        "(zarr-python's releases read them differently: without it such arrays are reported and "
        "left as they are)",
    )
    _store_arguments(migrate, "each file changed")
    to_v3 = _store_command(
        commands,
        "to-v3",
        help="convert a Zarr v2 store (with or without the bytes filter) to Zarr v3",
        description=(
            "Write a Zarr v3 zarr.json beside each node's v2 metadata; chunks are never written, "
            "but with --shard-size, which packs each array's chunk files, byte for byte, into "
            "shards (and puts arrays sharded already in shards of that size: see reshard). An "
            "array whose last filter is the bytes codec (id 'bytes' or legacy 'endian') gets the "
            "standard v3 'bytes' serializer with the filter's endian; arrays xarray wrote get its "
            "v3 dimension names and fill attribute; everything else maps as zarr-python maps it. "
            "Needs zarr-python 3. Each array is checked first: its fill value and stored chunks "
            "read as v2 and as v3 must be the same, until a chunk shows the mapping right (one "
            "that does stands for the arrays with the same .zarray). A group is written only when "
            "every node below it converted."
        ),
    )
    _to_v3_arguments(to_v3, shard_size_required=False)
    reshard = _store_command(
        commands,
        "reshard",
        help="put a store's arrays in shards of another size, moving each chunk's bytes as they "
        "are",
        description=(
            "Put every array of a Zarr v3 store in shards of SIZE: the arrays sharded already (by "
            "this tool, zarr-python or tensorstore) in new shards, each inner chunk's bytes moved "
            "from the shard it is in to its new shard, and the unsharded ones' chunk files packed "
            "into shards; no chunk is decoded. The new shards are read back and compared, one "
            "chunk of each array is read through the new metadata and through the old, the new "
            "zarr.json is switched last and the old shards removed after. A Zarr v2 store is "
            "converted first, as to-v3 --shard-size SIZE converts it (the same command)."
        ),
    )
    _to_v3_arguments(reshard, shard_size_required=True)
    return command_line


def _to_v3_arguments(command: argparse.ArgumentParser, shard_size_required: bool) -> None:
    """The arguments of to-v3, and of reshard (the same run, a shard size required)."""
    command.add_argument(
        "--dry-run", action="store_true", help="say what would be written; write nothing"
    )
    command.add_argument(
        "--remove-v2-metadata",
        action="store_true",
        help="once every node converted, remove the .zarray, .zgroup, .zattrs and .zmetadata files "
        "read (each only if unchanged since); with --shard-size, also the chunk files its shards "
        "hold (once the array reads its shards); a group keeps its own while a node below it keeps "
        "its own",
    )
    command.add_argument(
        "--no-sample-check",
        action="store_true",
        help="skip reading the fill value and chunks as v2 and as v3 before writing an array's "
        "zarr.json (what was packed into shards is checked still)",
    )
    # the flag's name until 0.1: it named a check that is not the only one
    command.add_argument(
        "--no-verify", action=_Renamed, nargs=0, dest="no_sample_check", help=argparse.SUPPRESS
    )
    command.add_argument(
        "--oldest-zarr",
        metavar="VERSION",
        help="the oldest zarr-python the store's readers use (e.g. 3.1): arrays it would read "
        "wrong stay v2 (by default they convert, and a note names the release they need)",
    )
    command.add_argument(
        "--show-documents",
        action="store_true",
        help="print each zarr.json written (or, in a dry run, to write)",
    )
    command.add_argument(
        "--shard-size",
        type=byte_count,
        metavar="SIZE",
        required=shard_size_required,
        help="shard every array of more than one chunk in shards of as many whole chunks as fit in "
        "SIZE of uncompressed data: its v2 chunk files, byte for byte; an array sharded already in "
        "shards of another shape, its inner chunks' bytes moved into new shards (no chunk is "
        "decoded). SIZE with a unit (256MiB, 1GB, 512B), or a bare number of bytes from 1048576 on "
        "(64 alone is refused). An array whose chunks hold more than SIZE stays as it is, with a "
        "note",
    )
    command.add_argument(
        "--no-server-copy",
        dest="server_copy",
        action="store_false",
        help="on S3, pack every shard through this machine; by default a shard whose chunks are 5 "
        "MiB or more is assembled by S3 itself from the chunk objects (UploadPartCopy), those "
        "chunks' bytes never passing through here (for servers that refuse such copies)",
    )
    command.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="pack the shards as tasks on the dask cluster at ADDRESS (tcp://host:8786); every "
        "worker must reach the store at the same location",
    )
    _store_arguments(command, "each node (kept ones too) and each file removed")


def store_options(args: argparse.Namespace) -> StoreOptions:
    """How a store tool reaches its store, from its arguments (each checked as it was parsed)."""
    return StoreOptions(
        jobs=args.jobs,
        storage_options=dict(args.storage_option) or None,
        request_timeout=args.request_timeout,
        run_timeout=args.run_timeout,
        server_copy=getattr(args, "server_copy", True),
    )


def _store_command(commands: Any, name: str, **texts: str) -> argparse.ArgumentParser:
    """A store tool's subcommand: its path argument, and the exit codes in its help."""
    epilog = "exit codes:\n" + "\n".join(
        f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items()
    )
    if "description" in texts:  # kept as written (the epilog's table needs that), so wrapped here
        texts["description"] = textwrap.fill(texts["description"], 79)
    command: argparse.ArgumentParser = commands.add_parser(
        name, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter, **texts
    )
    command.add_argument(
        "path", help="a local Zarr store (group or array), or an fsspec URL (s3://...)"
    )
    return command


def _store_arguments(command: argparse.ArgumentParser, listed: str) -> None:
    """The options both store tools take."""
    command.add_argument(
        "-v", "--verbose", action="store_true", help=f"list {listed}, not only the summary"
    )
    command.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live progress line on stderr (default: when stderr is a terminal)",
    )
    command.add_argument(
        "--jobs",
        type=_positive,
        default=JOBS,
        metavar="N",
        help=f"requests in flight at most on an object store (default {JOBS})",
    )
    command.add_argument(
        "--storage-option",
        type=_storage_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how a URL's store is reached, as zarr and xarray take it: fsspec's options, e.g. "
        "endpoint_url=http://localhost:9000, profile=name, anon=true; for Azure adlfs's names "
        "(account_name, connection_string, ...) (a VALUE that is JSON is parsed: true, 3, {...}); "
        "repeat for more",
    )
    command.add_argument(
        "--request-timeout",
        type=_seconds,
        default=REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="how long one request to an object store may take, retries included (default "
        f"{REQUEST_TIMEOUT:g}); a file whose request takes longer is reported",
    )
    command.add_argument(
        "--run-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long the whole run may take (default: no limit); it then stops between two "
        "batches, exit code 1",
    )


_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def byte_count(text: str) -> int:
    """A number of bytes, as people write it: ``64MiB``, ``1.5 GB``, ``512B``, or a bare number of 1
    MiB or more (a bare ``64`` is refused: 64 bytes would be meant rarely, 64 MiB often).

    >>> byte_count("64MiB"), byte_count("1.5 GB"), byte_count("512B"), byte_count("1048576")
    (67108864, 1500000000, 512, 1048576)
    """
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = found.group(2).upper() if found else ""
    if found is None or unit not in _UNITS or float(found.group(1)) * _UNITS[unit] < 1:
        raise argparse.ArgumentTypeError(
            "must be a number of bytes such as 256MiB, 1GB or 512B (units B, KB, MB, GB, TB, KiB, "
            f"MiB, GiB, TiB), got {text!r}"
        )
    count = int(float(found.group(1)) * _UNITS[unit])
    if not found.group(2) and count < 2**20:
        raise argparse.ArgumentTypeError(
            f"{text.strip()} without a unit is {count:,} bytes: give the unit ({text.strip()}MiB? "
            f"{text.strip()}MB? {text.strip()}B for bytes); a bare number is taken as bytes from "
            "1048576 (1 MiB) on"
        )
    return count


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return seconds


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return number


def _storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as fsspec takes it: the value parsed where it is JSON (``true``, ``3``), else
    the text."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


class _Renamed(argparse.Action):
    """An old flag's name: it sets what the new one sets, with a note on stderr naming the new
    one."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        new = {"--no-verify": "--no-sample-check"}.get(option_string or "", "")
        print(f"note: {option_string} is now {new}; the old name goes in 0.2", file=sys.stderr)
        setattr(namespace, self.dest, True)
