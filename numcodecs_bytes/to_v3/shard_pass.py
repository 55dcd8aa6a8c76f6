"""The sharding pass of a run: the arrays to shard taken a round at a time, each round planned, packed, checked,
switched to its shards and (where the run removes v2 files) cleared of its chunk files.

A round holds whole arrays, up to about `store.BATCH` shards (one array of
more is a round of its own): on disk, a removing run holds at most one
round's shards beside the chunk files they replace. Each round:

1. re-reads each array's ``zarr.json`` (one that changed since the metadata
   run read it was written by someone else: left as it is) and lists the
   files below its folder, right before it plans from them (`plan`);
2. packs the shards (`store.Files.pack`; on a dask cluster where asked):
   a chunk file listed but gone meanwhile keeps its array unsharded;
3. checks what was packed (`verify`), and switches each array that passes
   (`switch`);
4. where the run removes v2 files, brings the consolidated metadata above
   up to date, then removes the arrays' v2 metadata and chunk files
   (`removal`); else the consolidated metadata is brought up to date once,
   at the end (until then it reads the chunk files, which stay).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..problems import reason
from ..store import BATCH, Removal, Store
from ..store.chunks import Packed, Shard
from .nodes import NodeIndex
from .plan import ArrayFound, Clear, Finish, Leave, Pack, Plan, plan, shard_count
from .removal import V2Files
from .report import ConversionReport
from .switch import Switch
from .verify import packed_right, unchanged

__all__ = ["ShardOptions", "ShardPass"]

Packer = Callable[[list[Shard], Callable[[int, int], None]], dict[str, Packed | Exception]]
"""What packs shards: the store's own `Files.pack`, or tasks on a dask cluster."""


class ShardOptions(NamedTuple):
    """What a run asks of sharding."""

    size: int | None  # bytes of uncompressed data a shard holds at most (see `sharding.shard_shape`)
    shapes: Mapping[str, Sequence[int]]  # a shard shape for some arrays, by path
    pack: Packer
    on_shards: Callable[[int, int, int], None] | None  # (shards done, shards to do, bytes packed)


class ShardPass:
    """The sharding pass of one run (see the module's docstring)."""

    def __init__(
        self,
        store: Store,
        index: NodeIndex,
        report: ConversionReport,
        options: ShardOptions,
        removal: V2Files,
        *,
        dry_run: bool,
        removing: bool,
        current: dict[str, bytes],
    ) -> None:
        self.store, self.index, self.report, self.options = store, index, report, options
        self.dry_run, self.removing, self.current = dry_run, removing, current
        self.switch = Switch(store, index, report, current)
        self.removal = removal
        self.done = self.total = self.packed_bytes = 0

    def run(self, arrays: list[ArrayFound]) -> None:
        """Every array in rounds; the consolidated metadata brought up to date."""
        counts = {array.path: self._count(array) for array in arrays}
        self.total = sum(counts.values())
        round_: list[ArrayFound] = []
        for array in arrays:
            round_.append(array)
            if sum(counts[a.path] for a in round_) >= BATCH or len(round_) >= BATCH or array is arrays[-1]:
                self._round(round_)
                round_ = []
        if not self.dry_run:
            self.switch.consolidations()

    def _count(self, array: ArrayFound) -> int:
        return shard_count(array, self.options.size, self.options.shapes.get(array.path))

    def _round(self, arrays: list[ArrayFound]) -> None:
        arrays = self._unchanged(arrays)
        listed = self.store.files.files_below(array.folder for array in arrays)
        packs: list[Pack] = []
        clears: list[Clear] = []
        for array in arrays:
            names = listed[array.folder]
            if isinstance(names, Exception):
                self.index.fail(array.path, f"its files could not be listed: {reason(names)}")
                continue
            try:
                found = plan(array, names, self.options.size, self.options.shapes.get(array.path), self.removing)
            except Exception as exc:
                self.index.fail(array.path, reason(exc))
                continue
            self._take(found, packs, clears)
        if self.dry_run:
            self.report.shards_to_write += sum(any(shard.sources) for pack in packs for shard in pack.shards)
            return
        self._clear(clears)
        self._pack(packs)

    def _take(self, found: Plan, packs: list[Pack], clears: list[Clear]) -> None:
        if isinstance(found, Pack):
            packs.append(found)
        elif isinstance(found, Clear):
            clears.append(found)
        elif isinstance(found, Finish):
            self.removal.finish(found)
        elif isinstance(found, Leave):
            if found.note is not None:
                self.report.notes.append((found.array.path or ".", found.note))
            if found.problem is not None:
                self.index.fail(found.array.path, found.problem)

    def _unchanged(self, arrays: list[ArrayFound]) -> list[ArrayFound]:
        """The arrays whose ``zarr.json`` is still what this run read or wrote (re-read now); the others fail."""
        if self.dry_run:
            return arrays
        read = self.store.files.read(f"{array.folder}/zarr.json" for array in arrays)
        kept = []
        for array in arrays:
            now = read[f"{array.folder}/zarr.json"]
            if isinstance(now, Exception) and not isinstance(now, FileNotFoundError):
                self.index.fail(array.path, f"zarr.json: {reason(now)}")
            elif now != self.current[array.path]:
                self.index.fail(array.path, "its zarr.json changed since this run read it (another writer): left as "
                                            "it is; run again to shard it")  # fmt: skip
            else:
                kept.append(array)
        return kept

    # -- packing -------------------------------------------------------------------------------------------------

    def _pack(self, packs: list[Pack]) -> None:
        if not packs:
            return
        self.store.files.tidy(f"{pack.array.folder}/c" for pack in packs)  # what killed runs left in shard folders
        self._packed(0, 0)  # the rate counts from here
        packed = self.options.pack([shard for pack in packs for shard in pack.shards], self._packed)
        checked = []
        for pack in packs:
            why = packed_right(self.store, pack, packed)
            if why is not None:
                self.index.fail(pack.array.path, why)
            else:
                checked.append(pack)
        # Right before the switch: the chunk files packed are the versions packed, and no other came meanwhile.
        versions = self.store.files.versions(
            source for pack in checked for shard in pack.shards for source in shard.sources if source is not None
        )
        listed = self.store.files.files_below(pack.array.folder for pack in checked)
        good = []
        for pack in checked:
            why = unchanged(pack, packed, versions, listed[pack.array.folder])
            if why is not None:
                self.index.fail(pack.array.path, why)
            else:
                good.append(pack)
        switched = self.switch.arrays(good)
        done = [pack for pack in good if pack.array.path in switched]
        for pack in done:
            self._count_packed(pack, packed)
        # The chunk files go where the run removes v2 files, and where no v2 reader reads them (no .zarray).
        going = [pack for pack in done if self.removing or pack.array.v2 is None]
        if going:
            self.switch.consolidations()
            self.removal.arrays([(pack.array, pack.array.document, _removals(pack, packed)) for pack in going])

    def _packed(self, shards: int, nbytes: int) -> None:
        self.done += shards
        self.packed_bytes += nbytes
        if self.options.on_shards is not None:
            self.options.on_shards(self.done, self.total, self.packed_bytes)

    def _count_packed(self, pack: Pack, packed: Mapping[str, Packed | Exception]) -> None:
        results = [result for shard in pack.shards if isinstance(result := packed[shard.path], Packed)]
        self.report.shards += sum(any(size is not None for size in result.sizes) for result in results)
        self.report.chunks_packed += sum(size is not None for result in results for size in result.sizes)
        self.report.shard_bytes += sum(size or 0 for result in results for size in result.sizes)
        linked = sum(result.linked for result in results)
        if linked:
            gone = "the links go with the chunk files, their targets stay" if self.removing else "the links stay"
            self.report.notes.append((pack.array.path or ".", f"{linked:,} chunk files are symbolic links: packed "
                                                              f"from their targets; {gone}"))  # fmt: skip

    # -- clearing ------------------------------------------------------------------------------------------------

    def _clear(self, clears: list[Clear]) -> None:
        """Arrays sharded earlier: their v2 files removed where every chunk file is held by its shard (or its shard
        was written after it: a Zarr v3 writer since, whose write v3 readers read)."""
        if not clears:
            return
        held = self.store.files.held(shard for clear in clears for shard in clear.shards)
        going: list[tuple[ArrayFound, dict[str, Any], list[Removal]]] = []
        for clear in clears:
            removals, problem = _clearable(clear, held)
            if problem is not None:
                self.index.fail(clear.array.path, problem)
            else:
                assert clear.array.conversion is not None
                going.append((clear.array, clear.array.conversion, removals))
        self.removal.arrays(going)


def _removals(pack: Pack, packed: Mapping[str, Packed | Exception]) -> list[Removal]:
    """The removals of an array's chunk files, each only while it is the version packed."""
    removals = []
    for shard in pack.shards:
        result = packed[shard.path]
        assert isinstance(result, Packed)
        removals += [Removal(path, None, version) for path, version in zip(shard.sources, result.versions,
                     strict=True) if path is not None and version is not None]  # fmt: skip
    return removals


def _clearable(clear: Clear, held: Mapping[str, Any]) -> tuple[list[Removal], str | None]:
    """The removals of an array's chunk files, each where its shard holds its bytes or was written after it (a
    Zarr v3 writer since: v3 readers read that write); or the reason none may go."""
    folder = clear.array.folder
    removals = []
    for shard in clear.shards:
        found = held[shard.path]
        key = shard.path[len(folder) + 1 :]
        if isinstance(found, FileNotFoundError):
            return [], (
                f"{key}: no such shard, where chunk files of it are kept (a Zarr v2 writer wrote where there was "
                f"no data since the sharding, or a Zarr v3 writer removed it): its v2 files are kept. {_WHAT_TO_DO}"
            )
        if isinstance(found, Exception):
            return [], f"{key}: {reason(found)}; its v2 files are kept"
        for source, same, version, written in zip(shard.sources, found.same, found.versions, found.written,
                                                  strict=True):  # fmt: skip
            if source is None or same is None or version is None:
                continue  # no chunk file (or gone since it was listed): nothing to remove
            if same or (written is not None and found.shard_written is not None and written < found.shard_written):
                removals.append(Removal(source, None, version))
                continue
            chunk = source[len(folder) + 1 :]
            if written is not None and found.shard_written is not None and written > found.shard_written:
                return [], (f"{chunk}: written after its shard {key} (by a Zarr v2 writer, since the sharding), which "
                            f"holds other bytes: v3 readers do not see that write; its v2 files are kept. "
                            f"{_WHAT_TO_DO}")  # fmt: skip
            return [], (f"{chunk}: other bytes than its shard {key} holds, and their times do not tell which was "
                        f"written last: its v2 files are kept. {_WHAT_TO_DO}")  # fmt: skip
    return removals, None


_WHAT_TO_DO = "Copy that region through Zarr v3 to keep the write (or remove the chunk file to drop it), then run again"
