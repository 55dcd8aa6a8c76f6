import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from support.s3 import moto_endpoint
from support.stack import has_module

# In CI the property tests draw the same examples every run, so that a run's verdict
# depends on the change, not on the draw; elsewhere each run draws new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The helpers are imported by the tests, or run as scripts in interpreters of their own (some of
# which hide this package from themselves on import): not collected.
collect_ignore = ["support"]

# Doctests that need an extra, by node id: without it they skip, with the reason.
DOCTESTS_NEED = {
    "README.md::README.md": ("zarr", "xarray"),
    "docs/getting-started.md::getting-started.md": ("zarr", "xarray"),
    "docs/guides/zarr-v2-filter.md::zarr-v2-filter.md": ("zarr", "xarray"),
    "docs/guides/zarr-v3-codec.md::zarr-v3-codec.md": ("zarr",),
    "docs/guides/v2-to-v3.md::v2-to-v3.md": ("zarr", "xarray"),
    **{
        f"numcodecs_bytes/to_v3/rules/arrays.py::numcodecs_bytes.to_v3.rules.arrays.{name}": (
            "zarr",
        )
        for name in ("v3_encoding", "array_document")
    },
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        missing = [
            name
            for name in DOCTESTS_NEED.get(item.nodeid, ())
            if importlib.util.find_spec(name) is None
        ]
        if missing:
            item.add_marker(
                pytest.mark.skip(reason=f"the example needs {', '.join(missing)} (the test extra)")
            )


def pytest_sessionstart(session: pytest.Session) -> None:
    # Each run starts with the codec's caches empty: a process that collects once and forks a
    # run per change (mutation testing) must not reuse what the unchanged code resolved.
    from numcodecs_bytes import data_types, swap

    swap._layout.cache_clear()
    data_types.unit_dtype.cache_clear()
    chunk_bytes = sys.modules.get("numcodecs_bytes.chunk_bytes")
    if chunk_bytes is not None:
        chunk_bytes.chunk_plan.cache_clear()


@pytest.fixture(scope="session")
def endpoint() -> Iterator[str]:
    """moto's S3 API server; the test is skipped, with the reason, where the interop extra is
    missing."""
    for needed in ("s3fs", "moto", "flask"):
        if not has_module(needed):
            pytest.skip(f"{needed} is not installed (the interop extra has it)")
    yield from moto_endpoint()


@pytest.fixture(scope="session")
def azurite() -> Iterator[str]:
    """Azurite's blob service (`support.azure`); skipped, with the reason, where obstore or
    azure-storage-blob (the interop extra) or Azurite itself is missing."""
    pytest.importorskip("obstore", reason="Azure needs obstore (the cloud extra)")
    pytest.importorskip("azure.storage.blob", reason="the Azure tests make containers with it")
    from support.azure import azurite_endpoint

    yield from azurite_endpoint()


@pytest.fixture
def proxy(endpoint: str) -> Iterator[Any]:
    """A fault-injecting proxy in front of moto's server (`support.s3.FaultProxy`): the tools talk
    to it."""
    from support.s3 import fault_proxy

    with fault_proxy(endpoint) as running:
        yield running
