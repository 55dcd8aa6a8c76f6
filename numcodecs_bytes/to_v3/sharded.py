"""Sharding on conversion, the run: converted arrays' chunk files packed into shards, checked, switched to.

After the metadata run (`run`), each array to shard has a ``zarr.json`` that
reads its v2 chunk files (checked). A batch of such arrays at a time:

1. the store packs their shards from the chunk files, byte for byte
   (`store.chunks`: each shard whole or not at all, read back and compared
   with its sources), on this machine or as dask tasks;
2. one chunk of each array is read through zarr-python's own sharding codec
   and compared with its v2 read; where the inner codecs are of fixed size,
   every chunk's size is checked against its shape;
3. the chunk files must be as they were read: an array whose chunk changed
   meanwhile is reported and keeps reading its chunk files;
4. each array's ``zarr.json`` is replaced by its sharded document (only if it
   is still what this run wrote or read), and the consolidated metadata above
   it brought up to date;
5. where the run removes the v2 metadata, the arrays' v2 metadata goes, then
   their chunk files, each only if it is as it was read. (Until then v2
   readers read them, and a killed run's rerun knows them for its own.)

At every moment each array reads the same values through its ``zarr.json``
and through any consolidated metadata. On disk, a removing run holds at
most one batch of shards beside the chunk files they replace: the largest
array's, or several smaller arrays' up to that size (a thousand shards at
most).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

from ..problems import reason
from ..store import BATCH, ByteRange, Removal, Replacement, Store, digest
from ..store.chunks import INDEX_ENTRY, Packed, Shard
from ..store.layout import REMOVING_V2, chunk_indices, chunk_key
from .check import check_chunk
from .documents import encoded, parents
from .groups import consolidated
from .nodes import NodeIndex
from .report import ConversionReport
from .sharding import ShardLayout, ShardPlan, shard_layout, sharded_document, shards_of

__all__ = ["ShardWork", "Sharding"]


class ShardWork(NamedTuple):
    """An array the run shards, as the metadata run left it."""

    path: str
    folder: str
    zarray: dict[str, Any]  # its v2 metadata as v2 readers take it (the layout found in the store)
    document: dict[str, Any]  # its converted document, unsharded
    current: bytes  # its zarr.json as it is in the store now
    chunk_names: tuple[str, ...] | None  # its folder's files (None: not listed)
    sharded: ShardLayout | None  # where its zarr.json is sharded already (an earlier run's)
    removing_v2: bool = False  # a killed run was removing its v2 files: only that is left to do


class _Array(NamedTuple):
    work: ShardWork
    layout: ShardLayout
    plans: list[ShardPlan]
    shards: list[Shard]


class Sharding:
    """The sharding pass of one run (see the module's docstring)."""

    def __init__(
        self,
        store: Store,
        index: NodeIndex,
        report: ConversionReport,
        *,
        shard_size: int | None,
        shard_shapes: Mapping[str, Sequence[int]],
        dry_run: bool,
        removing: bool,
        current: dict[str, bytes],
        pack: Callable[[list[Shard]], dict[str, Packed | Exception]],
        remove_v2_metadata: Callable[[Collection[str]], set[str]],
        on_shards: Callable[[int, int, int], None] | None,
    ) -> None:
        self.store, self.index, self.report = store, index, report
        self.shard_size, self.shard_shapes, self.dry_run, self.removing = shard_size, shard_shapes, dry_run, removing
        self.current, self.pack, self.on_shards = current, pack, on_shards
        self.remove_v2_metadata = remove_v2_metadata  # of the nodes at these paths; the nodes where it failed
        self.done = self.total = 0

    def run(self, works: list[ShardWork]) -> None:
        self._finish_removals([work for work in works if work.removing_v2])
        works = [work for work in works if not work.removing_v2]
        planned = {work.path: self._planned(work) for work in works}
        arrays = [array for array in planned.values() if array is not None]
        self.total = sum(len(array.shards) for array in arrays)
        self.report.shards_to_write += 0 if not self.dry_run else self.total
        if self.removing:  # those with nothing to shard are done (not those that failed: a rerun shards them)
            self.remove_v2_metadata([path for path, array in planned.items()
                                     if (array is None or self.dry_run) and path not in self.index.failed])  # fmt: skip
        if self.dry_run:
            return
        batch: list[_Array] = []
        largest = 0
        for array in arrays:
            batch.append(array)
            size = len(array.shards)
            largest = max(largest, size)
            if sum(len(a.shards) for a in batch) >= min(BATCH, max(largest, 1)) or array is arrays[-1]:
                self._shard(batch)
                batch = []

    # -- what to write -----------------------------------------------------------------------------------------

    def _planned(self, work: ShardWork) -> _Array | None:
        """An array's shards, by its layout: the one its zarr.json has, or the one asked for."""
        layout = work.sharded
        if layout is None:
            try:
                layout, note = shard_layout(
                    work.document, work.zarray, self.shard_size, self.shard_shapes.get(work.path)
                )
            except Exception as exc:
                self.index.fail(work.path, reason(exc))
                return None
            if note is not None:
                self.report.notes.append((work.path or ".", note))
            if layout is None:
                return None
        plans = shards_of(work.zarray["shape"], layout)
        stored = set(chunk_indices(work.zarray, work.chunk_names)) if work.chunk_names is not None else None

        def source(index: tuple[int, ...] | None) -> str | None:
            if index is None or (stored is not None and index not in stored):
                return None
            return f"{work.folder}/{chunk_key(work.zarray, index)}"

        shards = [
            Shard(
                f"{work.folder}/{plan.key}", tuple(source(index) for index in plan.inner), replace=work.sharded is None
            )
            for plan in plans
        ]
        return _Array(work, layout, plans, shards)

    # -- one batch ---------------------------------------------------------------------------------------------

    def _shard(self, batch: list[_Array]) -> None:
        packed: dict[str, Packed | Exception] = {}
        shards = [shard for array in batch for shard in array.shards]
        for start in range(0, len(shards), BATCH):
            part = shards[start : start + BATCH]
            packed |= self.pack(part)
            self.done += len(part)
            if self.on_shards is not None:
                self.on_shards(self.done, self.total, sum(_bytes(p) for p in packed.values()))
        good = [array for array in batch if self._checked(array, packed)]
        versions = self.store.files.versions(
            source for array in good for shard in array.shards for source in shard.sources if source is not None
        )
        unchanged = [array for array in good if self._unchanged(array, packed, versions)]
        switched = self._switched(unchanged)
        for array in unchanged:
            if array.work.path in switched and array.work.sharded is None:  # counted once: by the run that switched
                results = [result for shard in array.shards if isinstance(result := packed[shard.path], Packed)]
                self.report.shards += sum(any(size is not None for size in result.sizes) for result in results)
                self.report.chunks_packed += sum(size is not None for result in results for size in result.sizes)
                self.report.shard_bytes += sum(_bytes(result) for result in results)
        if self.removing:
            self._remove_v2_files([array for array in unchanged if array.work.path in switched], packed)

    def _checked(self, array: _Array, packed: Mapping[str, Packed | Exception]) -> bool:
        """Whether every shard of the array was packed, and one of its chunks reads through the sharded document
        as it reads as v2; the array fails where not."""
        work = array.work
        for shard in array.shards:
            result = packed[shard.path]
            if isinstance(result, Exception):
                left = "; left unsharded" if work.sharded is None else ""
                self.index.fail(work.path, f"{shard.path[len(work.folder) + 1 :]}: {reason(result)}{left}")
                return False
        fixed = _fixed_chunk_size(work.document)
        for shard in array.shards:
            result = packed[shard.path]
            assert isinstance(result, Packed)
            wrong = [(path, size) for path, size in zip(shard.sources, result.sizes, strict=True)
                     if path is not None and fixed is not None and size is not None and size != fixed]  # fmt: skip
            if wrong:
                path, size = wrong[0]
                assert path is not None and size is not None
                self.index.fail(work.path, f"{path[len(work.folder) + 1:]}: {size:,} bytes, where its codecs make "
                                           f"{fixed:,}: left unsharded")  # fmt: skip
                return False
        return self._sample(array, packed)

    def _sample(self, array: _Array, packed: Mapping[str, Packed | Exception]) -> bool:
        """The first stored chunk of the array read through its sharded document and as v2, compared: the
        shard's index and that chunk's bytes read from the store (not the whole shard), as a reader reads them."""
        work = array.work
        for plan, shard in zip(array.plans, array.shards, strict=True):
            result = packed[shard.path]
            assert isinstance(result, Packed)
            stored = [i for i, size in enumerate(result.sizes) if size is not None]
            if not stored:
                continue
            index = plan.inner[stored[0]]
            assert index is not None
            source = f"{work.folder}/{chunk_key(work.zarray, index)}"
            start = sum(size or 0 for size in result.sizes[: stored[0]])
            size, total = result.sizes[stored[0]] or 0, sum(size or 0 for size in result.sizes)
            footer = INDEX_ENTRY * len(result.sizes) + 4
            wanted = [ByteRange(source, 0, size), ByteRange(shard.path, start, start + size),
                      ByteRange(shard.path, total, total + footer)]  # fmt: skip
            read = self.store.files.read_ranges(wanted)
            try:
                chunk, inner, index_bytes = (_present(read[part]) for part in wanted)
                sparse = bytearray(total + footer)  # the shard as a reader sees it: zeros where it reads nothing
                sparse[start : start + size], sparse[total:] = inner, index_bytes
                check_chunk(work.zarray, sharded_document(work.document, array.layout), index, chunk,
                            v3_files={plan.key: sparse})  # fmt: skip
            except Exception as exc:
                if self.store.files.versions([source]).get(source) != result.versions[stored[0]]:
                    self.index.fail(work.path, _written_meanwhile(work, source))  # the likelier story
                else:
                    self.index.fail(work.path, f"through its shards: {reason(exc)}; left unsharded")
                return False
            return True
        return True

    def _unchanged(self, array: _Array, packed: Mapping[str, Packed | Exception], versions: Mapping[str, Any]) -> bool:
        for shard in array.shards:
            result = packed[shard.path]
            assert isinstance(result, Packed)
            for path, version in zip(shard.sources, result.versions, strict=True):
                if path is not None and versions.get(path) != version:
                    self.index.fail(array.work.path, _written_meanwhile(array.work, path))
                    return False
        return True

    def _switched(self, arrays: list[_Array]) -> set[str]:
        """Each array's zarr.json replaced by its sharded document (still where it holds what this run knows), and
        the consolidated metadata above them brought up to date; the paths switched."""
        replacements, documents = [], {}
        for array in arrays:
            work = array.work
            documents[work.path] = sharded_document(work.document, array.layout)
            if work.sharded is None:
                replacements.append(
                    Replacement(f"{work.folder}/zarr.json", encoded(documents[work.path]), work.current)
                )
        failed = self.store.files.replace(replacements)
        switched = set()
        for array in arrays:
            target = f"{array.work.folder}/zarr.json"
            if target in failed:
                self.index.fail(array.work.path, reason(failed[target]))
                continue
            switched.add(array.work.path)
            if array.work.sharded is None:
                self.report.sharded.append(array.work.path)
            if array.work.path in self.index.nodes:
                self.index.nodes[array.work.path] = self.index.nodes[array.work.path]._replace(
                    document=documents[array.work.path]
                )
        self._consolidate(switched)
        return switched

    def _consolidate(self, switched: set[str]) -> None:
        nodes = self.index.nodes
        groups = {group for path in switched for group in parents(path)
                  if group in nodes and nodes[group].consolidates and group in self.current}  # fmt: skip
        replacements = []
        for group in sorted(groups, key=lambda path: -path.count("/")):
            node = self.index.nodes[group]
            try:
                document = consolidated(self.index, node)
            except Exception as exc:
                self.index.fail(group, reason(exc))
                continue
            data = encoded(document)
            if data != self.current[group]:
                replacements.append(Replacement(f"{node.folder}/zarr.json", data, self.current[group]))
                self.current[group] = data
        for path, problem in self.store.files.replace(replacements).items():
            self.index.fail(self.store.relative(path).removesuffix("zarr.json").rstrip("/"), reason(problem))

    # -- the v2 files --------------------------------------------------------------------------------------------

    def _remove_v2_files(self, arrays: list[_Array], packed: Mapping[str, Packed | Exception]) -> None:
        """The arrays' v2 metadata, then their chunk files, each only if unchanged; meanwhile their v2 metadata
        kept aside (`REMOVING_V2`), where v2 readers do not find it, for a killed run's rerun."""
        aside = {f"{array.work.folder}/{REMOVING_V2}": encoded({"zarray": array.work.zarray,
                 "unsharded": array.work.document}) for array in arrays}  # fmt: skip
        not_kept = self.store.files.create(aside)
        for array in arrays:
            if (problem := not_kept.get(f"{array.work.folder}/{REMOVING_V2}")) is not None:
                self.index.fail(array.work.path, f"{REMOVING_V2}: {reason(problem)}; its v2 files are kept")
        arrays = [array for array in arrays if f"{array.work.folder}/{REMOVING_V2}" not in not_kept]
        kept = self.remove_v2_metadata([array.work.path for array in arrays])
        removals = []
        for array in arrays:
            if array.work.path in kept:
                continue
            for shard in array.shards:
                result = packed[shard.path]
                assert isinstance(result, Packed)
                removals += [Removal(path, None, version) for path, version in zip(shard.sources, result.versions,
                             strict=True) if path is not None and version is not None]  # fmt: skip
        self._remove(removals)
        self._remove([Removal(path, digest(aside[path])) for path in aside if path not in not_kept])

    def _finish_removals(self, works: list[ShardWork]) -> None:
        """What killed runs left of removing these arrays' chunk files (each as it is now), then the v2 metadata
        they kept aside."""
        if self.dry_run:
            return
        for work in works:
            indices = chunk_indices(work.zarray, work.chunk_names)
            paths = [f"{work.folder}/{chunk_key(work.zarray, index)}" for index in indices]
            for start in range(0, len(paths), BATCH):
                found = self.store.files.versions(paths[start : start + BATCH])
                self._remove([Removal(path, None, version) for path, version in found.items()
                              if isinstance(version, str)])  # fmt: skip
            self._remove([Removal(f"{work.folder}/{REMOVING_V2}", None)])
            self.report.finished_removals.append(work.path)

    def _remove(self, removals: list[Removal]) -> None:
        """Files removed, in batches; the chunk files among them counted, the failures reported."""
        for start in range(0, len(removals), BATCH):
            batch = removals[start : start + BATCH]
            failures = self.store.files.remove(batch)
            self.report.chunks_removed += sum(
                removal.path not in failures and not removal.path.endswith(REMOVING_V2) for removal in batch
            )
            for path, exc in failures.items():
                self.report.failures.append((self.store.relative(path), reason(exc)))


def _written_meanwhile(work: ShardWork, path: str) -> str:
    return f"{path[len(work.folder) + 1 :]}: written by someone else while its shard was made: left unsharded"


def _present(data: bytes | Exception) -> bytes:
    """Bytes as read; what reading them met, raised."""
    if isinstance(data, Exception):
        raise data
    return data


def _bytes(result: Packed | Exception) -> int:
    return 0 if isinstance(result, Exception) else sum(size or 0 for size in result.sizes)


def _fixed_chunk_size(document: dict[str, Any]) -> int | None:
    """A chunk's stored size where the codecs make every chunk the same size (no compressor); else None."""
    names = [codec.get("name") for codec in document["codecs"]]
    if any(name not in ("bytes", "transpose") for name in names):
        return None
    from ._zarr_api import zarr_api

    itemsize = zarr_api().array_v3.from_dict(dict(document)).dtype.to_native_dtype().itemsize
    return int(math.prod(document["chunk_grid"]["configuration"]["chunk_shape"]) * itemsize)
