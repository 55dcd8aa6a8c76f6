"""Work split over threads from a small size on, for tests of split work (no test allocates the
16 MiB the rule splits from)."""

from __future__ import annotations

import pytest

import numcodecs_bytes._threads
import numcodecs_bytes.codec

SMALL_SPLIT = 2 << 20
"""The split size the tests set: their large arrays are a few MiB."""


def split_from_small_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work from `SMALL_SPLIT` bytes on is split (where threads are allowed), as the rule splits
    work from `_threads.SPLIT_BYTES` on: the thread module's size and the codec's (its common case
    calls numpy below it)."""
    monkeypatch.setattr(numcodecs_bytes._threads, "SPLIT_BYTES", SMALL_SPLIT)
    monkeypatch.setattr(numcodecs_bytes.codec, "SPLIT_BYTES", SMALL_SPLIT)
