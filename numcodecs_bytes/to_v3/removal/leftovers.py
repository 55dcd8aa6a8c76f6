"""What killed runs left below the arrays of a round, dealt with before the round plans: the files
a killed run wrote down as switched away from (removed where the arrays' ``zarr.json``, as read
now, no longer reads them), and the shards it placed that no ``zarr.json`` reads."""

from __future__ import annotations

from collections.abc import Mapping

from ...problems import reason
from ...store import Removal
from ..findings import Findings
from ..nodes import RunState
from ..rules.plan import ArrayFound, retiring, unread_shards
from .removals import Removals

__all__ = ["clear_unread", "retire_killed"]


def retire_killed(state: RunState, removals: Removals, arrays: list[ArrayFound]) -> Findings:
    """What killed runs wrote down as switched away from, removed (`Removals.retire`): only the
    files each array's ``zarr.json``, as read now, no longer reads (`plan.retiring`); the others
    stay, the marker goes (that run was killed before its switch: the plan starts over)."""
    found = Findings()
    retire = []
    for array in arrays:
        going, staying = retiring(array)
        if staying:
            found.note(
                array.path,
                f"an interrupted run wrote down {len(staying):,} file(s) to remove that its "
                "zarr.json still reads (it stopped before its switch): they stay",
            )
        retire.append(array._replace(retired=going))
    if not state.dry_run:
        found.add(removals.retire(retire))
    return found


def clear_unread(
    state: RunState, arrays: list[ArrayFound], names: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], Findings]:
    """The shards killed runs placed below these arrays that their ``zarr.json`` does not read
    (`plan.unread_shards`: keys this tool writes, of any grid) removed, each while it is the
    version listed (in a dry run, only told); the files below each array's folder without
    them."""
    found = Findings()
    # (not the files a list of a killed run's names: that list decides what becomes of them)
    unread = {
        array.at: [
            name
            for name in unread_shards(array.document, names[array.at.key])
            if name not in array.retired
        ]
        for array in arrays
        if array.at.key in names
    }
    paths = [at.file(name) for at, here in unread.items() for name in here]
    failed: dict[str, Exception] = {}
    if paths and not state.dry_run:
        found_versions = state.store.files.versions(paths)
        failed = state.store.files.remove(
            Removal(path, None, version)
            for path, version in found_versions.items()
            if isinstance(version, str)
        )
        state.store.packing.tidy(at.file("c") for at, here in unread.items() if here)
    for path in paths:
        if path in failed:
            found.file_stays(state.store.relative(path), reason(failed[path]))
        else:
            found.report.leftovers_removed.append(state.store.relative(path))
    kept = dict(names)
    for at, unread_here in unread.items():
        if unread_here:
            removed = set(unread_here)
            kept[at.key] = [name for name in names[at.key] if name not in removed]
    return kept, found
