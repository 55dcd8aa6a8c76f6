"""Command line: ``numcodecs-bytes`` / ``python -m numcodecs_bytes``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numcodecs
import numpy as np

from . import BytesCodec
from .data_types import DATA_TYPES, example_dtype
from .migrate import run_migrate

__all__ = ["main"]

# Built-in sample data for the demo: one value per data type that shows its byte layout.
_DEMO_SAMPLES: tuple[tuple[str, object], ...] = (
    ("int32", [1, -2]),
    ("uint16", [0x0102]),
    ("float64", [1.5]),
    ("complex64", [1 - 2j]),
    ("<U2", ["hi"]),
    ("bool", [True, False]),
)


def data_type_table() -> str:
    """The `DATA_TYPES` table as aligned text."""
    lines = [f"{'data type':<22} {'numpy, e.g.':<20} endian orders each"]
    for row in DATA_TYPES.values():
        lines.append(f"{row.name:<22} {example_dtype(row):<20} {row.swap.value}")
    return "\n".join(lines)


def demo() -> int:
    """Show both byte orders of sample data, resolve both ids, round-trip."""
    print("Zarr v3 bytes codec: each element in little or big endian\n")
    for dtype, values in _DEMO_SAMPLES:
        array = np.array(values, dtype=dtype)
        for endian in ("little", "big"):
            codec = numcodecs.get_codec({"id": "bytes", "endian": endian, "dtype": array.dtype.str})
            encoded = codec.encode(array)
            assert np.array_equal(codec.decode(encoded), array), "round trip failed"
            print(f"{dtype:<10} {endian:<7} {array!s:<22} -> {bytes(encoded).hex(' ')}")
    legacy = numcodecs.get_codec({"id": "endian", "endian": "big", "dtype": "<i4"})
    print(f"\nlegacy id 'endian' resolves to {legacy!r}")
    same = legacy == BytesCodec(endian="big", dtype="<i4")
    print(f"its config is {legacy.get_config()}  (equal to the bytes codec: {same})")
    print("\n" + data_type_table())
    return 0


def _dtypes() -> int:
    print(data_type_table())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="numcodecs-bytes", description="The Zarr v3 bytes codec for numcodecs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("demo", help="show the codec on sample data", description=demo.__doc__)
    commands.add_parser("dtypes", help="print the data type table", description="Print the data type table.")
    migrate = commands.add_parser(
        "migrate",
        help="upgrade a store written with the legacy endian codec",
        description=(
            "Rename every legacy 'endian' codec to 'bytes' in the metadata of a Zarr store (v2 .zarray, "
            ".zmetadata; v3 zarr.json, sharding, consolidated metadata). Each file is replaced atomically; "
            "chunks are never touched. Exit codes: 0 done or nothing to do, 1 some files could not be "
            "migrated (the others were), 2 usage error."
        ),
    )
    migrate.add_argument("path", help="a local Zarr store (group or array), or an fsspec URL")
    migrate.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    migrate.add_argument("--backup", action="store_true", help="keep each original beside it as <name>.bak")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    if args.command == "migrate":
        return run_migrate(args.path, dry_run=args.dry_run, backup=args.backup)
    return _dtypes()


if __name__ == "__main__":
    sys.exit(main())
