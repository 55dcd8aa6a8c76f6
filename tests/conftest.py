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

# The README's examples use the whole test extra; without it they skip, with the reason.
README_NEEDS = ("zarr", "xarray", "dask", "distributed")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [name for name in README_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        skip = pytest.mark.skip(reason=f"the README examples need {', '.join(missing)} (the test extra)")
        for item in items:
            if item.nodeid == "README.md::README.md":
                item.add_marker(skip)
