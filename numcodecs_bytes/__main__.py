"""Command line: ``numcodecs-bytes`` / ``python -m numcodecs_bytes``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import numcodecs
import numpy as np

from . import BytesCodec, __version__
from .data_types import DATA_TYPES, ML_DTYPES_NAMES, example_dtype
from .migrate import METADATA_FILES, RENAME, Change, migrate_store
from .stores import JOBS, NotAStoreError, StoreBusyError

__all__ = ["main"]

_Report = TypeVar("_Report")

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
    """The `DATA_TYPES` table as aligned text; the ml_dtypes types as needing the extra where it is missing."""
    rows = [("data type", "numpy, e.g.", "endian orders each")]
    rows += [(row.name, example_dtype(row), row.swap.value) for row in DATA_TYPES.values()]
    missing = [name for name in ML_DTYPES_NAMES if name not in DATA_TYPES]
    rows += [(name, "-", "needs the ml_dtypes extra") for name in missing]
    widths = [max(len(row[column]) for row in rows) for column in (0, 1)]
    lines = [f"{name:<{widths[0]}}  {example:<{widths[1]}}  {orders}" for name, example, orders in rows]
    if missing:
        lines.append(f"\n{len(missing)} data types need ml_dtypes: pip install 'numcodecs-bytes[ml_dtypes]'")
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


class _Progress:
    """One live line on stderr while a store tool runs (folders walked of found, rate, time left), cleared at
    the end and before any other line; shown on a terminal, or when asked (``--progress``)."""

    def __init__(self, tool: str, enabled: bool) -> None:
        self.tool, self.enabled = tool, enabled
        self.started = self.shown_at = time.monotonic()
        self.done = self.found = 0
        self.visible = False

    def update(self, done: int, found: int) -> None:
        self.done, self.found = done, found
        now = time.monotonic()
        if not self.enabled or now - self.shown_at < 0.2:
            return
        self.shown_at = now
        rate = done / (now - self.started)
        line = f"{self.tool}: {done:,} of {found:,} folders, {rate:,.0f}/s"
        if 0 < done < found:
            line += f", about {_duration((found - done) / rate)} left"
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()
        self.visible = True

    def clear(self) -> None:
        if self.visible:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.visible = False

    def interrupted(self) -> int:
        """Ctrl-C: one line, exit code 130."""
        self.clear()
        print(f"interrupted: {self.done:,} of {self.found:,} folders done; run again to finish", file=sys.stderr)
        return 130


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _say(progress: _Progress, line: str, error: bool = False) -> None:
    """A report line, never mixed into the progress line."""
    progress.clear()
    print(line, file=sys.stderr if error else sys.stdout, flush=True)  # a closed pipe raises here


def _run_tool(shown: _Progress, run: Callable[[], _Report], *usage_errors: type[Exception]) -> _Report | int:
    """A store tool's report; or, after one line, the exit code of a usage error (2) or of Ctrl-C (130)."""
    refused: tuple[type[Exception], ...] = (NotAStoreError, StoreBusyError, *usage_errors)
    try:
        report = run()
    except refused as exc:
        _say(shown, f"numcodecs-bytes {shown.tool}: error: {_shown(str(exc))}", error=True)
        return 2
    except KeyboardInterrupt:
        return shown.interrupted()
    shown.clear()
    return report


def run_migrate(
    location: str,
    dry_run: bool,
    backup: bool,
    verbose: bool = False,
    progress: bool | None = None,
    jobs: int = JOBS,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """``numcodecs-bytes migrate``: a summary (each change too, with ``verbose``); return the exit code.

    Exit codes: 0 done or nothing to do; 1 some files could not be migrated or
    some folders were not visited (each is named; the rest was migrated); 2 a
    usage error (no such store, a URL that cannot be opened, a store busy with
    another run); 130 interrupted (Ctrl-C). A closed output (``| head``) stops the
    run between two batches.
    """
    verb = "would change" if dry_run else "changed"
    shown = _Progress("migrate", sys.stderr.isatty() if progress is None else progress)

    def on_change(relative: str, changes: list[Change]) -> None:
        if verbose:
            lines = [f"{verb} {_shown(relative)}:", *(f"  {change.location}: {RENAME}" for change in changes)]
            _say(shown, "\n".join(lines))

    report = _run_tool(
        shown,
        partial(
            migrate_store,
            location,
            dry_run=dry_run,
            backup=backup,
            on_change=on_change,
            on_progress=shown.update,
            jobs=jobs,
            storage_options=storage_options,
        ),
    )
    if isinstance(report, int):
        return report
    for leftover in report.leftovers_removed:
        if verbose:
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
    print(f"{summary} ({_elapsed(shown)})")
    return 1 if report.failures else 0


def run_to_v3(
    location: str,
    dry_run: bool,
    remove_v2_metadata: bool,
    verify: bool = True,
    verbose: bool = False,
    progress: bool | None = None,
    jobs: int = JOBS,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """``numcodecs-bytes to-v3``: a summary (each node too, with ``verbose``); return the exit code (as migrate's)."""
    from .to_v3 import NodeResult, convert_store  # imports zarr when run: only this command needs it

    verb = "would write" if dry_run else "wrote"
    shown = _Progress("to-v3", sys.stderr.isatty() if progress is None else progress)

    def on_node(node: NodeResult) -> None:
        if not verbose:
            return
        where = f"{node.path}/zarr.json".lstrip("/")
        done = f"kept {where} (already converted)" if node.unchanged else f"{verb} {where}"
        folded = f": {node.folded} folded into the bytes serializer" if node.folded else ""
        kind = "group, implicit in v2" if node.implicit else node.kind
        line = f"{_shown(done)} ({kind}){folded}"
        if dry_run and not node.unchanged and node.document is not None:
            line += "\n" + textwrap.indent(json.dumps(node.document, indent=2, allow_nan=True), "  ")
        _say(shown, line)

    report = _run_tool(
        shown,
        partial(
            convert_store,
            location,
            dry_run=dry_run,
            remove_v2_metadata=remove_v2_metadata,
            verify=verify,
            on_node=on_node,
            on_progress=shown.update,
            jobs=jobs,
            storage_options=storage_options,
        ),
        ImportError,  # zarr not installed
    )
    if isinstance(report, int):
        return report
    if verbose:
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
        f"{'dry run: ' if dry_run else ''}{_count(len(report.converted), 'node')} "
        f"{'would convert' if dry_run else 'converted'} ({_count(folded, 'bytes filter')} folded"
    )
    if report.removed:
        summary += f", {_count(len(report.removed), 'v2 metadata file')} {'to remove' if dry_run else 'removed'}"
    summary += ")"
    if report.consolidated:
        summary += ", consolidated"
    if report.failures:
        summary += f"; {_count(len(report.failures), 'path')} could not be converted"
    print(f"{summary} ({_elapsed(shown)})")
    return 1 if report.failures else 0


def _elapsed(progress: _Progress) -> str:
    return f"{time.monotonic() - progress.started:.1f} s"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="numcodecs-bytes", description="The Zarr v3 bytes codec for numcodecs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
    migrate.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")
    migrate.add_argument("--backup", action="store_true", help="keep each original beside it as <name>.bak")
    _store_options(migrate, "each file changed")
    to_v3 = commands.add_parser(
        "to-v3",
        help="convert a Zarr v2 store (with or without the bytes filter) to Zarr v3",
        description=(
            "Write a Zarr v3 zarr.json beside each node's v2 metadata; chunks are never written. An array "
            "whose last filter is the bytes codec (id 'bytes' or legacy 'endian') gets the standard v3 'bytes' "
            "serializer with the filter's endian, everything else maps as zarr-python maps it. Needs zarr-python 3. "
            "Each array is checked first: chunk 0 and the fill value read as v2 and as v3 must be the same (one "
            "array whose chunk 0 shows the mapping right stands for those with the same .zarray). A group "
            "is written only when every node below it converted. Exit codes: 0 every node converted, 1 some nodes "
            "could not be converted (each is named; the rest was), 2 usage error, 130 interrupted."
        ),
    )
    to_v3.add_argument("path", help="a local Zarr v2 store (group or array), or an fsspec URL")
    to_v3.add_argument("--dry-run", action="store_true", help="say what would be written; write nothing")
    to_v3.add_argument(
        "--remove-v2-metadata",
        action="store_true",
        help="once every node converted, remove the .zarray, .zgroup, .zattrs and .zmetadata files; never chunks",
    )
    to_v3.add_argument(
        "--no-verify",
        action="store_true",
        help="skip reading chunk 0 and the fill value as v2 and as v3 before writing an array's zarr.json",
    )
    _store_options(to_v3, "each node written (with --dry-run, the zarr.json it would write)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    if args.command == "dtypes":
        return _dtypes()
    options = {
        "verbose": args.verbose,
        "progress": args.progress,
        "jobs": args.jobs,
        "storage_options": dict(args.storage_option) or None,
    }
    if args.command == "migrate":
        return run_migrate(args.path, dry_run=args.dry_run, backup=args.backup, **options)
    return run_to_v3(
        args.path,
        dry_run=args.dry_run,
        remove_v2_metadata=args.remove_v2_metadata,
        verify=not args.no_verify,
        **options,
    )


def _store_options(command: argparse.ArgumentParser, listed: str) -> None:
    """The options both store tools take."""
    command.add_argument("-v", "--verbose", action="store_true", help=f"list {listed}, not only the summary")
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
        help="passed to fsspec with a URL, e.g. endpoint_url=http://localhost:9000, profile=name, anon=true "
        "(a VALUE that is JSON is parsed: true, 3, {...}); repeat for more",
    )


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return number


def _storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as fsspec takes it: the value parsed where it is JSON (``true``, ``3``), else the text."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


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
