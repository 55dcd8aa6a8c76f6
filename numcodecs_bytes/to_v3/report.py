"""What `convert_store` tells its caller: each node converted, and what could not be."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .rules.arrays import ReadersNeed

__all__ = ["ConversionReport", "NodeResult"]


@dataclass(frozen=True)
class NodeResult:
    """One node converted: its path in the store and what was done."""

    path: str  # relative to the store, "" for the root
    kind: str  # "array" or "group"
    # "written"; "kept": its zarr.json said this already; "updated": its consolidated metadata
    action: str
    folded: str | None = None  # e.g. "filters[0] 'bytes' (endian big)", where the filter was folded
    implicit: bool = False  # a folder without v2 metadata that leads to nodes: made a group
    # its zarr.json
    document: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    # a node with no v2 metadata: Zarr v3 already (written so, or converted and removed)
    v3_only: bool = False


@dataclass
class ConversionReport:
    """What `convert_store` did (or, in a dry run, would do)."""

    converted: list[NodeResult] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (node or file, reason)
    removed: list[str] = field(default_factory=list)  # v2 metadata files removed
    # (node, zarr's warning or what was assumed)
    notes: list[tuple[str, str]] = field(default_factory=list)
    # arrays older zarr-python reads wrong
    readers: list[tuple[str, ReadersNeed]] = field(default_factory=list)
    # the root's zarr.json holds every node's metadata (written, updated or kept)
    consolidated: bool = False
    leftovers_removed: list[str] = field(default_factory=list)  # temporary files of killed runs
    # arrays whose zarr.json reads their shards (new ones)
    sharded: list[str] = field(default_factory=list)
    # those of them sharded before, in other shards
    resharded: list[str] = field(default_factory=list)
    shards: int = 0  # the shards of the arrays sharded (written, or found whole: a killed run's)
    shards_to_write: int = 0  # in a dry run: shard files the run would write
    chunks_packed: int = 0  # chunks those shards hold
    shard_bytes: int = 0  # the bytes of those chunks
    # of those, the bytes of v2 chunk files kept beside their shards (for v2 readers)
    kept_chunk_bytes: int = 0
    chunks_removed: int = 0  # v2 chunk files removed, their shards holding them (or to remove)
    # files arrays read before their switch to new shards (their old shards, or the chunk files of
    # arrays without v2 metadata) removed (or to remove)
    replaced_removed: int = 0
    copied_bytes: int = 0  # of shard_bytes, those the store copied itself (S3's UploadPartCopy)
    # why the store refused to copy shards' parts itself (they were packed through the client)
    server_copy_refused: str | None = None
    # arrays whose v2 files a killed run was removing
    finished_removals: list[str] = field(default_factory=list)
    # OME-Zarr 0.4 groups whose zarr.json this run wrote as 0.5: (path, "image", "label image",
    # "labels", "plate", "well", "collection" or "series")
    ome: list[tuple[str, str]] = field(default_factory=list)

    def add(self, part: ConversionReport) -> None:
        """``part`` (what one room of the run found) taken in: its lists after these, its counts
        added, its flags or'ed; a reason given once kept."""
        for entry in fields(self):
            mine, theirs = getattr(self, entry.name), getattr(part, entry.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, bool):
                setattr(self, entry.name, mine or theirs)
            elif isinstance(mine, int):
                setattr(self, entry.name, mine + theirs)
            elif mine is None:
                setattr(self, entry.name, theirs)

    @property
    def written(self) -> list[NodeResult]:
        """The nodes whose ``zarr.json`` this run wrote or brought up to date."""
        return [node for node in self.converted if node.action != "kept"]
