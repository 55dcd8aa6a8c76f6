"""What the store tools' local file access does, recorded for the tests that count it."""

from __future__ import annotations

from typing import Any

import pytest

from numcodecs_bytes.store.local import LocalFiles


def chunks_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The chunks the check reads from a local store, in order (the store's own reads, recorded)."""
    read: list[str] = []
    original = LocalFiles.read_data

    def recorded(self: Any, paths: Any) -> Any:
        paths = list(paths)
        read.extend(paths)
        return original(self, paths)

    monkeypatch.setattr(LocalFiles, "read_data", recorded)
    return read
