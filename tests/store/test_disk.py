"""store.disk: the names of temporary files, made in one place and read back in one place."""

from __future__ import annotations

import os
from pathlib import Path

from numcodecs_bytes.store.disk import temporary_beside, temporary_name
from numcodecs_bytes.store.files import TEMP_SUFFIX, made_for


def test_a_temporary_file_names_the_file_it_was_made_beside(tmp_path: Path) -> None:
    for name in ("0.0", ".zarray", "c.1.2", "zarr.json.bak", "a.b.c"):
        target = str(tmp_path / name)
        descriptor, temporary = temporary_beside(target)
        os.close(descriptor)
        assert os.path.dirname(temporary) == str(tmp_path)
        assert made_for(os.path.basename(temporary)) == name
        aside = temporary_name(target, os.urandom(6).hex())
        assert os.path.dirname(aside) == str(tmp_path) and made_for(os.path.basename(aside)) == name


def test_other_names_are_no_temporary_files() -> None:
    for entry in (
        "0.0",
        ".zarray",
        ".zattrs",
        "x" + TEMP_SUFFIX,
        "." + TEMP_SUFFIX,
        ".0.0",
        ".0.0.bak",
    ):
        assert made_for(entry) is None, entry
