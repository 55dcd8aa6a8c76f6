"""What a room of a run found, as a value it returns (`Findings`): the run alone records it, in its
report and in what it knows of the nodes (`run`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .report import ConversionReport

__all__ = ["Findings"]


@dataclass
class Findings:
    """What one room found: its part of the run's report (counts, notes, the lines of what failed)
    and the nodes that stay as they are.

    A failure is one line of the report, of one of two kinds: a node that stays as it is (`fail`:
    the groups above it keep their v2 metadata too), or a file that stays where it is, its removal
    or replacement refused (`file_stays`: its node is converted all the same).

    >>> found = Findings()
    >>> found.fail("a/b", "its .zarray is not JSON")
    >>> found.file_stays("a/.zmetadata", "changed by someone else since it was read")
    >>> sorted(found.failed), found.report.failures[1]
    (['a/b'], ('a/.zmetadata', 'changed by someone else since it was read'))
    """

    report: ConversionReport = field(default_factory=ConversionReport)
    failed: set[str] = field(default_factory=set)  # nodes, by path ("" the root)

    def fail(self, path: str, why: str) -> None:
        """The node at ``path`` stays as it is, for ``why``."""
        self.failed.add("" if path == "." else path)
        self.report.failures.append((path or ".", why))

    def file_stays(self, path: str, why: str) -> None:
        """The file at ``path`` (relative to the store) stays where it is, for ``why``."""
        self.report.failures.append((path, why))

    def note(self, path: str, what: str) -> None:
        self.report.notes.append((path or ".", what))

    def add(self, other: Findings) -> Findings:
        """``other`` taken in (what a room found for another that called it); this."""
        self.report.add(other.report)
        self.failed |= other.failed
        return self
