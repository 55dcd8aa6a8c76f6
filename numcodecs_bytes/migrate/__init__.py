"""Upgrade configs and stores written when the spec draft called this codec ``endian``.

`migrate_config` renames one codec config. `migrate_store` walks a Zarr store
(v2 and v3, groups, consolidated metadata, sharding) and rewrites each metadata
file that names the legacy codec, or whose v3 ``bytes`` codecs of multi-byte
data types state no ``endian`` (the draft's default, little, is written in),
atomically, touching nothing else: not the chunks, not the rest of the file's
text.

What `migrate_store` (and ``numcodecs-bytes migrate``) guarantees:

- Only codec names change, and missing ``endian`` keys are added (in the
  file's own style). A codec is ours by its `id` in v2 metadata and
  by its `name` in v3 metadata (`{"id": "zlib", "name": "endian"}` is a zlib
  codec and stays as it is; so do user attributes that say `endian`). In the
  text, only the name's own string token is replaced (located from the text's
  structure, in one pass); key order, indentation, line endings, number
  spellings, escapes and a UTF-8 byte order mark stay as they were. A name
  written with escapes (`"\\u0065ndian"`) becomes a plain `"bytes"`. Chunks are
  never read.
- Local folders: atomic replace. Each file is written to a temporary file in
  the same folder, given the original's permission bits, owner and group, and
  renamed over the original once a batch of them is on the disk. A run that is
  killed leaves every file either old or new; the next run finishes the job
  and removes the temporary files of dead runs. One run at a time per store
  (an advisory lock on the folder of the store's topmost Zarr node, so that a
  run given a folder below or above it is excluded too; released when the
  process ends): a second run is refused and touches nothing. Just before each rename the file
  is compared with what was read: if someone else changed it meanwhile, it is
  left as it is and reported.
- Object stores (`s3://bucket/store`, `az://container/store`, or any fsspec
  URL): an object is replaced in one PUT, so readers see the old or the new
  object, never a mix; there is no rename. On S3 and Azure one run at a
  time: a lock object beside the topmost node's metadata, created only where
  none exists and renewed while the run lasts (`store.lease.Lease`);
  elsewhere no lock. Folders are listed a
  level at a time (on S3 the whole store in one listing, where that pays) and
  files read and written in batches, up to `jobs` requests in flight. On S3 a
  PUT holds only while the object is the version read (`If-Match`), so where
  no lock can be had (a run that lost it) two runs at once change each file
  once, and a PUT whose answer was lost is read back, not reported as a
  conflict; on other file systems the object is read again just before the
  write (two writers racing in between are not excluded). Credentials come
  from the usual environment (`AWS_*` variables, `~/.aws`); another endpoint
  from `storage_options` (`--storage-option endpoint_url=...`) or
  `FSSPEC_S3_ENDPOINT_URL`. Each request has `request_timeout` seconds, the
  run `run_timeout` if given. Tested on an S3 API server (moto) and on Azurite,
  through obstore, behind a proxy that injects faults.
- Backups (`backup=True`): each original is kept beside it as `<name>.bak`,
  written before the file is replaced. A `.bak` that exists already is never
  overwritten: where it holds exactly the original (a run killed between the
  backup and the replace), the rerun takes it as its own and goes on; where
  it holds anything else, the file is reported and left as it is.
- Nothing is skipped in silence. A file that cannot be migrated (not JSON,
  not UTF-8, not a regular file, not writable, a `.bak` that holds something
  else) and a folder that is not visited (unreadable; a symbolic link, which
  is never followed, and a linked metadata file, which is never replaced by a
  copy) are named with the reason; everything else is migrated. A
  hard-linked file is reported and left as it is (a replace would split it
  from its other names). Only the files' owner (or root) can migrate them: a
  group member who does not own a file is told that its owner could not be
  kept, and the file stays as it is. The command line's output and exit codes
  are those of `numcodecs_bytes.__main__` (``numcodecs-bytes migrate --help``).

Examples
--------
>>> import json, tempfile
>>> from pathlib import Path
>>> from numcodecs_bytes.__main__ import main
>>> store = Path(tempfile.mkdtemp(), "old.zarr")
>>> store.mkdir()
>>> _ = (store / "zarr.json").write_text(json.dumps({
...     "zarr_format": 3, "node_type": "array", "shape": [3], "data_type": "int16",
...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
...     "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
...     "codecs": [{"name": "endian", "configuration": {"endian": "big"}}],
... }, indent=2))
>>> main(["migrate", str(store), "--verbose"])
changed zarr.json:
  codecs[0]: 'endian' -> 'bytes'
1 file changed (1 codec) in 1 node (... s)
0
>>> main(["migrate", str(store)])  # a rerun: nothing left to do
nothing to do: no legacy codec in 1 node (... s)
0
>>> json.loads((store / "zarr.json").read_text())["codecs"]
[{'name': 'bytes', 'configuration': {'endian': 'big'}}]
"""

from __future__ import annotations

from .rules import (
    ENDIAN_ADDED,
    LEGACY_NAME,
    METADATA_FILES,
    RENAME,
    Change,
    is_legacy_config,
    legacy_codecs,
    migrate_config,
    migrate_metadata,
    missing_endians,
    rewrite_text,
)
from .run import MigrationReport, migrate_store

__all__ = [
    "ENDIAN_ADDED",
    "LEGACY_NAME",
    "METADATA_FILES",
    "RENAME",
    "Change",
    "MigrationReport",
    "is_legacy_config",
    "legacy_codecs",
    "migrate_config",
    "migrate_metadata",
    "migrate_store",
    "missing_endians",
    "rewrite_text",
]
