"""One live line on stderr while a store tool runs, and the lines that must never mix into it."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress", "count", "say", "size"]


class Progress:
    """One live line on stderr while a store tool runs (folders walked of found, rate, time left),
    cleared at the end and before any other line; shown on a terminal, or when asked
    (``--progress``)."""

    def __init__(self, tool: str, enabled: bool, written: tuple[str, str]) -> None:
        self.tool, self.enabled, (self.noun, self.verb) = tool, enabled, written
        self.started = self.drawn_at = time.monotonic()
        self.done = self.found = self.written = 0
        self.visible = False
        self.sharded_from: float | None = None  # when packing shards began

    def update(self, done: int, found: int) -> None:
        self.done, self.found = done, found
        now = time.monotonic()
        if not self.enabled or now - self.drawn_at < 0.2:
            return
        rate = done / (now - self.started)
        line = f"{self.tool}: {done:,} of {found:,} folders, {rate:,.0f}/s"
        if 0 < done < found:
            line += f", about {duration((found - done) / rate)} left"
        self._draw(line, now)

    def shards(self, done: int, total: int, packed: int) -> None:
        """The sharding pass: shards packed of all, and the bytes they hold; the first call is made
        as packing begins, and the rate counts from there."""
        now = time.monotonic()
        if self.sharded_from is None:
            self.sharded_from = now
        if not self.enabled or now - self.drawn_at < 0.2 or now <= self.sharded_from:
            return
        line = (
            f"{self.tool}: {done:,} of {total:,} shards, {size(packed)} at "
            f"{size(packed / (now - self.sharded_from))}/s"
        )
        if 0 < done < total:
            line += f", about {duration((total - done) * (now - self.sharded_from) / done)} left"
        self._draw(line, now)

    def _draw(self, line: str, now: float) -> None:
        self.drawn_at = now
        sys.stderr.write(f"\r\033[K{line}")
        sys.stderr.flush()
        self.visible = True

    def clear(self) -> None:
        if self.visible:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.visible = False

    def stopped(self, why: str, code: int) -> int:
        """One line saying how far the run came (what it wrote, the folders it walked), and its exit
        code."""
        self.clear()
        done = (
            f"{count(self.written, self.noun)} {self.verb}, {self.done:,} of {self.found:,} "
            "folders walked"
        )
        print(f"{why}: {done}; run again to finish", file=sys.stderr)
        return code

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def size(nbytes: float) -> str:
    """Bytes as people read them: ``401 MB``, ``1.2 GB``.

    >>> size(401_000_000), size(1_234_000_000), size(12_000)
    ('401 MB', '1.2 GB', '12 kB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            shown = nbytes / scale
            return f"{shown:.1f} {unit}" if shown < 10 else f"{shown:,.0f} {unit}"
    return f"{nbytes:.0f} B"


def say(progress: Progress, line: str, error: bool = False) -> None:
    """A report line, never mixed into the progress line."""
    progress.clear()
    print(line, file=sys.stderr if error else sys.stdout, flush=True)


def count(number: int, noun: str) -> str:
    """A number of things, as a summary says it: ``1 file``, ``2,041 zarr.json``."""
    plural = noun if noun.endswith(".json") else f"{noun}s"
    return f"{number:,} {noun if number == 1 else plural}"
