"""What the command line writes: one line any terminal takes, and outputs that may close under
it."""

from __future__ import annotations

import io
import os
import re
from typing import TextIO

__all__ = ["FLAGS", "Output", "shown"]

FLAGS = {
    "sample_check=False": "--no-sample-check",
    "request_timeout": "--request-timeout",
    "run_timeout": "--run-timeout",
    "oldest_zarr": "--oldest-zarr",
    "remove_v2_metadata": "--remove-v2-metadata",
    "storage_options": "--storage-option",
    "shard_size": "--shard-size",
}
"""The library's parameters that its messages name, and the flag that sets each here."""
_PARAMETER = re.compile(r"\b(" + "|".join(re.escape(name) for name in FLAGS) + r")\b")


def shown(text: str) -> str:
    """A library message as the command line prints it: one line, each parameter it names as its
    flag.

    >>> shown("no answer within 60 s (request_timeout)")
    'no answer within 60 s (--request-timeout)'
    """
    return printable(_PARAMETER.sub(lambda found: FLAGS[found.group(1)], text))


def printable(text: str) -> str:
    r"""Text as one line any terminal takes: bytes that are not UTF-8 (in names) and control
     characters escaped.

    >>> printable("a\nb\x1b[2Jc\u2028d")
    'a\\nb\\x1b[2Jc\\u2028d'
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


class Output(io.TextIOBase):
    """sys.stdout or sys.stderr as the console script writes them: once the reader goes away (a pipe
    into ``head``), the rest is dropped without a word, and the run goes on to its end."""

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
