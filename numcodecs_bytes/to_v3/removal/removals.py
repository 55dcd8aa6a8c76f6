"""Removing what Zarr v2 readers read: the v2 metadata of converted nodes, and the chunk files of
sharded arrays.

Each file goes only if it is still what this run read (metadata: its digest;
a chunk file: the version packed or compared), so a writer's change since is
kept and reported. The order keeps every reader right:

- a sharded array's chunk files go only once its ``zarr.json`` and the
  consolidated metadata above it read its shards; meanwhile its v2 metadata
  waits as `REMOVING_V2` (v2 readers do not see it), so that a killed run's
  rerun knows the chunk files for its own and finishes (`Removals.finish`);
- a group's v2 metadata goes only where every node below it lost its own:
  where one keeps it (it could not be converted or sharded), v2 readers keep
  reaching it through the groups above, whose ``.zmetadata`` then lists only
  the nodes still v2 (`v2_listings.listing_only_v2`);
- ``.zmetadata`` goes last of a batch: v2 readers of it find the rest to the end;
- what an array switched to new shards read before (the shards it was sharded
  in, the chunk files of an array without v2 metadata) goes once the array and
  the consolidated metadata above it read the new shards; it is written down
  beside the array first (`RETIRED`), so that a killed run's rerun removes the
  rest (`Removals.retire`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...problems import reason
from ...store import Removal, digest
from ...store.layout import REMOVING_V2, RETIRED, Location
from ..findings import Findings
from ..nodes import RunState
from ..rules.documents import encoded
from ..rules.plan import ArrayFound, Finish
from .remover import Remover

__all__ = ["Removals"]


class Removals:
    """The removals of one run: v2 files, and what arrays switched to new shards read before (or, in
    a dry run, the list of the v2 metadata files). Each returns what it found (`Findings`)."""

    def __init__(self, state: RunState) -> None:
        self.store, self.dry_run = state.store, state.dry_run
        self.remover = Remover(state)
        self.removed: set[str] = set()  # the nodes whose v2 metadata this run removed

    def metadata(self, nodes: Iterable[tuple[Location, Mapping[str, bytes]]]) -> Findings:
        """The v2 metadata files of these nodes (where each lies, the digests of its files as read),
        each only if it still holds what was read; ``.zmetadata`` last."""
        found = Findings()
        self._metadata(nodes, found)
        return found

    def _metadata(
        self, nodes: Iterable[tuple[Location, Mapping[str, bytes]]], found: Findings
    ) -> set[str]:
        """`metadata`, into ``found``: the nodes where a file was not removed."""
        nodes = list(nodes)
        failed = set()
        for last in (False, True):
            removals = {
                at.file(name): (at.path, (at / name).path, read)
                for at, files in nodes
                for name, read in files.items()
                if (name == ".zmetadata") == last
            }
            problems = (
                {}
                if self.dry_run
                else self.store.files.remove(
                    Removal(path, read) for path, (_, _, read) in removals.items()
                )
            )
            for path, (node, relative, _) in removals.items():
                if path in problems:
                    found.file_stays(relative, reason(problems[path]))
                    failed.add(node)
                else:
                    found.report.removed.append(relative)
        self.removed |= {at.path for at, _ in nodes} - failed
        return failed

    def arrays(self, arrays: list[tuple[ArrayFound, dict[str, Any], list[Removal]]]) -> Findings:
        """Sharded arrays' v2 files: for each (the array, the document its chunk files are chunks
        of, their removals), its v2 metadata kept aside, removed, then its chunk files, then what
        was kept aside."""
        found = Findings()
        aside = {
            array.at.file(REMOVING_V2): encoded({"zarray": array.v2, "unsharded": chunks_of})
            for array, chunks_of, _ in arrays
        }
        not_kept = self.store.files.create(aside)
        going = []
        for array, _, removals in arrays:
            problem = not_kept.get(array.at.file(REMOVING_V2))
            if problem is not None:
                found.fail(array.path, f"{REMOVING_V2}: {reason(problem)}; its v2 files are kept")
            else:
                going.append((array, removals))
        kept = self._metadata(((array.at, array.digests) for array, _ in going), found)
        done = [(array, removals) for array, removals in going if array.path not in kept]
        self.remover.remove(
            [removal for _, removals in done for removal in removals], found, "chunks"
        )
        self.store.packing.tidy(
            folder for array, removals in done for folder in _chunk_folders(array.at, removals)
        )
        self.remover.remove(
            [Removal(path, digest(data)) for path, data in aside.items() if path not in not_kept],
            found,
        )
        return found

    def finish(self, finish: Finish) -> Findings:
        """What a killed run left of removing an array's chunk files (each as it is now: no v2
        reader sees them), then the v2 metadata it kept aside."""
        if self.dry_run:
            return self.would_remove(finish.chunks, "chunks")
        found = Findings()
        versions = self.store.files.versions(finish.chunks)
        self.remover.remove(
            [Removal(p, None, v) for p, v in versions.items() if isinstance(v, str)],
            found,
            "chunks",
        )
        self.store.packing.tidy(finish.folders)
        self.remover.remove([Removal(finish.array.at.file(REMOVING_V2), None)], found)
        found.report.finished_removals.append(finish.array.path)
        return found

    def mark(
        self, retiring: Mapping[Location, Mapping[str, str]]
    ) -> tuple[set[Location], Findings]:
        """Beside each array (by where it lies), the files it is about to stop reading (relative
        to it), with their versions, written down (`RETIRED`); the arrays where that was written
        (the others fail, and must not switch)."""
        found = Findings()
        marks = {at.file(RETIRED): at for at in retiring}
        failed = self.store.files.create(
            {path: encoded({"files": dict(retiring[at])}) for path, at in marks.items()}
        )
        for path, problem in failed.items():
            why = (
                f"{RETIRED} is there still: a file it names was changed by another writer after "
                "an earlier switch, and stays (see that file's line); remove that file, then run "
                "again to shard the array anew"
                if isinstance(problem, FileExistsError)
                else f"{RETIRED}: {reason(problem)}"
            )
            found.fail(marks[path].path, why)
        return {at for path, at in marks.items() if path not in failed}, found

    def retire(self, arrays: list[ArrayFound]) -> Findings:
        """What each array was switched away from (`ArrayFound.retired`, by a killed run, or just
        now), removed, each file only while it is the version written down; then what wrote it
        down, where every such file went. A file another writer changed since stays, reported, and
        so does the list naming it: no later run takes it for a killed run's leftover."""
        found = Findings()
        removals, folders = [], []
        for array in arrays:
            paths = {array.at.file(name): version for name, version in array.retired.items()}
            removals += [Removal(path, None, version) for path, version in paths.items()]
            folders += _chunk_folders(array.at, paths)
        failed = self.remover.remove(removals, found, "replaced")
        self.store.packing.tidy(folders)
        done = [
            array
            for array in arrays
            if not any(array.at.file(name) in failed for name in array.retired)
        ]
        self.remover.remove([Removal(array.at.file(RETIRED), None) for array in done], found)
        return found

    def would_remove(self, paths: list[str], counted: str) -> Findings:
        """In a dry run: data files the run would remove, told and counted (`Remover`)."""
        return self.remover.would_remove(paths, counted)


def _chunk_folders(at: Location, removals: Iterable[Removal] | Mapping[str, object]) -> list[str]:
    """The folders below an array's that its files (removals, or paths) lay in (``0/0``, ``c/0/0``
    keys): emptied, they go too."""
    names = [at.below(r.path if isinstance(r, Removal) else r) for r in removals]
    return sorted({at.file(name.split("/")[0]) for name in names if "/" in name})
