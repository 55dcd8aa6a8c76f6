import importlib.util
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# In CI the property tests draw the same examples every run, so that a run's verdict
# depends on the change, not on the draw; elsewhere each run draws new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# tests/samples.py and tests/stack.py are shared by the test modules and the fixture generator.
sys.path.insert(0, str(Path(__file__).parent))

# Doctests that need an extra, by node id: without it they skip, with the reason.
DOCTESTS_NEED = {
    "README.md::README.md": ("zarr", "xarray"),
    "docs/getting-started.md::getting-started.md": ("zarr", "xarray"),
    "docs/guides/zarr-v2-filter.md::zarr-v2-filter.md": ("zarr", "xarray"),
    "docs/guides/zarr-v3-codec.md::zarr-v3-codec.md": ("zarr",),
    "docs/guides/v2-to-v3.md::v2-to-v3.md": ("zarr", "xarray"),
    "numcodecs_bytes/v3_metadata.py::numcodecs_bytes.v3_metadata.v3_encoding": ("zarr",),
    "numcodecs_bytes/v3_metadata.py::numcodecs_bytes.v3_metadata.array_document": ("zarr",),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        missing = [name for name in DOCTESTS_NEED.get(item.nodeid, ()) if importlib.util.find_spec(name) is None]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"the example needs {', '.join(missing)} (the test extra)"))


def pytest_sessionstart(session: pytest.Session) -> None:
    # Each run starts with the codec's caches empty: a process that collects once and forks a
    # run per change (mutation testing) must not reuse what the unchanged code resolved.
    from numcodecs_bytes import data_types, swap

    swap._layout.cache_clear()
    data_types.unit_dtype.cache_clear()
    zarr3 = sys.modules.get("numcodecs_bytes.zarr3")
    if zarr3 is not None:
        zarr3._chunk_plan.cache_clear()
