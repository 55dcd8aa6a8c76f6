"""Store access for the store tools: local folders, S3 and Azure (through obstore) and fsspec URLs,
batched, concurrent, atomic writes.

The tools say which files to read and write, a batch at a time; store access
does it. `open_store` checks a location and returns a `Store`, whose
`Store.walk` is the walk both tools make. On an object store, or an fsspec
file system with async support (gcsfs, http), each batch runs with up to
``jobs`` requests in flight, and the walk lists the folders of one level
together (on S3 and Azure the whole store in one listing, where that pays). A local folder is worked
one file after another (a disk answers in microseconds: threads would not
pay).

What holds:

- Every write is whole or absent at every moment. A local file is written to
  a temporary file beside it and renamed (or linked, to create) into place;
  a batch's temporary files reach the disk together before the renames, and
  the renames together after (one ``syncfs`` each on Linux; one ``fsync`` per
  file and per folder elsewhere). An object store replaces an object in one PUT.
- Nothing is replaced or removed that changed since it was read. Locally a
  file is compared with what was read just before its rename, and a file to
  remove is first renamed aside, compared, and put back if it changed. On S3
  a replace or removal holds only while the object is the version the walk
  listed (``If-Match``), and a new file is written only where none exists
  (``If-None-Match``), where the server honours these (AWS S3, MinIO, moto);
  on Azure (through obstore) likewise, but a removal is checked just before;
  on other file systems the file is checked just before (a window of one
  request to a second writer).
- A write whose answer was lost (the server acted, then the retry was
  refused) is read back before it is called a conflict: a file that holds
  what was written was written.
- No request waits for ever: each has ``request_timeout`` seconds (retries
  included), and a run as a whole ``run_timeout`` if set. A metadata file that
  is not a regular file (a FIFO, a device) is refused, never read.
- One run at a time on a store (`Files.lock`), whatever folder of it each run
  was given: locally an advisory lock on the folder of its topmost Zarr node,
  on S3 and Azure a lock object there, held by a lease a run renews
  (`lease.Lease`).
- Bounded resources: packing a shard holds one source file open at a time and
  compares a block at a time, whatever the shard's size.

The modules, each with one job: `options` (`StoreOptions`), `files` (the
`Files` protocol and its values), `layout` (the Zarr layout facts),
`listing` (folders as listings find them), `requests` (a network store's
batches of requests), `per_path` (the batch methods made of one-path
requests), `lease` (the lock of an object store), `local`, `fsspec_files`,
`s3_objects` and `object_files` (the backends; `cloud_options`: Azure's options as
obstore takes them), `remote` (opening a URL), `store` (opening, locking
and walking a store); the chunk mover: `shard_format` (the shard format, what
packing is asked and answers), `local_shards` and `disk` (a local disk's
packing and durability), `object_packing` (packing through obstore),
`distributed` (packing as dask tasks).
"""

from __future__ import annotations

from .files import BATCH, ByteRange, Files, Folder, Removal, Replacement, digest
from .options import JOBS, REQUEST_TIMEOUT, StoreOptions
from .store import Store, StoreBatch, Walk, open_store

__all__ = [
    "BATCH",
    "JOBS",
    "REQUEST_TIMEOUT",
    "ByteRange",
    "Files",
    "Folder",
    "Removal",
    "Replacement",
    "Store",
    "StoreBatch",
    "StoreOptions",
    "Walk",
    "digest",
    "open_store",
]
