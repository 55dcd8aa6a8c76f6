import importlib.util
import sys
from pathlib import Path

import pytest

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
