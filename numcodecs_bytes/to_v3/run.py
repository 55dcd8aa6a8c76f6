"""The run of ``numcodecs-bytes to-v3`` over a store, its passes in sequence: the metadata pass
(`metadata_pass.batches`: the walk's batches read, checked and written; then the groups,
`metadata_pass.group_writes`), the sharding pass (`sharding_pass`), the removal of v2 metadata
(`removal`). Each returns what it found; the run alone records it (`_Run.record`). The rules are
`rules`; store access does the reading and writing (`numcodecs_bytes.store`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..problems import RefusedError
from ..store import Store, StoreBatch, StoreOptions, Walk, open_store
from ..store.distributed import pack_on_cluster
from ..store.shard_format import Shard
from ..zarr_versions import version_numbers
from ._zarr_api import zarr_api
from .findings import Findings
from .metadata_pass.batches import MetadataOptions, MetadataPass
from .metadata_pass.group_writes import make_ome_05, write_groups
from .metadata_pass.zarr_json import ZarrJsonWriter
from .nodes import Kept, NodeIndex, RunState
from .removal.removals import Removals
from .removal.v2_listings import listing_only_v2
from .report import ConversionReport, NodeResult
from .rules.documents import existing_document, parents
from .sharding_pass.rounds import Packer, Sharding, ShardOptions, ShardPass

__all__ = ["convert_store"]


def convert_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    remove_v2_metadata: bool = False,
    sample_check: bool = True,
    oldest_zarr: str | None = None,
    on_node: Callable[[NodeResult], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    store_options: StoreOptions | None = None,
    shard_size: int | None = None,
    shard_shapes: Mapping[str, Sequence[int]] | None = None,
    client: Any = None,
    on_shards: Callable[[int, int, int], None] | None = None,
    on_removed: Callable[[str], None] | None = None,
    verify: bool | None = None,
) -> ConversionReport:
    """Write a Zarr v3 ``zarr.json`` for every node of a Zarr v2 store, folding the bytes filter.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would be written; write nothing (the checks still run).
    remove_v2_metadata : bool
        Once every node has its ``zarr.json``, remove the ``.zarray``,
        ``.zgroup``, ``.zattrs`` and ``.zmetadata`` files this run read and
        that still hold what it read (a group's only where no node below it
        keeps its own); with ``shard_size``, also each array's chunk files
        once it reads its shards. By default they stay, so v2 readers keep
        working.
    sample_check : bool
        Before writing an array's ``zarr.json``, read the fill value and its
        stored chunks (until one shows the mapping right) both as v2 and
        through the new metadata as v3 with zarr-python's own codecs, and
        convert only what reads the same (see `numcodecs_bytes.to_v3`). False
        turns this off; the checks of what was packed into shards always run.
    oldest_zarr : str, optional
        The oldest zarr-python release the store's readers use, e.g. ``"3.1"``:
        arrays that release reads wrong are refused (left as v2, reported).
        By default they are converted and listed in ``ConversionReport.readers``.
    on_node : callable, optional
        Called with each node converted, as it goes.
    on_progress : callable, optional
        Called after each batch of folders with (folders walked, folders found so far).
    store_options : StoreOptions, optional
        How the store is reached: requests in flight on an object store,
        fsspec's options for a URL, time limits per request (a node whose
        request takes longer is reported) and per run.
    shard_size : int, optional
        Shard every converted array of more than one chunk: its v2 chunk
        files, byte for byte, become the inner chunks of shards that hold as
        many whole chunks as fit in ``shard_size`` bytes of uncompressed data
        (`sharding`; no chunk is decoded). Arrays of strings of any length
        stay unsharded, with a note.
    shard_shapes : mapping, optional
        A shard shape for some arrays, by path in the store (a multiple of
        their chunks; ``sub/a``, also spelled ``/sub/a`` or ``sub/a/``), in
        place of the one ``shard_size`` gives.
    client : distributed.Client, optional
        Pack the shards as tasks on this dask cluster (every worker must reach
        the store by the same location); the rest of the run stays here.
    on_shards : callable, optional
        Called as shards are packed, with (shards done, shards to do, bytes packed).
    on_removed : callable, optional
        Called with the path of each data file removed (in a dry run: each the
        run would remove): chunk files whose shards hold them, and what arrays
        read before their new shards (their old shards). The v2 metadata files
        removed are listed in the report.
    verify : bool, optional
        Deprecated: ``sample_check``. It named the sample check only, while
        the checks of what was packed (`to_v3.sharding_pass.verify`) always run; it still
        works, with a `DeprecationWarning`, until 0.2.

    Returns
    -------
    ConversionReport
        What cannot be converted (see `numcodecs_bytes.to_v3`) is listed with
        the reason and left as it is, and so are the groups above it; the rest
        is converted.

    Raises
    ------
    TypeError
        For ``verify`` and ``sample_check`` both given, and different.
    ValueError
        For a ``shard_size`` below 1, an ``oldest_zarr`` that is no version,
        or ``shard_shapes`` naming a path that is no array of the store
        (before anything is written).
    problems.NotAStoreError
        If ``location`` is not a folder holding Zarr metadata, or cannot be reached.
    problems.RefusedError
        With ``remove_v2_metadata``, where ``location`` lies below a Zarr v2
        group (it would be Zarr v3 inside a v2 hierarchy); before anything is
        written.
    problems.StoreBusyError
        If another run is working on the same store (given any folder of it),
        or, on S3, this run lost the store's lock (paused longer than its
        lease): it stops before its next write.
    problems.RunTimeoutError
        If the run's time limit passed (what was written is whole; a rerun finishes).
    ImportError
        If zarr-python 3 is not installed.
    """
    zarr_api()  # before touching the store: a missing zarr is a usage error
    oldest = None if oldest_zarr is None else version_numbers(oldest_zarr)
    if oldest is not None and not oldest:
        raise ValueError(f"oldest_zarr must be a version such as '3.1', got {oldest_zarr!r}")
    if shard_size is not None and (
        isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1
    ):
        raise ValueError(
            f"shard_size must be a whole number of bytes, 1 or more, got {shard_size!r}"
        )
    store = open_store(location, store_options)
    below_v2 = _v2_group_above(store)
    if below_v2 is not None and remove_v2_metadata:
        raise RefusedError(
            f"{os.fspath(location)} lies below the Zarr v2 group {below_v2}: remove_v2_metadata "
            "would leave it Zarr v3 inside a v2 hierarchy (v2 readers of the store no longer find "
            "it, v3 readers cannot open the store's root); convert the whole store instead, from "
            f"{store.top}, with remove_v2_metadata"
        )
    shapes = _shard_shapes(store, shard_shapes or {})
    options = _Options(
        dry_run,
        MetadataOptions(
            _sample_check(sample_check, verify),
            oldest,
            shard_size is not None or bool(shapes),
            remove_v2_metadata,
        ),
        on_node,
        on_removed,
    )
    with store.locked(dry_run):
        walk = store.walk(dry_run=dry_run, on_progress=on_progress)
        run = _Run(store, walk, options)
        if below_v2 is not None:
            found = Findings()
            found.note(
                ".",
                f"it lies below the Zarr v2 group {below_v2}: Zarr v3 readers open it at its own "
                f"path only, until the whole store ({store.top}) is converted",
            )
            run.record(found)
        for batch in walk:
            run.take(batch)
        run.take_nodes_the_walk_missed()
        run.write_groups()
        removes_v2 = remove_v2_metadata and not run.report.failures
        pack = _packer(store, client, location, store_options)
        run.shard(ShardOptions(shard_size, shapes, pack, on_shards), removes_v2)
        if removes_v2:
            run.remove_v2_metadata()
        return run.report


def _v2_group_above(store: Store) -> str | None:
    """The nearest folder above the store's root that holds Zarr v2 node metadata and no
    ``zarr.json`` (a v2 group, or a folder an earlier run did not convert); None where there is
    none."""
    above = store.above()
    if not above:
        return None
    names = (".zgroup", ".zarray", ".zmetadata", "zarr.json")
    read = store.files.read(f"{folder}/{name}" for folder in above for name in names)
    for folder in above:
        found = {name for name in names if isinstance(read[f"{folder}/{name}"], bytes)}
        if found and "zarr.json" not in found:
            return folder
    return None


def _shard_shapes(store: Store, shapes: Mapping[str, Sequence[int]]) -> dict[str, Sequence[int]]:
    """``shard_shapes`` by the path of each array as the run names it (``/sub/a``, ``sub/a/`` and
    ``./sub/a`` are ``sub/a``); a ValueError where one names no array of the store (checked before
    the run writes)."""
    by_path = {}
    for key, shape in shapes.items():
        path = "/".join(
            part for part in str(key).replace("\\", "/").split("/") if part not in ("", ".")
        )
        by_path[path] = shape
    files = [store.at(path).file(name) for path in by_path for name in (".zarray", "zarr.json")]
    read = store.files.read(files)
    for path in by_path:
        at = store.at(path)
        zarray, document = read[at.file(".zarray")], read[at.file("zarr.json")]
        found = existing_document(document) if isinstance(document, bytes) else None
        if not isinstance(zarray, bytes) and (found is None or found.get("node_type") != "array"):
            raise ValueError(f"shard_shapes names {path or '.'!r}, which is no array of the store")
    return by_path


def _packer(
    store: Store, client: Any, location: str | os.PathLike[str], options: StoreOptions | None
) -> Packer:
    """What packs the shards: the store itself, or tasks on ``client``'s dask cluster."""
    if client is None:
        return store.packing.pack

    def pack(shards: list[Shard], on_progress: Callable[[int, int], None]) -> dict[str, Any]:
        return pack_on_cluster(client, location, options or StoreOptions(), shards, on_progress)

    return pack


def _sample_check(sample_check: bool, verify: bool | None) -> bool:
    """``sample_check``, or the deprecated ``verify`` where given (with its warning)."""
    if verify is None:
        return sample_check
    warnings.warn(
        "convert_store(verify=) is now sample_check=: it turns off the sample read as v2 and as "
        "v3 only (the checks of what was packed always run); verify= goes in 0.2",
        DeprecationWarning,
        stacklevel=3,
    )
    if not sample_check and verify:
        raise TypeError(f"verify={verify} and sample_check={sample_check} disagree: give one")
    return verify


class _Options(NamedTuple):
    dry_run: bool
    metadata: MetadataOptions
    on_node: Callable[[NodeResult], None] | None
    on_removed: Callable[[str], None] | None


class _Run:
    """One run of `convert_store` over a store: it takes the walk's batches, and writes what they
    convert to. Its rooms return what they found (`Findings`); the run alone records it (`record`):
    its report, and the nodes that stay as they are."""

    def __init__(self, store: Store, walk: Walk, options: _Options) -> None:
        self.store, self.options = store, options
        self.report = ConversionReport()
        self.index = NodeIndex()
        self.state = RunState(store, self.index, options.dry_run, options.on_removed)
        self.zarr_json = ZarrJsonWriter(self.state)
        self.metadata = MetadataPass(self.state, walk, options.metadata, self.zarr_json)
        self.removal = Removals(self.state)

    # -- the metadata pass -------------------------------------------------------------------------

    def take(self, batch: StoreBatch) -> None:
        """One batch of the walk (`MetadataPass.take`)."""
        self.record(self.metadata.take(batch))

    def take_nodes_the_walk_missed(self) -> None:
        """The nodes only a consolidated metadata lists (`MetadataPass`)."""
        self.record(self.metadata.take_nodes_the_walk_missed())

    # -- writing -----------------------------------------------------------------------------------

    def write_groups(self) -> None:
        """The OME-Zarr groups made 0.5 where they hold together (`make_ome_05`), then every
        group's ``zarr.json`` (`write_groups`)."""
        made_ome, found = make_ome_05(self.index)
        self.record(found)
        self.record(write_groups(self.index, self.store.at, self.zarr_json))
        written = {node.path for node in self.report.written}
        self.report.ome = [(path, kind) for path, kind in made_ome.items() if path in written]

    def shard(self, options: ShardOptions, removes_v2: bool) -> None:
        """The sharding pass (`sharding_pass.rounds`) over the arrays it takes."""
        if self.metadata.to_shard:
            sharding = Sharding(self.state, options, self.zarr_json, self.removal, removes_v2)
            self.record(ShardPass(sharding).run(list(self.metadata.to_shard.values())))

    def remove_v2_metadata(self) -> None:
        """The v2 metadata of every node whose v2 files are still there, where nothing below it
        keeps its own (it could not be converted or sharded): arrays, then groups, ``.zmetadata``
        last. A group that keeps its v2 metadata then has its ``.zmetadata`` list only the nodes
        that are still v2."""
        going, keeping = _v2_metadata_going(self.index, self.removal.removed)
        self.record(self.removal.metadata((node.at, node.digests) for node in going))
        self.record(listing_only_v2(self.state, keeping, self.removal.removed))

    def record(self, found: Findings) -> None:
        """What a room found, recorded: the run's one writer of its outcome (the report, and the
        nodes that stay as they are); each node converted told to the caller."""
        self.report.add(found.report)
        self.index.failed |= found.failed
        if self.options.on_node is not None:
            for result in found.report.converted:
                self.options.on_node(result)


def _v2_metadata_going(index: NodeIndex, removed: set[str]) -> tuple[list[Kept], list[str]]:
    """The nodes whose v2 metadata goes (arrays first: v2 readers find every group to the end), and
    the groups that keep a ``.zmetadata`` (a node below them keeps its v2 metadata)."""
    keeping = index.failed | {parent for path in index.failed for parent in parents(path)}
    going = [n for path, n in index.nodes.items() if path not in removed | keeping and n.digests]
    going.sort(key=lambda node: node.kind == "group")
    nodes = index.nodes
    consolidating = [p for p in keeping if p in nodes and ".zmetadata" in nodes[p].digests]
    return going, consolidating
