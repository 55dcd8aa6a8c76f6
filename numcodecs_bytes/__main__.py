"""Command line: ``numcodecs-bytes`` / ``python -m numcodecs_bytes``."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TextIO, TypeVar

import numcodecs
import numpy as np

from . import BytesCodec, __version__
from .data_types import DATA_TYPES, ML_DTYPES_NAMES, example_dtype
from .migrate import METADATA_FILES, RENAME, Change, migrate_store
from .stores import JOBS, REQUEST_TIMEOUT, NotAStoreError, RunTimeoutError, StoreBusyError
from .zarr_versions import release

__all__ = ["EXIT_CODES", "main"]

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


def _printable(text: str) -> str:
    """Text as one line any terminal takes: bytes that are not UTF-8 (in names) and control characters escaped.

    >>> _printable("a\nb\x1b[2Jc\u2028d")
    'a\\nb\\x1b[2Jc\\u2028d'
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


EXIT_CODES = {
    0: "done, or nothing to do",
    1: "some paths could not be worked (each is named; the rest was done), or the run's time limit passed",
    2: "a usage error: no such store, a URL that cannot be opened, the store busy with another run",
    130: "interrupted (Ctrl-C): a rerun finishes the work",
}
"""The store tools' exit codes: every ``--help`` of theirs prints them."""

_SHOWN_PER_NOTE = 3
"""Paths named on a note's line before "and N more" (``--verbose`` names every one)."""


class _Progress:
    """One live line on stderr while a store tool runs (folders walked of found, rate, time left), cleared at
    the end and before any other line; shown on a terminal, or when asked (``--progress``)."""

    def __init__(self, tool: str, enabled: bool, written: tuple[str, str]) -> None:
        self.tool, self.enabled, (self.noun, self.verb) = tool, enabled, written
        self.started = self.drawn_at = time.monotonic()
        self.done = self.found = self.written = 0
        self.visible = False

    def update(self, done: int, found: int) -> None:
        self.done, self.found = done, found
        now = time.monotonic()
        if not self.enabled or now - self.drawn_at < 0.2:
            return
        self.drawn_at = now
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

    def stopped(self, why: str, code: int) -> int:
        """One line saying how far the run came (what it wrote, the folders it walked), and its exit code."""
        self.clear()
        done = f"{_count(self.written, self.noun)} {self.verb}, {self.done:,} of {self.found:,} folders walked"
        print(f"{why}: {done}; run again to finish", file=sys.stderr)
        return code

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _say(progress: _Progress, line: str, error: bool = False) -> None:
    """A report line, never mixed into the progress line."""
    progress.clear()
    print(line, file=sys.stderr if error else sys.stdout, flush=True)


def _run_tool(progress: _Progress, run: Callable[[], _Report], *usage_errors: type[Exception]) -> _Report | int:
    """A store tool's report; or, after one line, the exit code of a usage error (2), of the run's time limit
    (1), or of Ctrl-C (130)."""
    refused: tuple[type[Exception], ...] = (NotAStoreError, StoreBusyError, *usage_errors)
    try:
        report = run()
    except refused as exc:
        _say(progress, f"numcodecs-bytes {progress.tool}: error: {_printable(str(exc))}", error=True)
        return 2
    except RunTimeoutError:
        return progress.stopped("stopped at the run's time limit (--run-timeout)", 1)
    except KeyboardInterrupt:
        _quiet_from_now_on()
        return progress.stopped("interrupted", 130)
    progress.clear()
    return report


def _quiet_from_now_on() -> None:
    """After a Ctrl-C, the run ends with its one line: a second Ctrl-C no longer interrupts the way out, and the
    tasks the interrupted run left in zarr's and fsspec's event loops go without a word when the process ends."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("asyncio").disabled = True  # "Task was destroyed but it is pending!"


def _grouped(lines: list[tuple[str, str]], verbose: bool) -> list[str]:
    """(path, text) pairs as report lines: one per text with its paths (a few, and how many more), or with
    ``verbose`` one per path."""
    if verbose:
        return [f"{_printable(path)}: {_printable(text)}" for path, text in lines]
    paths: dict[str, list[str]] = {}
    for path, text in lines:
        paths.setdefault(text, []).append(path)
    grouped = []
    for text, where in paths.items():
        named = ", ".join(_printable(path) for path in where[:_SHOWN_PER_NOTE])
        more = f" and {len(where) - _SHOWN_PER_NOTE:,} more" if len(where) > _SHOWN_PER_NOTE else ""
        grouped.append(f"{named}{more}: {_printable(text)}")
    return grouped


def run_migrate(
    location: str,
    dry_run: bool,
    backup: bool,
    verbose: bool = False,
    progress: bool | None = None,
    **store_options: Any,
) -> int:
    """``numcodecs-bytes migrate``: a summary (each change too, with ``verbose``); return the exit code
    (`EXIT_CODES`). ``store_options``: `migrate_store`'s ``jobs``, ``storage_options``, ``request_timeout``,
    ``run_timeout``."""
    verb = "would change" if dry_run else "changed"
    status = _Progress("migrate", sys.stderr.isatty() if progress is None else progress, ("file", verb))

    def on_change(relative: str, changes: list[Change]) -> None:
        status.written += 1
        if verbose:
            lines = [f"{verb} {_printable(relative)}:", *(f"  {change.location}: {RENAME}" for change in changes)]
            _say(status, "\n".join(lines))

    run = partial(
        migrate_store, location, dry_run=dry_run, backup=backup, on_change=on_change, on_progress=status.update,
        **store_options,
    )  # fmt: skip
    report = _run_tool(status, run)
    if isinstance(report, int):
        return report
    for leftover in report.leftovers_removed:
        if verbose:
            print(f"{'would remove' if dry_run else 'removed'} {_printable(leftover)} (left by an interrupted run)")
    for relative, why in report.failures:
        print(f"failed {_printable(relative or '.')}: {_printable(why)}", file=sys.stderr)
    prefix = "dry run: " if dry_run else ""
    if not report.files_changed and not report.failures:
        print(f"{prefix}nothing to do: no legacy codec in {_count(report.nodes, 'node')} ({status.elapsed()})")
        return 0
    summary = (
        f"{prefix}{_count(len(report.files_changed), 'file')} {verb} "
        f"({_count(len(report.changes), 'codec')}) in {_count(report.nodes, 'node')}"
    )
    if report.failures:
        files_only = all(relative.rsplit("/", 1)[-1] in METADATA_FILES for relative, _ in report.failures)
        summary += f"; {_count(len(report.failures), 'file' if files_only else 'path')} could not be migrated"
    print(f"{summary} ({status.elapsed()})")
    return 1 if report.failures else 0


def run_to_v3(
    location: str,
    dry_run: bool,
    remove_v2_metadata: bool,
    verify: bool = True,
    verbose: bool = False,
    progress: bool | None = None,
    show_documents: bool = False,
    oldest_zarr: str | None = None,
    **store_options: Any,
) -> int:
    """``numcodecs-bytes to-v3``: a summary (each node too, with ``verbose``); return the exit code
    (`EXIT_CODES`). ``store_options``: `convert_store`'s ``jobs``, ``storage_options``, ``request_timeout``,
    ``run_timeout``."""
    from .to_v3 import NodeResult, convert_store  # imports zarr when run: only this command needs it

    written = ("zarr.json", "to write" if dry_run else "written")
    status = _Progress("to-v3", sys.stderr.isatty() if progress is None else progress, written)
    verbs = {"written": "would write" if dry_run else "wrote", "updated": "would update" if dry_run else "updated"}

    def on_node(node: NodeResult) -> None:
        status.written += node.action != "kept"
        if not (verbose or show_documents) or (node.action == "kept" and not verbose):
            return
        where = f"{node.path}/zarr.json".lstrip("/")
        kind = "group, implicit in v2" if node.implicit else node.kind
        if node.action == "kept":
            line = f"kept {_printable(where)} ({kind}, already converted)"
        else:
            folded = f"; {node.folded} folded" if node.folded else ""
            consolidated = "; its consolidated metadata" if node.action == "updated" else ""
            line = f"{verbs[node.action]} {_printable(where)} ({kind}{folded}{consolidated})"
        if show_documents and node.action != "kept" and node.document is not None:
            line += "\n" + textwrap.indent(json.dumps(node.document, indent=2, allow_nan=True), "  ")
        _say(status, line)

    run = partial(
        convert_store, location, dry_run=dry_run, remove_v2_metadata=remove_v2_metadata, verify=verify,
        oldest_zarr=oldest_zarr, on_node=on_node, on_progress=status.update, **store_options,
    )  # fmt: skip
    report = _run_tool(status, run, ImportError)  # ImportError: zarr is not installed
    if isinstance(report, int):
        return report
    if verbose:
        for removed in report.removed:
            print(f"{'would remove' if dry_run else 'removed'} {_printable(removed)}")
        for leftover in report.leftovers_removed:
            print(f"{'would remove' if dry_run else 'removed'} {_printable(leftover)} (left by an interrupted run)")
    # zarr-python's warnings (their first sentence), what was assumed, and what readers need
    notes = [(node, note.split(". ")[0]) for node, note in report.notes]
    notes += [
        (node, f"readers need zarr-python {release(need.since)} or later: {need.why}") for node, need in report.readers
    ]
    for line in _grouped(notes, verbose):
        print(f"note {line}", file=sys.stderr)
    if report.written and not remove_v2_metadata and not dry_run:
        print(
            "note: v2 metadata kept: v2 readers see nothing written through Zarr v3 from now on, and v3 readers "
            "nothing written through v2 until to-v3 runs again; --remove-v2-metadata removes it",
            file=sys.stderr,
        )
    for node, why in report.failures:
        print(f"failed {_printable(node)}: {_printable(why)}", file=sys.stderr)
    print(f"{'dry run: ' if dry_run else ''}{_conversion_summary(report, dry_run)} ({status.elapsed()})")
    return 1 if report.failures else 0


def _conversion_summary(report: Any, dry_run: bool) -> str:
    """What a to-v3 run did, counted: zarr.json written, brought up to date, kept; files removed; failures."""
    written = [node for node in report.converted if node.action == "written"]
    updated = [node for node in report.converted if node.action == "updated"]
    v3_only = sum(node.action == "kept" and node.v3_only for node in report.converted)
    kept = len(report.converted) - len(written) - len(updated) - v3_only
    if not written and not updated and not report.removed and not report.failures:
        if not kept:
            return f"nothing to do: {_count(v3_only, 'node')} {'is' if v3_only == 1 else 'are'} Zarr v3 already"
        return f"nothing to do: {_count(kept, 'node')} already converted" + (
            f", {_count(v3_only, 'node')} Zarr v3 already" if v3_only else ""
        )
    parts = []
    if written:
        folded = sum(node.folded is not None for node in written)
        filters = f" ({_count(folded, 'bytes filter')} folded)" if folded else ""
        parts.append(f"{_count(len(written), 'zarr.json')} {'to write' if dry_run else 'written'}{filters}")
    if updated:
        parts.append(f"{_count(len(updated), 'consolidation')} {'to bring' if dry_run else 'brought'} up to date")
    if kept:
        parts.append(f"{_count(kept, 'node')} already converted")
    if v3_only:
        parts.append(f"{_count(v3_only, 'node')} Zarr v3 already")
    if report.removed:
        parts.append(f"{_count(len(report.removed), 'v2 metadata file')} {'to remove' if dry_run else 'removed'}")
    if report.consolidated and any(node.path == "" for node in (*written, *updated)):
        parts.append("consolidated")
    summary = ", ".join(parts)
    if report.failures:
        summary += f"{'; ' if parts else ''}{_count(len(report.failures), 'path')} could not be converted"
    return summary


def _count(number: int, noun: str) -> str:
    plural = noun if noun.endswith(".json") else f"{noun}s"
    return f"{number:,} {noun if number == 1 else plural}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="numcodecs-bytes", description="The Zarr v3 bytes codec for numcodecs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("demo", help="show the codec on sample data", description=demo.__doc__)
    commands.add_parser("dtypes", help="print the data type table", description="Print the data type table.")
    migrate = _store_command(
        commands,
        "migrate",
        help="upgrade a store written with the legacy endian codec",
        description=(
            "Rename every legacy 'endian' codec to 'bytes' in the metadata of a Zarr store (v2 .zarray, "
            ".zmetadata; v3 zarr.json, sharding, consolidated metadata). Each file is replaced atomically, only "
            "if it still holds what was read; chunks are never touched."
        ),
    )
    migrate.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")
    migrate.add_argument("--backup", action="store_true", help="keep each original beside it as <name>.bak")
    _store_options(migrate, "each file changed")
    to_v3 = _store_command(
        commands,
        "to-v3",
        help="convert a Zarr v2 store (with or without the bytes filter) to Zarr v3",
        description=(
            "Write a Zarr v3 zarr.json beside each node's v2 metadata; chunks are never written. An array "
            "whose last filter is the bytes codec (id 'bytes' or legacy 'endian') gets the standard v3 'bytes' "
            "serializer with the filter's endian; arrays xarray wrote get its v3 dimension names and fill "
            "attribute; everything else maps as zarr-python maps it. Needs zarr-python 3. Each array is checked "
            "first: chunk 0 and the fill value read as v2 and as v3 must be the same (one array whose chunk 0 "
            "shows the mapping right stands for those with the same .zarray). A group is written only when "
            "every node below it converted."
        ),
    )
    to_v3.add_argument("--dry-run", action="store_true", help="say what would be written; write nothing")
    to_v3.add_argument(
        "--remove-v2-metadata",
        action="store_true",
        help="once every node converted, remove the .zarray, .zgroup, .zattrs and .zmetadata files read (each "
        "only if unchanged since); never chunks",
    )
    to_v3.add_argument(
        "--no-verify",
        action="store_true",
        help="skip reading chunk 0 and the fill value as v2 and as v3 before writing an array's zarr.json",
    )
    to_v3.add_argument(
        "--oldest-zarr",
        metavar="VERSION",
        help="the oldest zarr-python the store's readers use (e.g. 3.1): arrays it would read wrong stay v2 "
        "(by default they convert, and a note names the release they need)",
    )
    to_v3.add_argument(
        "--show-documents", action="store_true", help="print each zarr.json written (or, in a dry run, to write)"
    )
    _store_options(to_v3, "each node (kept ones too) and each file removed")
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
        "request_timeout": args.request_timeout,
        "run_timeout": args.run_timeout,
    }
    if args.command == "migrate":
        return run_migrate(args.path, dry_run=args.dry_run, backup=args.backup, **options)
    return run_to_v3(
        args.path,
        dry_run=args.dry_run,
        remove_v2_metadata=args.remove_v2_metadata,
        verify=not args.no_verify,
        show_documents=args.show_documents,
        oldest_zarr=args.oldest_zarr,
        **options,
    )


def _store_command(commands: Any, name: str, **texts: str) -> argparse.ArgumentParser:
    """A store tool's subcommand: its path argument, and the exit codes in its help."""
    epilog = "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items())
    command: argparse.ArgumentParser = commands.add_parser(
        name, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter, **texts
    )
    command.add_argument("path", help="a local Zarr store (group or array), or an fsspec URL (s3://...)")
    return command


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
    command.add_argument(
        "--request-timeout",
        type=_seconds,
        default=REQUEST_TIMEOUT,
        metavar="SECONDS",
        help=f"how long one request to an object store may take, retries included (default {REQUEST_TIMEOUT:g}); "
        "a file whose request takes longer is reported",
    )
    command.add_argument(
        "--run-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long the whole run may take (default: no limit); it then stops between two batches, exit code 1",
    )


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
    """``KEY=VALUE`` as fsspec takes it: the value parsed where it is JSON (``true``, ``3``), else the text."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


class _Output(io.TextIOBase):
    """sys.stdout or sys.stderr as the console script writes them: once the reader goes away (a pipe into
    ``head``), the rest is dropped without a word, and the run goes on to its end."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def _reader_gone(self) -> None:
        # Python must not complain again when it flushes the stream at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        self.stream = open(os.devnull, "w")  # open for the rest of the process


def _console() -> int:
    """The console script: `main`, with outputs that may close under it.

    With its output closed (``>&-``), or closed while it runs (``| head``),
    the command works on without output: the store's result alone decides
    the exit code.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        setattr(sys, name, _Output(open(os.devnull, "w") if stream is None else stream))  # None: closed at start
    try:
        return main()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(_console())
