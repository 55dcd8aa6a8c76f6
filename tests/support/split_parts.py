"""Splits with the caller's part the larger, as when helpers were found to end late: for tests of
split work."""

from __future__ import annotations

import pytest

import numcodecs_bytes._threads


def callers_part_larger(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every split from here gives the caller 1.37 times an equal part."""
    bounds = numcodecs_bytes._threads._bounds
    monkeypatch.setattr(
        numcodecs_bytes._threads, "_bounds", lambda length, n, _: bounds(length, n, 1.37)
    )
