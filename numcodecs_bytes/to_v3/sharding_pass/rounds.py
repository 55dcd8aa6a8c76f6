"""The sharding pass of a run: the arrays to shard (or shard anew) taken a round at a time, each
round planned, packed, checked, switched to its new shards, and cleared of what it read before.

A round holds whole arrays, up to about `ROUND` shards (one array of more is
a round of its own): on disk, a round's shards are at most beside the files
they replace. Each round:

1. re-reads each array's ``zarr.json`` (one that changed since the metadata
   run read it was written by someone else: left as it is), lists the files
   below its folder and, where it is sharded anew, reads its shards' indexes
   (`existing_shards`), right before it plans from them (`plan`); an array no
   shards can be made for (one chunk, say) is left from its document alone,
   before any round (`plan.decided_by_document`: nothing to write, nothing to
   read);
2. removes what killed runs left in the new shards' keys (no ``zarr.json``
   reads them), and in a dry run counts what it would write and remove;
3. packs the new shards, checks them, switches each array that passes and
   removes what it read before (`packing`). The consolidated metadata above
   the arrays is brought up to date before anything it lists goes; else
   once, at the end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ...problems import reason
from ...store import Store
from ...store.layout import Location
from ...store.shard_format import Shard, source_path
from ..findings import Findings
from ..removal.chunk_files import clear
from ..removal.leftovers import clear_unread, retire_killed
from ..rules.plan import (
    ArrayFound,
    Clear,
    Finish,
    Layouts,
    Leave,
    Pack,
    Plan,
    decided_by_document,
    layouts,
    plan,
    reshard_from,
    shard_count,
)
from .existing_shards import ShardsNow, read_shards
from .packing import Packer, Packing, Sharding, ShardOptions

__all__ = ["ROUND", "Packer", "ShardOptions", "ShardPass", "Sharding"]

ROUND = 1000
"""Shards a round packs at most before its arrays switch and (removing) their files go: what bounds
the disk space a run holds beside the files its shards replace (one array of more is a round of its
own)."""


class ShardPass:
    """The sharding pass of one run (see the module's docstring): what it found, returned by
    `run`."""

    def __init__(self, sharding: Sharding) -> None:
        self.state = state = sharding.state
        self.store, self.dry_run = state.store, state.dry_run
        self.options, self.zarr_json = sharding.options, sharding.zarr_json
        self.removals, self.removes_v2 = sharding.removals, sharding.removes_v2
        self.current = sharding.zarr_json.current
        self.packing = Packing(sharding)
        self.found = Findings()
        self.layouts: dict[str, Layouts] = {}  # each array's, by path, worked out once

    def run(self, arrays: list[ArrayFound]) -> Findings:
        """Every array in rounds; the consolidated metadata brought up to date. What the pass
        found."""
        alone: list[ArrayFound] = []
        planned: list[ArrayFound] = []
        for array in arrays:
            shape = self.options.shapes.get(array.path)
            try:
                self.layouts[array.path] = layouts(array.document, self.options.size, shape)
            except Exception as exc:  # a document zarr cannot read: that array's problem
                self.found.fail(array.path, reason(exc))
                continue
            decided = decided_by_document(array, self.layouts[array.path])
            (alone if decided else planned).append(array)
        for chosen in _plans(
            self.found,
            alone,
            {array.at.key: [] for array in alone},
            {},
            self.layouts,
            self.removes_v2,
        ):
            assert isinstance(chosen, Leave)
            self._take(chosen, [], [])
        arrays = planned
        counts = {array.path: shard_count(array, self.layouts[array.path]) for array in arrays}
        self.packing.total = sum(counts.values())
        round_: list[ArrayFound] = []
        for array in arrays:
            round_.append(array)
            if (
                sum(counts[a.path] for a in round_) >= ROUND
                or len(round_) >= ROUND
                or array is arrays[-1]
            ):
                self._round(round_)
                round_ = []
        if not self.dry_run:
            self.found.add(self.zarr_json.consolidations())
        return self.found

    def _round(self, arrays: list[ArrayFound]) -> None:
        arrays = (
            arrays if self.dry_run else _still_read(self.store, self.found, self.current, arrays)
        )
        # what killed runs switched away from, first, where the arrays read other files now
        self.found.add(
            retire_killed(self.state, self.removals, [array for array in arrays if array.retired])
        )
        listed = self.store.files.files_below(array.at.key for array in arrays)
        names = {
            array.at.key: found
            for array in arrays
            if not isinstance(found := listed[array.at.key], Exception)
        }
        names, unread = clear_unread(self.state, arrays, names)
        self.found.add(unread)
        listed = {**listed, **names}
        resharded = [
            (array.at, tuple(array.document["shape"]), old, names[array.at.key])
            for array in arrays
            if array.at.key in names
            and (old := reshard_from(array, self.layouts[array.path])) is not None
        ]
        shards_now = read_shards(self.store, resharded)
        packs: list[Pack] = []
        clears: list[Clear] = []
        for chosen in _plans(self.found, arrays, listed, shards_now, self.layouts, self.removes_v2):
            self._take(chosen, packs, clears)
        if self.dry_run:
            self.found.report.shards_to_write += sum(
                any(shard.sources) for pack in packs for shard in pack.shards
            )
            self._would_remove(packs, clears)
            return
        self.found.add(clear(self.store, self.removals, clears))
        if packs:
            self.found.add(self.packing.packed(packs))

    def _would_remove(self, packs: list[Pack], clears: list[Clear]) -> None:
        """In a dry run, the data files the real run would remove once the arrays read their new
        shards: their v2 chunk files (where it removes v2 files), what they read before (their old
        shards, the chunk files of arrays without v2 metadata)."""
        for pack in packs:
            if pack.old is not None or pack.array.v2 is None:
                self.found.add(self.removals.would_remove(pack.retired(), "replaced"))
            elif self.removes_v2:
                self.found.add(self.removals.would_remove(_sources(pack.shards), "chunks"))
        for each in clears:
            self.found.add(self.removals.would_remove(_sources(each.shards), "chunks"))

    def _take(self, found: Plan, packs: list[Pack], clears: list[Clear]) -> None:
        if isinstance(found, Pack):
            packs.append(found)
        elif isinstance(found, Clear):
            clears.append(found)
        elif isinstance(found, Finish):
            self.found.add(self.removals.finish(found))
        elif isinstance(found, Leave):
            if found.note is not None:
                self.found.note(found.array.path, found.note)
            if found.problem is not None:
                self.found.fail(found.array.path, found.problem)


def _plans(
    found: Findings,
    arrays: list[ArrayFound],
    listed: Mapping[str, list[str] | Exception],
    shards_now: Mapping[Location, ShardsNow],
    layouts: Mapping[str, Layouts],
    removes_v2: bool,
) -> Iterator[Plan]:
    """Each array's plan from its shard layouts (by path), the files listed below it and its
    shards' indexes read now; an array that cannot be planned fails (into ``found``)."""
    for array in arrays:
        names = listed[array.at.key]
        if isinstance(names, Exception):
            found.fail(array.path, f"its files could not be listed: {reason(names)}")
            continue
        versions, old_shards = shards_now.get(array.at, ({}, None))
        try:
            chosen = plan(array, layouts[array.path], names, removes_v2, old_shards)
        except Exception as exc:
            found.fail(array.path, reason(exc))
            continue
        if isinstance(chosen, Pack) and chosen.old is not None:
            chosen = chosen._replace(
                before={path: v for path, v in versions.items() if v is not None}
            )
        yield chosen


def _sources(shards: list[Shard]) -> list[str]:
    """The files the shards are made of."""
    return [source_path(source) for shard in shards for source in shard.sources if source]


def _still_read(
    store: Store, found: Findings, current: Mapping[str, bytes], arrays: list[ArrayFound]
) -> list[ArrayFound]:
    """The arrays whose ``zarr.json`` is still what this run read or wrote (re-read now); the others
    fail (into ``found``)."""
    read = store.files.read(array.at.file("zarr.json") for array in arrays)
    kept = []
    for array in arrays:
        now = read[array.at.file("zarr.json")]
        if isinstance(now, Exception) and not isinstance(now, FileNotFoundError):
            found.fail(array.path, f"zarr.json: {reason(now)}")
        elif now != current[array.path]:
            found.fail(
                array.path,
                "its zarr.json changed since this run read it (another writer): "
                "left as it is; run again to shard it",
            )
        else:
            kept.append(array)
    return kept
