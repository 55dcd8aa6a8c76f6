"""Write the committed stores of xarray 2025.4 with zarr 2.18: run once in an environment that has
them.

``PYTHONPATH=tests python -m support.make_xarray_zarr218_fixtures`` (with ``zarr==2.18.*``,
``xarray==2025.4.*``, ``dask`` and this package installed) writes
``tests/fixtures/xarray_zarr218/``: every kind of store of
tests/support/xarray_stores.py, and ``stores.json`` (name -> [path, how it opens]).
zarr 2.18 and zarr 3 cannot share an environment, so the to-v3 tests read
these stores instead of writing them. Like every fixture, they never change
once committed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import xarray as xr
import zarr

from support.xarray_stores import write_stores

OUT = Path(__file__).parents[1] / "fixtures" / "xarray_zarr218"


def main() -> None:
    assert zarr.__version__.startswith("2.18"), zarr.__version__
    shutil.rmtree(OUT, ignore_errors=True)
    stores = write_stores(OUT)
    written = {
        name: [path.relative_to(OUT).as_posix(), how] for name, (path, how) in stores.items()
    }
    (OUT / "stores.json").write_text(json.dumps(written, indent=1) + "\n")
    (OUT / "README").write_text(
        f"Written by xarray {xr.__version__} with zarr {zarr.__version__}.\n"
    )


if __name__ == "__main__":
    main()
