"""Splits with the caller's part the larger, as when helpers were found to start late: for tests of
split work."""

from __future__ import annotations

import pytest

import numcodecs_bytes._threads


def callers_part_larger(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every split from here sets its parts as for helpers that start 0.37 s late on work of 1 s
    alone."""
    bounds = numcodecs_bytes._threads._bounds
    monkeypatch.setattr(
        numcodecs_bytes._threads, "_bounds", lambda length, n, _, __: bounds(length, n, 1.0, 0.37)
    )
