"""A store's folders as listings find them, and the whole store from one listing of all its keys
where that pays (object stores: S3, Azure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from .files import BATCH, Folder
from .layout import METADATA_NAMES, NODE_FILES

_A = TypeVar("_A")

__all__ = ["LISTING_LIMIT", "Listing", "WholeStore", "folders_listed", "metadata_versions"]

LISTING_LIMIT = 100 * BATCH
"""Keys a listing of a whole object store holds at most: what bounds the memory of that listing."""


@dataclass
class Listing:
    """One folder as a listing finds it: its subfolders, and its files with their versions (ETags;
    None where not kept)."""

    subfolders: set[str] = field(default_factory=set)
    versions: dict[str, str | None] = field(default_factory=dict)

    def folder(self, path: str) -> Folder:
        return Folder(path, tuple(sorted(self.subfolders)), tuple(sorted(self.versions)))


def metadata_versions(listings: Mapping[str, Listing]) -> Iterator[tuple[str, str]]:
    """The version of each metadata file the ``listings`` (by folder path) tell, by its path: what
    a replacement of it holds on."""
    for path, listing in listings.items():
        for name, tag in listing.versions.items():
            if tag and name in METADATA_NAMES:
                yield f"{path}/{name}", tag


class WholeStore:
    """Every folder below ``root`` from one listing of all its keys, a page after another, and the
    paths no key reaches (``problems``). It pays while each thousand keys name at least ``jobs``
    nodes (else one folder a request, ``jobs`` at once, is quicker: arrays of many chunks) and the
    keys stay within `LISTING_LIMIT`; `add` says when it stops paying.

    Examples
    --------
    >>> whole = WholeStore("bucket/store", jobs=1)
    >>> whole.add("bucket/store/a/.zarray", '"e1"'), whole.add("bucket/store/a/0.0", None)
    (True, True)
    >>> sorted(whole.folders), whole.folders["bucket/store/a"].versions
    (['bucket/store', 'bucket/store/a'], {'.zarray': '"e1"', '0.0': None})
    """

    def __init__(self, root: str, jobs: int) -> None:
        self.root, self.jobs = root, jobs
        self.folders = {root: Listing()}
        self.problems: list[tuple[str, str]] = []
        self._keys = self._nodes = 0

    def add(self, path: str, version: str | None) -> bool:
        """One key (its path below ``root``, with its version) and its folders added; False where
        the listing stops paying (the walk then lists folder by folder)."""
        self._keys += 1
        self._nodes += self._added(path[len(self.root) + 1 :], version)
        if self._keys % BATCH == 0:
            if self._nodes < self.jobs or self._keys >= LISTING_LIMIT:
                return False
            self._nodes = 0
        return True

    def _added(self, relative: str, version: str | None) -> int:
        """1 where the key names a node's metadata file, else 0."""
        *names, file = relative.split("/")
        # "a//b": no path reaches it (the keys below one such folder come together: one line)
        if "" in names:
            where = f"{self.root}/{'/'.join(names[: names.index('') + 1])}"
            if not self.problems or self.problems[-1][0] != where:
                self.problems.append((where, "a folder with an empty name: not visited"))
            return 0
        path = self.root
        for name in names:
            self.folders[path].subfolders.add(name)
            path = f"{path}/{name}"
            self.folders.setdefault(path, Listing())
        if file:  # "a/b/" is a folder marker, not a file
            self.folders[path].versions[file] = version
        return int(file in NODE_FILES)


def folders_listed(
    answers: Mapping[str, _A | Exception], listing: Callable[[str, _A], Listing]
) -> tuple[dict[str, Listing], list[tuple[str, str]]]:
    """Each folder's listing from its answer (``listing`` reads one), and the folders whose
    listing failed, each with one line: what a batch of the walk found."""
    found: dict[str, Listing] = {}
    unvisited: list[tuple[str, str]] = []
    for path, answer in answers.items():
        if isinstance(answer, Exception):
            unvisited.append((path, f"folder not read: {answer}"))
        else:
            found[path] = listing(path, answer)
    return found, unvisited
