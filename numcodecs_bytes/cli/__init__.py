"""The command line, ``numcodecs-bytes`` and ``python -m numcodecs_bytes``: arguments, progress,
reports, exit codes.

The only part of the package that names a flag: library messages name the
parameter that governs what they report (``request_timeout``), and
`output.shown` prints the flag instead (``--request-timeout``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .arguments import parser, store_options
from .demo import data_type_table, demo, dtypes
from .output import Output
from .reports import EXIT_CODES, run_migrate, run_to_v3

__all__ = ["EXIT_CODES", "console", "data_type_table", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = parser().parse_args(argv)
    if args.command == "demo":
        return demo()
    if args.command == "dtypes":
        return dtypes()
    shared = {
        "verbose": args.verbose,
        "progress": args.progress,
        "store_options": store_options(args),
    }
    if args.command == "migrate":
        return run_migrate(
            args.path,
            dry_run=args.dry_run,
            backup=args.backup,
            struct_endian=args.struct_endian,
            **shared,
        )
    return run_to_v3(
        args.path,
        tool=args.command,
        dry_run=args.dry_run,
        remove_v2_metadata=args.remove_v2_metadata,
        sample_check=not args.no_sample_check,
        show_documents=args.show_documents,
        oldest_zarr=args.oldest_zarr,
        shard_size=args.shard_size,
        scheduler=args.scheduler,
        **shared,
    )


def console() -> NoReturn:
    """The console script: `main`, with outputs that may close under it; the process ends with its
    exit code once its outputs are flushed.

    With its output closed (``>&-``), or closed while it runs (``| head``),
    the command works on without output: the store's result alone decides
    the exit code.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        # None: closed at start
        setattr(sys, name, Output(open(os.devnull, "w") if stream is None else stream))
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # Nothing is left to do once the run has returned: what it holds goes with the process. The
    # interpreter's teardown would collect zarr's, s3fs's and botocore's objects again and again
    # (0.45 s of a 2.8 s run on S3, measured: benchmarks/README.md), and obstore 0.12's runtime
    # aborts it now and then (SIGABRT after a run that succeeded: 7 of 40 exits of a program reading
    # from Azure).
    os._exit(code)
