"""``python -m numcodecs_bytes``: the command line (`numcodecs_bytes.cli`)."""

from __future__ import annotations

from .cli import EXIT_CODES, data_type_table, main
from .cli import console as _console

__all__ = ["EXIT_CODES", "data_type_table", "main"]

if __name__ == "__main__":
    _console()
