"""A round's packing in the sharding pass (`rounds`): its new shards packed (`store.Store.packing`;
on a dask cluster where asked), checked (`verify`), each array that passes switched to its new
shards (`zarr_json`), then what it read before and no longer reads removed.

1. The temporary files killed runs left where the new shards go are removed,
   then the shards packed: a source listed but gone meanwhile keeps its array
   as it is.
2. What was packed is checked (`verify.packed_right`: a chunk read through the
   sharded document; `verify.unchanged`: no source changed or came meanwhile).
3. What an array read before and no longer reads once switched (the shards it
   was sharded in; chunk files no v2 reader reads) is written down beside it
   (`Removals.mark`), for a killed run's rerun; then it switches.
4. The consolidated metadata above is brought up to date, then what the
   arrays read before goes (`Removals.retire`), and, where the run removes v2
   files, their v2 metadata and chunk files (`Removals.arrays`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from ...store import Removal, Store
from ...store.shard_format import Packed, Shard, source_path
from ..findings import Findings
from ..metadata_pass.zarr_json import ZarrJsonWriter
from ..nodes import RunState
from ..removal.removals import Removals
from ..rules.plan import Pack
from .verify import packed_right, unchanged

__all__ = ["Packer", "Packing", "ShardOptions", "Sharding"]

Packer = Callable[[list[Shard], Callable[[int, int], None]], dict[str, Packed | Exception]]
"""What packs shards: the store's own packing strategy (`store.Store.packing`), or tasks on a dask
cluster."""


class ShardOptions(NamedTuple):
    """What a run asks of sharding."""

    # bytes of uncompressed data a shard holds at most (see `sharding.shard_shape`)
    size: int | None
    shapes: Mapping[str, Sequence[int]]  # a shard shape for some arrays, by path
    pack: Packer
    on_shards: Callable[[int, int, int], None] | None  # (shards done, shards to do, bytes packed)


class Sharding(NamedTuple):
    """What the sharding pass works with: the run's state, what it asks of sharding, the writer of
    ``zarr.json`` files, the removals, and whether the run removes v2 files."""

    state: RunState
    options: ShardOptions
    zarr_json: ZarrJsonWriter
    removals: Removals
    removes_v2: bool  # this run removes v2 files (a killed run's: `ArrayFound.was_removing`)


class Packing:
    """The packing of one run's sharding pass, a round at a time (see the module's docstring), and
    its progress (``total``: the shards the pass packs)."""

    def __init__(self, sharding: Sharding) -> None:
        self.store = sharding.state.store
        self.options, self.zarr_json = sharding.options, sharding.zarr_json
        self.removals, self.removes_v2 = sharding.removals, sharding.removes_v2
        self.done = self.total = self.packed_bytes = 0

    def packed(self, packs: list[Pack]) -> Findings:
        """A round's packs packed, checked, switched, and cleared of what they read before (see
        the module's docstring); what was found."""
        found = Findings()
        # the temporary files killed runs left where the new shards go (their shards went first)
        self.store.packing.tidy(pack.array.at.file("c") for pack in packs)
        self._progress(0, 0)  # the rate counts from here
        packed = self.options.pack(
            [shard for pack in packs for shard in pack.shards], self._progress
        )
        for result in packed.values():
            if isinstance(result, Packed) and result.refused:
                found.report.server_copy_refused = (
                    found.report.server_copy_refused or result.refused
                )
        good, versions = _checked(self.store, found, packs, packed)
        # What the arrays read before and no longer read once switched (the shards they were sharded
        # in; chunk files no v2 reader reads): written down first, for a killed run's rerun.
        marks = {
            pack.array.at: {
                pack.array.at.below(path): v
                for path in pack.retired()
                if isinstance(v := versions.get(path), str)
            }
            for pack in good
            if pack.old is not None or pack.array.v2 is None
        }
        marked, unmarked = self.removals.mark(marks)
        found.add(unmarked)
        switching = [pack for pack in good if pack.array.at not in marks or pack.array.at in marked]
        switched, switch_found = self.zarr_json.arrays(switching)
        found.add(switch_found)
        done = [pack for pack in good if pack.array.path in switched]
        for pack in done:
            _count_packed(found, pack, packed, self.removes_v2)
        retiring = [
            pack.array._replace(retired=marks[pack.array.at])
            for pack in done
            if pack.array.at in marks
        ]
        going = [
            pack
            for pack in done
            if self.removes_v2 and pack.array.v2 is not None and pack.old is None
        ]
        if going or retiring:
            found.add(self.zarr_json.consolidations())  # before anything it lists goes
        found.add(self.removals.retire(retiring))
        found.add(
            self.removals.arrays(
                [(pack.array, pack.array.document, _removals(pack, packed)) for pack in going]
            )
        )
        return found

    def _progress(self, shards: int, nbytes: int) -> None:
        self.done += shards
        self.packed_bytes += nbytes
        if self.options.on_shards is not None:
            self.options.on_shards(self.done, self.total, self.packed_bytes)


def _checked(
    store: Store, found: Findings, packs: list[Pack], packed: Mapping[str, Packed | Exception]
) -> tuple[list[Pack], Mapping[str, str | Exception | None]]:
    """The packs whose shards read back right and whose sources are, right before the switch, the
    versions packed with no other come meanwhile; the others fail (into ``found``). With the
    sources' versions."""
    checked = []
    made_right = packed_right(store, packs, packed)
    for pack in packs:
        why = made_right[pack.array.path]
        if why is not None:
            found.fail(pack.array.path, why)
        else:
            checked.append(pack)
    listed, versions = store.packing.files_and_versions(
        (pack.array.at.key for pack in checked),
        (path for pack in checked for path in pack.retired()),
    )
    good = []
    for pack in checked:
        why = unchanged(pack, packed, versions, listed[pack.array.at.key])
        if why is not None:
            found.fail(pack.array.path, why)
        else:
            good.append(pack)
    return good, versions


def _removals(pack: Pack, packed: Mapping[str, Packed | Exception]) -> list[Removal]:
    """The removals of an array's chunk files, each only while it is the version packed."""
    removals = []
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        removals += [
            Removal(source_path(source), None, version)
            for source, version in zip(shard.sources, result.versions, strict=True)
            if source is not None and version is not None
        ]
    return removals


def _count_packed(
    found: Findings, pack: Pack, packed: Mapping[str, Packed | Exception], removes_v2: bool
) -> None:
    """An array switched to its new shards, counted into ``found`` (with a note where chunk files
    were links)."""
    report = found.report
    results = [result for shard in pack.shards if isinstance(result := packed[shard.path], Packed)]
    if pack.old is not None:
        report.resharded.append(pack.array.path)
    report.shards += sum(any(size is not None for size in result.sizes) for result in results)
    report.chunks_packed += sum(size is not None for result in results for size in result.sizes)
    packed_bytes = sum(size or 0 for result in results for size in result.sizes)
    report.shard_bytes += packed_bytes
    report.copied_bytes += sum(result.copied for result in results)
    if pack.old is None and pack.array.v2 is not None and not removes_v2:
        report.kept_chunk_bytes += packed_bytes
    linked = sum(result.linked for result in results)
    if linked:
        gone = (
            "the links go with the chunk files, their targets stay"
            if removes_v2
            else "the links stay"
        )
        found.note(
            pack.array.path,
            f"{linked:,} chunk files are symbolic links: packed from their targets; {gone}",
        )
