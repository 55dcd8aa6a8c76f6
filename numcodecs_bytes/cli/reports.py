"""The store tools' runs as the command line shows them: one line per problem, a summary, the exit
code."""

from __future__ import annotations

import json
import logging
import signal
import sys
import textwrap
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any, Literal, TypeVar, cast

from ..migrate import METADATA_FILES, RENAME, Change, migrate_store
from ..problems import NotAStoreError, RefusedError, RunTimeoutError, StoreBusyError
from ..store import StoreOptions
from ..zarr_versions import release
from .output import shown
from .progress import Progress, count, say, size

__all__ = ["EXIT_CODES", "run_migrate", "run_to_v3"]

_Report = TypeVar("_Report")

EXIT_CODES = {
    0: "done, or nothing to do",
    1: "some paths could not be worked (each named; the rest done), or the run's time limit passed",
    2: "a usage error: no such store, a URL that cannot be opened, the store busy with another run",
    130: "interrupted (Ctrl-C): a rerun finishes the work",
}
"""The store tools' exit codes: every ``--help`` of theirs prints them."""

V2_METADATA_KEPT = (
    "note: v2 metadata kept: v2 readers see nothing written through Zarr v3 from now on, and v3 "
    "readers nothing written through v2 until to-v3 runs again; until it goes, zarr and xarray "
    "warn on each open that both exist (ZarrUserWarning: Both zarr.json ... and .zgroup ... "
    "exist); --remove-v2-metadata removes it"
)
"""What a run that converted and kept the v2 metadata says of it."""

_SHOWN_PER_NOTE = 3
"""Paths named on a note's line before "and N more" (``--verbose`` names every one)."""


def _run_tool(
    progress: Progress, run: Callable[[], _Report], *usage_errors: type[Exception]
) -> _Report | int:
    """A store tool's report; or, after one line, the exit code of a usage error (2), of the run's
    time limit (1), or of Ctrl-C (130)."""
    refused: tuple[type[Exception], ...] = (
        NotAStoreError,
        RefusedError,
        StoreBusyError,
        *usage_errors,
    )
    try:
        report = run()
    except refused as exc:
        say(progress, f"numcodecs-bytes {progress.tool}: error: {shown(str(exc))}", error=True)
        return 2
    except RunTimeoutError:
        return progress.stopped("stopped at the run's time limit (--run-timeout)", 1)
    except KeyboardInterrupt:
        _quiet_from_now_on()
        return progress.stopped("interrupted", 130)
    progress.clear()
    return report


def _quiet_from_now_on() -> None:
    """After a Ctrl-C, the run ends with its one line: a second Ctrl-C no longer interrupts the way
    out, and the tasks the interrupted run left in zarr's and fsspec's event loops go without a word
    when the process ends."""
    # only the main thread may set it (where main() runs in another: nothing to do)
    with suppress(ValueError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("asyncio").disabled = True  # "Task was destroyed but it is pending!"


def _grouped(lines: list[tuple[str, str]], verbose: bool) -> list[str]:
    """(path, text) pairs as report lines: one per text with its paths (a few, and how many more),
    or with ``verbose`` one per path."""
    if verbose:
        return [f"{shown(path)}: {shown(text)}" for path, text in lines]
    paths: dict[str, list[str]] = {}
    for path, text in lines:
        paths.setdefault(text, []).append(path)
    grouped = []
    for text, where in paths.items():
        named = ", ".join(shown(path) for path in where[:_SHOWN_PER_NOTE])
        more = f" and {len(where) - _SHOWN_PER_NOTE:,} more" if len(where) > _SHOWN_PER_NOTE else ""
        grouped.append(f"{named}{more}: {shown(text)}")
    return grouped


def run_migrate(
    location: str,
    *,
    dry_run: bool,
    backup: bool,
    struct_endian: Literal["little", "big"] | None = None,
    verbose: bool = False,
    progress: bool | None = None,
    store_options: StoreOptions | None = None,
) -> int:
    """``numcodecs-bytes migrate``: a summary (each change too, with ``verbose``); return the exit
    code (`EXIT_CODES`)."""
    verb = "would change" if dry_run else "changed"
    status = Progress(
        "migrate", sys.stderr.isatty() if progress is None else progress, ("file", verb)
    )

    def on_change(relative: str, changes: list[Change]) -> None:
        status.written += 1
        if verbose:
            lines = [
                f"{verb} {shown(relative)}:",
                *(f"  {change.location}: {change.what}" for change in changes),
            ]
            say(status, "\n".join(lines))

    run = partial(
        migrate_store,
        location,
        dry_run=dry_run,
        backup=backup,
        struct_endian=struct_endian,
        on_change=on_change,
        on_progress=status.update,
        store_options=store_options,
    )
    report = _run_tool(status, run)
    if isinstance(report, int):
        return report
    for leftover in report.leftovers_removed:
        if verbose:
            print(
                f"{'would remove' if dry_run else 'removed'} {shown(leftover)} (left by an "
                "interrupted run)"
            )
    for relative, why in report.failures:
        print(f"failed {shown(relative or '.')}: {shown(why)}", file=sys.stderr)
    added = [change for change in report.changes if change.what != RENAME]
    if added:
        print(
            f"note: {count(len(added), 'bytes codec')} given the endian "
            f"{'they' if len(added) > 1 else 'it'} did not state: the draft's default, what "
            "zarr-python before 3.3 read",
            file=sys.stderr,
        )
    prefix = "dry run: " if dry_run else ""
    if not report.files_changed and not report.failures:
        print(
            f"{prefix}nothing to do: no legacy codec in {count(report.nodes, 'node')} "
            f"({status.elapsed()})"
        )
        return 0
    summary = (
        f"{prefix}{count(len(report.files_changed), 'file')} {verb} "
        f"({count(len(report.changes), 'codec')}) in {count(report.nodes, 'node')}"
    )
    if report.failures:
        files_only = all(
            relative.rsplit("/", 1)[-1] in METADATA_FILES for relative, _ in report.failures
        )
        summary += (
            f"; {count(len(report.failures), 'file' if files_only else 'path')} could not be "
            "migrated"
        )
    print(f"{summary} ({status.elapsed()})")
    return 1 if report.failures else 0


def run_to_v3(
    location: str,
    *,
    tool: str = "to-v3",
    dry_run: bool,
    remove_v2_metadata: bool,
    sample_check: bool = True,
    verbose: bool = False,
    progress: bool | None = None,
    show_documents: bool = False,
    oldest_zarr: str | None = None,
    store_options: StoreOptions | None = None,
    shard_size: int | None = None,
    scheduler: str | None = None,
) -> int:
    """``numcodecs-bytes to-v3`` (and ``reshard``, ``tool``: the same run): a summary (each node
    too, with ``verbose``); return the exit code (`EXIT_CODES`)."""
    # imports zarr when run: only this command needs it
    from ..to_v3 import NodeResult, convert_store
    from ..to_v3.rules.ome import kind_of

    written = ("zarr.json", "to write" if dry_run else "written")
    status = Progress(tool, sys.stderr.isatty() if progress is None else progress, written)
    verbs = {
        "written": "would write" if dry_run else "wrote",
        "updated": "would update" if dry_run else "updated",
    }

    def on_node(node: NodeResult) -> None:
        status.written += node.action != "kept"
        if not (verbose or show_documents) or (node.action == "kept" and not verbose):
            return
        where = f"{node.path}/zarr.json".lstrip("/")
        kind = "group, implicit in v2" if node.implicit else node.kind
        ome = kind_of(node.document) if node.action != "kept" else None
        kind += f", OME-Zarr 0.5 {ome}" if ome else ""
        if node.action == "kept":
            line = f"kept {shown(where)} ({kind}, already converted)"
        else:
            folded = f"; {node.folded} folded" if node.folded else ""
            consolidated = "; its consolidated metadata" if node.action == "updated" else ""
            line = f"{verbs[node.action]} {shown(where)} ({kind}{folded}{consolidated})"
        if show_documents and node.action != "kept" and node.document is not None:
            line += "\n" + textwrap.indent(
                json.dumps(node.document, indent=2, allow_nan=True), "  "
            )
        say(status, line)

    def on_removed(path: str) -> None:
        if verbose:
            say(status, f"{'would remove' if dry_run else 'removed'} {shown(path)}")

    client = None if scheduler is None else _client(scheduler)
    run = partial(
        convert_store,
        location,
        dry_run=dry_run,
        remove_v2_metadata=remove_v2_metadata,
        sample_check=sample_check,
        oldest_zarr=oldest_zarr,
        on_node=on_node,
        on_progress=status.update,
        store_options=store_options,
        shard_size=shard_size,
        client=client,
        on_shards=status.shards,
        on_removed=on_removed,
    )
    try:
        report = _run_tool(status, run, ImportError)  # ImportError: zarr is not installed
    finally:
        if client is not None:
            client.close()
    if isinstance(report, int):
        return report
    if verbose:
        for removed in report.removed:
            print(f"{'would remove' if dry_run else 'removed'} {shown(removed)}")
        for leftover in report.leftovers_removed:
            print(
                f"{'would remove' if dry_run else 'removed'} {shown(leftover)} (left by an "
                "interrupted run)"
            )
    # zarr-python's warnings (their first sentence), what was assumed, and what readers need
    notes = [(node, note.split(". ")[0]) for node, note in report.notes]
    notes += [
        (node, f"readers need zarr-python {release(need.since)} or later: {need.why}")
        for node, need in report.readers
    ]
    for line in _grouped(notes, verbose):
        print(f"note {line}", file=sys.stderr)
    if report.written and not remove_v2_metadata and not dry_run:
        print(V2_METADATA_KEPT, file=sys.stderr)
    if report.kept_chunk_bytes and not dry_run:
        print(
            f"note: v2 chunk files kept beside the shards: {size(report.kept_chunk_bytes)} more on "
            "disk that only v2 readers read (the shards hold the same bytes); --remove-v2-metadata "
            "removes them",
            file=sys.stderr,
        )
    if report.server_copy_refused:
        print(
            f"note: {report.server_copy_refused}: shards packed through this machine "
            "(--no-server-copy skips the attempt)",
            file=sys.stderr,
        )
    for node, why in report.failures:
        print(f"failed {shown(node)}: {shown(why)}", file=sys.stderr)
    print(
        f"{'dry run: ' if dry_run else ''}{_conversion_summary(report, dry_run)} "
        f"({status.elapsed()})"
    )
    return 1 if report.failures else 0


def _client(address: str) -> Any:
    """A dask distributed client of the cluster at ``address``, or a usage error that says why there
    is none."""
    try:
        from distributed import Client
    except ImportError:
        raise NotAStoreError(
            f"a dask cluster ({address}) needs distributed: pip install distributed"
        ) from None
    try:
        return cast(Any, Client)(address, timeout=30)
    except Exception as exc:  # OSError, TimeoutError: the scheduler is not there
        raise NotAStoreError(
            f"no dask scheduler at {address} ({type(exc).__name__}: {exc})"
        ) from None


def _ome_summary(groups: list[tuple[str, str]], dry_run: bool) -> str:
    """The OME-Zarr groups made 0.5, counted: images, label images, plates, collections (their
    wells and labels groups go with them)."""
    kinds = [kind for _, kind in groups]
    main = ("image", "label image", "plate", "collection")
    counted = [count(kinds.count(kind), kind) for kind in main if kind in kinds]
    verb = "to make" if dry_run else "made"
    return f"OME-Zarr 0.4 {verb} 0.5: {', '.join(counted or [count(len(kinds), 'OME group')])}"


def _conversion_summary(report: Any, dry_run: bool) -> str:
    """What a to-v3 run did, counted: zarr.json written, brought up to date, kept; files removed;
    failures."""
    written = [node for node in report.converted if node.action == "written"]
    updated = [node for node in report.converted if node.action == "updated"]
    v3_only = sum(node.action == "kept" and node.v3_only for node in report.converted)
    kept = len(report.converted) - len(written) - len(updated) - v3_only
    sharding = report.chunks_removed or report.replaced_removed or report.shards_to_write
    sharding = sharding or report.sharded
    sharding = sharding or report.finished_removals
    if not written and not updated and not report.removed and not report.failures and not sharding:
        if not kept:
            return (
                f"nothing to do: {count(v3_only, 'node')} {'is' if v3_only == 1 else 'are'} Zarr "
                "v3 already"
            )
        return f"nothing to do: {count(kept, 'node')} already converted" + (
            f", {count(v3_only, 'node')} Zarr v3 already" if v3_only else ""
        )
    parts = []
    if written:
        folded = sum(node.folded is not None for node in written)
        filters = f" ({count(folded, 'bytes filter')} folded)" if folded else ""
        parts.append(
            f"{count(len(written), 'zarr.json')} {'to write' if dry_run else 'written'}{filters}"
        )
    if report.ome:
        parts.append(_ome_summary(report.ome, dry_run))
    if updated:
        parts.append(
            f"{count(len(updated), 'zarr.json')} {'to bring' if dry_run else 'brought'} up to date"
        )
    if kept:
        parts.append(f"{count(kept, 'node')} already converted")
    if v3_only:
        parts.append(f"{count(v3_only, 'node')} Zarr v3 already")
    if report.removed:
        parts.append(
            f"{count(len(report.removed), 'v2 metadata file')} "
            f"{'to remove' if dry_run else 'removed'}"
        )
    if report.shards_to_write:
        parts.append(f"{count(report.shards_to_write, 'shard')} to write")
    if report.sharded:
        new = len(report.sharded) - len(report.resharded)
        arrays = [f"{count(new, 'array')} sharded"] if new else []
        arrays += [f"{count(len(report.resharded), 'array')} resharded"] if report.resharded else []
        totals = (
            f"{count(report.shards, 'shard')}, {count(report.chunks_packed, 'chunk')}, "
            f"{size(report.shard_bytes)}"
        )
        if report.copied_bytes:
            totals += f", {size(report.copied_bytes)} of it copied inside S3"
        parts.append(f"{' and '.join(arrays)} ({totals})")
    verb = "to remove" if dry_run else "removed"
    if report.chunks_removed:
        parts.append(f"{count(report.chunks_removed, 'v2 chunk file')} {verb}")
    if report.replaced_removed:
        # what arrays read before their new shards: their old shards, or v3 chunk files
        parts.append(f"{count(report.replaced_removed, 'replaced file')} {verb}")
    if report.finished_removals:
        parts.append(
            f"the removal of {count(len(report.finished_removals), 'array')}'s v2 files "
            "finished (an interrupted run's)"
        )
    if report.consolidated and any(node.path == "" for node in (*written, *updated)):
        parts.append("consolidated")
    summary = ", ".join(parts)
    if report.failures:
        summary += (
            f"{'; ' if parts else ''}{count(len(report.failures), 'path')} could not be converted"
        )
    return summary
