"""The tools' rules: documents in, documents out, with no store and no I/O (a test holds the whole
package to that). v2 metadata to v3 (`arrays`, with xarray's conventions in `xarray`), OME-Zarr
0.4 to 0.5 (`ome`, `ome_validation`), the shards an array gets and the plan for them (`sharding`,
`plan`), `zarr.json` as written and what a consolidated metadata lists (`documents`,
`consolidations`).

The rules' public names are here too, as the reference documents them.
"""

from .arrays import (
    Conversion,
    ReadersNeed,
    UnconvertibleError,
    array_document,
    group_document,
    v3_encoding,
)

__all__ = [
    "Conversion",
    "ReadersNeed",
    "UnconvertibleError",
    "array_document",
    "group_document",
    "v3_encoding",
]
