"""Files removed, each only while it is the version read (or holds what was read): those that stay
found, the data files among them told and counted (in a dry run none removed, the data files told
and counted all the same)."""

from __future__ import annotations

from ...problems import reason
from ...store import Removal
from ..findings import Findings
from ..nodes import RunState

__all__ = ["Remover"]


class Remover:
    """The removal of files for one run (see the module's docstring)."""

    def __init__(self, state: RunState) -> None:
        self.store, self.dry_run, self.on_removed = state.store, state.dry_run, state.on_removed

    def would_remove(self, paths: list[str], counted: str) -> Findings:
        """In a dry run: data files the run would remove, told and counted as `remove` counts
        them."""
        found = Findings()
        self._told(paths, counted, found)
        return found

    def remove(
        self, removals: list[Removal], found: Findings, counted: str | None = None
    ) -> set[str]:
        """Files removed (in a dry run, none), into ``found`` those that stay; the data files among
        them (``counted``: "chunks", v2 chunk files; "replaced", what arrays read before their new
        shards) told and counted. The paths that were not removed."""
        if self.dry_run:
            return set()
        failures = self.store.files.remove(removals)
        for path, exc in failures.items():
            found.file_stays(self.store.relative(path), reason(exc))
        if counted is not None:
            self._told([r.path for r in removals if r.path not in failures], counted, found)
        return set(failures)

    def _told(self, paths: list[str], counted: str, found: Findings) -> None:
        if counted == "chunks":
            found.report.chunks_removed += len(paths)
        else:
            found.report.replaced_removed += len(paths)
        if self.on_removed is not None:
            for path in paths:
                self.on_removed(self.store.relative(path))
