"""Write tests/fixtures/nczarr: Zarr v2 stores as netCDF-C's NCZarr writes them (run by hand; needs
netCDF4).

``PYTHONPATH=tests python -m support.make_nczarr_fixtures`` (with ``pip install netCDF4``, whose
wheels carry netCDF-C with NCZarr) writes:

- ``nczarr.zarr``: ``mode=nczarr,file``, as netCDF-C 4.8.2 and later write
  it: ``_ARRAY_DIMENSIONS`` for xarray, NCZarr's own ``_nczarr_array`` and
  ``_nczarr_attr`` attributes beside them, a ``_FillValue`` attribute as a
  JSON number beside the fill value;
- ``nczarr_v1.zarr``: the same data as netCDF-C 4.8.0 and 4.8.1 (and
  ``noxarray``) named dimensions: only in ``.zarray`` under
  ``_NCZARR_ARRAY.dimrefs`` (what xarray reads where there is no
  ``_ARRAY_DIMENSIONS``), with ``_NCZARR_GROUP``/``_NCZARR_SUPERBLOCK`` in
  ``.zgroup`` and ``_NCZARR_ATTR`` in ``.zattrs``. Made from a
  ``mode=nczarr,noxarray`` store by adding those keys (the netCDF4 wheels
  carry a netCDF-C that writes the later format only).

The committed stores come from netCDF4 1.7.5 with netCDF-C 4.10.1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import netCDF4
import numpy as np

HERE = Path(__file__).parents[1] / "fixtures" / "nczarr"


def write(path: Path, mode: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    ds = netCDF4.Dataset(f"file://{path}#mode={mode},file", "w")
    ds.title = "written by netCDF-C"
    ds.createDimension("time", 3)
    ds.createDimension("x", 4)
    temp = ds.createVariable("temp", "f4", ("time", "x"), fill_value=-9999.0)
    temp.units = "K"
    temp[:] = np.linspace(270, 281, 12, dtype="f4").reshape(3, 4)
    temp[0, 0] = -9999.0  # masked: NaN in xarray
    count = ds.createVariable("count", "i2", ("x",))
    count[:] = [1, 2, 3, 4]
    x = ds.createVariable("x", "i4", ("x",))
    x[:] = [10, 20, 30, 40]
    ds.close()


def as_nczarr_v1(path: Path) -> None:
    """A ``noxarray`` store given the keys NCZarr 1.0 (netCDF-C 4.8.0, 4.8.1) wrote."""
    variables = {"temp": ["/time", "/x"], "count": ["/x"], "x": ["/x"]}
    group = json.loads((path / ".zgroup").read_text())
    group["_NCZARR_SUPERBLOCK"] = {"version": "1.0.0"}
    group["_NCZARR_GROUP"] = {"dims": {"time": 3, "x": 4}, "vars": sorted(variables), "groups": []}
    (path / ".zgroup").write_text(json.dumps(group))
    for name, dimrefs in variables.items():
        zarray = json.loads((path / name / ".zarray").read_text())
        zarray["_NCZARR_ARRAY"] = {"dimrefs": dimrefs, "storage": "chunked"}
        (path / name / ".zarray").write_text(json.dumps(zarray))
        zattrs = json.loads((path / name / ".zattrs").read_text())
        zattrs["_NCZARR_ATTR"] = {
            "types": {key: "<f4" if key == "_FillValue" else ">S1" for key in zattrs}
        }
        (path / name / ".zattrs").write_text(json.dumps(zattrs))


if __name__ == "__main__":
    HERE.mkdir(parents=True, exist_ok=True)
    write(HERE / "nczarr.zarr", "nczarr")
    write(HERE / "nczarr_v1.zarr", "nczarr,noxarray")
    as_nczarr_v1(HERE / "nczarr_v1.zarr")
    (HERE / "README").write_text(
        f"Written by tests/make_nczarr_fixtures.py with netCDF4 {netCDF4.__version__}, "
        f"netCDF-C {netCDF4.__netcdf4libversion__}.\n"
    )
