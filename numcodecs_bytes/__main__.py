"""Command line: ``numcodecs-bytes`` / ``python -m numcodecs_bytes``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

import numcodecs
import numpy as np

from . import BytesCodec
from .data_types import DATA_TYPES, example_dtype
from .migrate import METADATA_FILES, RENAME, Change, migrate_store
from .stores import NotAStoreError, StoreBusyError

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


def _shown(text: str) -> str:
    """Text as one line any terminal takes: bytes that are not UTF-8 (in names) and control characters escaped.

    >>> _shown("a\nb\x1b[2Jc\u2028d")
    'a\\nb\\x1b[2Jc\\u2028d'
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def run_migrate(location: str, dry_run: bool, backup: bool) -> int:
    """``numcodecs-bytes migrate``: print each change and a summary; return the exit code.

    Exit codes: 0 done or nothing to do; 1 some files could not be migrated or
    some folders were not visited (each is named; the rest was migrated); 2 a
    usage error (no such store, a URL that cannot be opened, a store busy with
    another run). A closed output (``| head``) stops the run between two files.
    """
    verb = "would change" if dry_run else "changed"
    last_progress = [0.0]
    show_progress = sys.stderr.isatty() or os.environ.get("NUMCODECS_BYTES_PROGRESS") == "1"

    def on_change(relative: str, changes: list[Change]) -> None:
        lines = [f"{verb} {_shown(relative)}:", *(f"  {change.location}: {RENAME}" for change in changes)]
        print("\n".join(lines), flush=True)  # a closed pipe raises here, between two files

    def on_progress(nodes: int, changed: int) -> None:
        now = time.monotonic()
        if show_progress and nodes >= 100 and now - last_progress[0] > 0.2:
            last_progress[0] = now
            print(f"\r{nodes} nodes scanned, {_count(changed, 'file')} {verb}", end="", file=sys.stderr, flush=True)

    try:
        report = migrate_store(location, dry_run=dry_run, backup=backup, on_change=on_change, on_progress=on_progress)
    except (NotAStoreError, StoreBusyError) as exc:
        print(f"numcodecs-bytes migrate: error: {_shown(str(exc))}", file=sys.stderr)
        return 2
    if show_progress and report.nodes >= 100:
        print(file=sys.stderr)
    for leftover in report.leftovers_removed:
        print(f"{'would remove' if dry_run else 'removed'} {_shown(leftover)} (left by an interrupted run)")
    for relative, reason in report.failures:
        print(f"failed {_shown(relative)}: {_shown(reason)}", file=sys.stderr)
    summary = (
        f"{'dry run: ' if dry_run else ''}{_count(len(report.files_changed), 'file')} {verb} "
        f"({_count(len(report.changes), 'codec')}) in {_count(report.nodes, 'node')}"
    )
    if report.failures:
        files_only = all(relative.rsplit("/", 1)[-1] in METADATA_FILES for relative, _ in report.failures)
        summary += f"; {_count(len(report.failures), 'file' if files_only else 'path')} could not be migrated"
    print(summary)
    return 1 if report.failures else 0


def run_to_v3(location: str, dry_run: bool, remove_v2_metadata: bool, verify: bool = True) -> int:
    """``numcodecs-bytes to-v3``: print each node converted and a summary; return the exit code (as migrate's)."""
    from .to_v3 import NodeResult, convert_store  # imports zarr when run: only this command needs it

    verb = "would write" if dry_run else "wrote"

    def on_node(node: NodeResult) -> None:
        where = f"{node.path}/zarr.json".lstrip("/")
        done = f"kept {where} (already converted)" if node.unchanged else f"{verb} {where}"
        folded = f": {node.folded} folded into the bytes serializer" if node.folded else ""
        kind = "group, implicit in v2" if node.implicit else node.kind
        print(f"{_shown(done)} ({kind}){folded}", flush=True)

    try:
        report = convert_store(
            location, dry_run=dry_run, remove_v2_metadata=remove_v2_metadata, verify=verify, on_node=on_node
        )
    except (NotAStoreError, StoreBusyError, ImportError) as exc:
        print(f"numcodecs-bytes to-v3: error: {_shown(str(exc))}", file=sys.stderr)
        return 2
    for removed in report.removed:
        print(f"{'would remove' if dry_run else 'removed'} {_shown(removed)}")
    for leftover in report.leftovers_removed:
        print(f"{'would remove' if dry_run else 'removed'} {_shown(leftover)} (left by an interrupted run)")
    for node, note in report.notes:  # zarr-python's warnings (their first sentence) and what was assumed
        print(f"note {_shown(node)}: {_shown(note.split('. ')[0])}", file=sys.stderr)
    for node, reason in report.failures:
        print(f"failed {_shown(node)}: {_shown(reason)}", file=sys.stderr)
    folded = sum(node.folded is not None for node in report.converted)
    summary = (
        f"{'dry run: ' if dry_run else ''}{_count(len(report.converted), 'node')} converted "
        f"({_count(folded, 'bytes filter')} folded)"
    )
    if report.consolidated:
        summary += ", consolidated"
    if report.failures:
        summary += f"; {_count(len(report.failures), 'path')} could not be converted"
    print(summary)
    return 1 if report.failures else 0


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


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
    to_v3 = commands.add_parser(
        "to-v3",
        help="convert a Zarr v2 store (with or without the bytes filter) to Zarr v3",
        description=(
            "Write a Zarr v3 zarr.json beside each node's v2 metadata; chunks are never written. An array "
            "whose last filter is the bytes codec (id 'bytes' or legacy 'endian') gets the standard v3 'bytes' "
            "serializer with the filter's endian, everything else maps as zarr-python maps it. Needs zarr-python 3. "
            "Each array is checked first: chunk 0 and the fill value read as v2 and as v3 must be the same. A group "
            "is written only when every node below it converted. Exit codes: 0 every node converted, 1 some nodes "
            "could not be converted (each is named; the rest was), 2 usage error."
        ),
    )
    to_v3.add_argument("path", help="a local Zarr v2 store (group or array), or an fsspec URL")
    to_v3.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    to_v3.add_argument(
        "--remove-v2-metadata",
        action="store_true",
        help="once every node converted, remove the .zarray, .zgroup, .zattrs and .zmetadata files; never chunks",
    )
    to_v3.add_argument(
        "--no-verify",
        action="store_true",
        help="skip reading chunk 0 and the fill value of each array as v2 and as v3 before writing its zarr.json",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    if args.command == "migrate":
        return run_migrate(args.path, dry_run=args.dry_run, backup=args.backup)
    if args.command == "to-v3":
        return run_to_v3(
            args.path, dry_run=args.dry_run, remove_v2_metadata=args.remove_v2_metadata, verify=not args.no_verify
        )
    return _dtypes()


def _console() -> int:
    """The console script: `main`, plus a quiet end when the reader of the output goes away.

    With its output closed (``>&-``), the command works without output: the
    store's result alone decides the exit code.
    """
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # Python's stream for a closed descriptor
            setattr(sys, name, open(os.devnull, "w"))
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Output closed (a pipe into `head`): stop quietly. Files already replaced are
        # whole; Python must not complain again when it flushes stdout on exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(_console())
