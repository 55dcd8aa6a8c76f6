"""The check over a store: which chunks of which arrays are read, and in what rounds (`check` reads
each one).

Each array's fill value is compared, then its stored chunks, chunk 0 first,
until one shows the mapping right (`check.shows_the_mapping`) or every stored
chunk has been compared: a sample in which a wrong mapping could not show
vouches for no chunk but its own. A chunk that shows it vouches for the arrays
read by the same pipelines too (`check.pipelines_key`): they pass unread. The
chunks are read in rounds: per pipelines one array, then two, four, ..., each
its next one, two, four, ... chunks (few rounds where samples of zeros come
first), ``Files.concurrency`` chunks in memory at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any, NamedTuple

from ...problems import reason
from ...store import Files
from ...store.layout import Location, chunk_indices, chunk_key
from ..findings import Findings
from ..nodes import Node
from .check import check_chunk, check_fill_value, pipelines_key

__all__ = ["Sampler"]


class _Checking(NamedTuple):
    """An array being checked: what its samples are read with, and the chunks left to sample."""

    at: Location  # where the array lies
    zarray: dict[str, Any]  # as v2 readers take it
    document: dict[str, Any]
    pipelines: str | None  # `pipelines_key`
    indices: Iterator[tuple[int, ...]]  # `chunk_indices` not read yet


class Sampler:
    """The check of one run: what it has shown right so far (pipelines), and the arrays it fails."""

    def __init__(self, files: Files) -> None:
        self.files = files
        self.proven: set[str] = set()  # the pipelines (`pipelines_key`) a check has shown right

    def passing(self, arrays: list[Node]) -> tuple[list[Node], Findings]:
        """The arrays whose check passes; the others fail."""
        found = Findings()
        failed = found.failed
        pending: dict[str, _Checking] = {}
        for node in arrays:
            if node.v2_array is None:
                continue
            pipelines = pipelines_key(node.v2_array)
            if pipelines is not None and pipelines in self.proven:
                continue
            try:
                check_fill_value(node.v2_array, node.document)
            except Exception as exc:
                found.fail(node.path, reason(exc))
                continue
            indices = chunk_indices(node.v2_array, node.chunk_names)
            pending[node.path] = _Checking(
                node.at, node.v2_array, node.document, pipelines, indices
            )
        size = 1
        while pending:
            taken: dict[str, int] = {}
            samples: list[tuple[str, tuple[int, ...]]] = []
            for path, checking in list(pending.items()):
                if checking.pipelines is not None and checking.pipelines in self.proven:
                    del pending[path]
                    continue
                group = checking.pipelines or path
                taken[group] = taken.get(group, 0) + 1
                if taken[group] > size:
                    continue
                more = list(islice(checking.indices, size))
                # every stored chunk compared, none could show a mapping: each value was compared
                if not more:
                    del pending[path]
                samples += [(path, index) for index in more]
            for start in range(0, len(samples), self.files.concurrency):
                self._sample(pending, samples[start : start + self.files.concurrency], found)
            size *= 2
        return [node for node in arrays if node.path not in failed], found

    def _sample(
        self,
        pending: dict[str, _Checking],
        samples: list[tuple[str, tuple[int, ...]]],
        found: Findings,
    ) -> None:
        """Read and compare ``samples`` (path, chunk index) of the ``pending`` arrays; those that
        show the mapping, or fail (into ``found``), leave ``pending``."""
        wanted = [
            (path, index)
            for path, index in samples
            if path in pending and pending[path].pipelines not in self.proven
        ]
        files = {
            (path, index): pending[path].at.file(chunk_key(pending[path].zarray, index))
            for path, index in wanted
        }
        chunks = self.files.read_data(files.values())
        for path, index in wanted:
            if path not in pending:  # failed, or shown right, by an earlier chunk of this batch
                continue
            checking = pending[path]
            try:
                shown = check_chunk(
                    checking.zarray, checking.document, index, chunks[files[path, index]]
                )
            except Exception as exc:
                found.fail(path, reason(exc))
                del pending[path]
                continue
            if shown:
                del pending[path]
                if checking.pipelines is not None:
                    self.proven.add(checking.pipelines)
