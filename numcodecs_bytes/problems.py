"""Problems as the store tools report them: a leaf that every module may import.

Each problem is one line of words (`reason`), whatever raised it. A library
message says what is wrong and which parameter governs it (``request_timeout``,
``sample_check=False``); the command line names the flag instead.
"""

from __future__ import annotations

import json

__all__ = [
    "NotAStoreError",
    "Problem",
    "RefusedError",
    "RunTimeoutError",
    "StoreBusyError",
    "reason",
]


class Problem(ValueError):
    """An error whose message is the whole reason, as the tools report it (e.g. a node that cannot
    be converted)."""


class NotAStoreError(ValueError):
    """The location is not a Zarr store, does not exist, or cannot be reached (a usage error)."""


class RefusedError(ValueError):
    """The run as asked would leave the store in a state its readers cannot use: refused before
    anything is written (a usage error)."""


class StoreBusyError(RuntimeError):
    """Another run of the store tools holds the store's lock."""


class RunTimeoutError(TimeoutError):
    """The run's time limit passed: it stopped between two batches (a rerun finishes it)."""


def reason(exc: BaseException) -> str:
    """A file's or a node's problem in one line of words, whatever raised it: what both tools
    report."""
    if isinstance(exc, Problem):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "nested too deeply to parse"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
