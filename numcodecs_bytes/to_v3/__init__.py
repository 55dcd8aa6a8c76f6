"""Zarr v2 stores as standard Zarr v3 stores: the run of ``numcodecs-bytes to-v3`` over a store.

Every node gets a ``zarr.json`` beside its v2 files, made by the rules of
`rules` (this codec's filter folded into the standard
``bytes`` serializer, xarray's dimension names and masks, strings, the rest
by zarr-python's own mapping); no chunk is written (with ``shard_size``, the
chunk files are packed into shards as they are: no chunk is decoded, see
`shard_pass`), and any v3 reader opens the result with no numcodecs-bytes
installed.

What `convert_store` guarantees:

- Every array v2 readers reach reads the same values as v3, or stays v2 and
  is reported. Before an array's ``zarr.json`` is written, its fill value and
  its stored chunks are read as v2 and as v3 with zarr-python's own codecs and
  compared exactly, until a chunk shows the mapping right (`check`,
  `sampling`; ``sample_check=False`` skips it): a sample in which a wrong mapping
  could not show (zeros, one value throughout) vouches for no chunk but its
  own. Arrays whose ``.zarray`` says the same are read by the same two
  pipelines: once one of them has shown the mapping right, the others are not
  read (they are read in rounds of one, two, four, ... arrays until one does).
  Arrays of objects are each checked.
- Chunks stored where the ``.zarray`` does not say (``0/0`` folders under a
  ``.zarray`` without ``dimension_separator``, as zarr before 2.8 wrote them)
  are found in the store and converted with the separator ``/``.
- A group's ``zarr.json`` is written only after every node below it
  converted, the root's last: zarr-python opens a node as v3 where it finds a
  ``zarr.json``, so a group over a member that failed stays v2 and v2 readers
  keep reaching that member. Folders that lead to nodes without being groups
  in v2 (zarr 2 reads through them) become groups.
- Consolidated metadata is kept whole. A group with a ``.zmetadata``, or with
  consolidated metadata in its ``zarr.json`` from an earlier run, gets its
  consolidated metadata brought up to date on every run, from every node
  below it. A node that its consolidated metadata lists but the walk did not
  find is read from its own files, or, where it has none (v2 readers reach it
  through ``.zmetadata`` alone), converted from its entry there; a v3 entry
  whose ``zarr.json`` is gone is left out, with a note.
- It never overwrites a ``zarr.json``: one that says what it would write is
  kept (so a rerun writes nothing and finishes an interrupted run); a
  consolidated group's may only get its consolidated metadata brought up to
  date; one older than its node's v2 metadata (a v2 writer since the
  conversion) is brought up to date, one newer (a v3 writer) is kept
  (`nodes.NodeIndex.settled`). Each ``zarr.json`` is created atomically, with the store lock, fsspec
  URLs, batches and time limits of `numcodecs_bytes.store`; on S3 only
  where none exists (``If-None-Match``), so of two runs at once each file is
  written by one and the other reports it.
- ``remove_v2_metadata`` removes the v2 metadata files only once every node
  converted, ``.zmetadata`` last, and only files this run read and that still
  hold what it read (a writer's change since is kept and reported); a group's
  only where every node below it lost its own (`removal`). No chunk, but with
  ``shard_size``: the chunk files of each array once it reads its shards.

What cannot be converted is reported with the reason and left as it is, and
the rest converts. Arrays that zarr-python releases older than the installed
one read wrong (`rules.ReadersNeed`) are converted and listed in the
report; ``oldest_zarr`` refuses them instead.
"""

from __future__ import annotations

from ..store.layout import V2_METADATA_FILES
from .report import ConversionReport, NodeResult
from .rules.arrays import UnconvertibleError, v3_encoding
from .run import convert_store

__all__ = [
    "V2_METADATA_FILES",
    "ConversionReport",
    "NodeResult",
    "UnconvertibleError",
    "convert_store",
    "v3_encoding",
]
