"""An obstore store's listings: the walk (the whole store from one listing where that pays, else
folder by folder), an array folder's keys with their ETags (in ranges of keys, the ranges at once,
where the store lists from an offset), and the ETags as every condition holds on them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .files import BATCH, Listed, breadth_first
from .fsspec_files import child_path
from .listing import Listing, WholeStore, folders_listed
from .object_client import tag

if TYPE_CHECKING:
    from .object_client import ObjectClient

__all__ = ["ListedObject", "files_and_versions", "keys_in", "walk"]

ListedObject = tuple[str, int]  # an object's ETag and size, as listed


# -- the walk --------------------------------------------------------------------------------------


def walk(files: ObjectClient, left_out: Mapping[str, set[str]]) -> Iterator[Listed]:
    """The whole store from one listing of all its keys where that pays (`listing.WholeStore`),
    else one folder a request, the folders of a level at once."""
    whole = _whole_store(files)
    if whole is None:
        return breadth_first(
            files.root, lambda paths: _listed_batch(files, paths), child_path, left_out
        )

    def listed(paths: list[str]) -> Listed:
        return Listed(files.found({path: whole.folders.pop(path) for path in paths}), [])

    return breadth_first(files.root, listed, child_path, left_out, whole.problems)


def _whole_store(files: ObjectClient) -> WholeStore | None:
    import obstore

    whole = WholeStore(files.root, files.jobs)
    prefix = files.key(files.root)

    async def listing() -> bool:
        pages = obstore.list(files.store, f"{prefix}/" if prefix else None, chunk_size=BATCH)
        while True:
            try:
                page = await files.in_time(anext(pages))
            except StopAsyncIteration:
                return True
            for entry in page:
                if not whole.add(_listed_path(files.container, entry), _listed(entry)):
                    return False

    # each page in its time, not the whole listing; whatever stops it, listing folder by folder
    # reports per folder
    pays = files.run({"": listing()}, limit=False)[""]
    return whole if pays is True else None


def _listed_batch(files: ObjectClient, paths: list[str]) -> Listed:
    def listing(path: str, answer: Any) -> Listing:
        found = Listing()
        for entry in answer["objects"]:
            if entry["path"] == files.key(path):
                continue  # the folder's own marker ("folder/", as consoles make one)
            found.versions[entry["path"].rsplit("/", 1)[-1]] = _listed(entry)
        found.subfolders.update(
            prefix.rstrip("/").rsplit("/", 1)[-1] for prefix in answer["common_prefixes"]
        )
        return found

    answers = files.run({path: files.listing_of(path) for path in paths})
    found, unvisited = folders_listed(answers, listing)
    return Listed(files.found(found), unvisited)


def _listed_path(container: str, entry: Mapping[str, Any]) -> str:
    """A listed object's path; an empty one's as a folder (``a/b/``): obstore lists the marker
    ``a/b/`` that consoles make for a folder as ``a/b``, and no Zarr file is empty."""
    path = f"{container}/{entry['path']}"
    return f"{path}/" if entry["size"] == 0 else path


def _listed(entry: Mapping[str, Any]) -> str | None:
    """The ETag of a listing's entry (None where it gives none)."""
    return tag(entry["e_tag"]) if entry.get("e_tag") else None


# -- an array folder's keys ------------------------------------------------------------------------


def files_and_versions(
    files: ObjectClient, folders: Iterable[str], paths: Iterable[str]
) -> tuple[dict[str, list[str] | Exception], dict[str, str | Exception | None]]:
    """One listing of each folder gives both: its keys, each with its ETag (the versions of paths
    below none of the folders from HEADs). A folder is listed in the ranges of keys
    `ObjectClient.key_ranges` gives for the names of ``paths`` below it, the ranges at once."""
    below: dict[str, list[str]] = {folder: [] for folder in folders}
    elsewhere = []
    for path in paths:
        folder = next((f for f in _folders_above(path) if f in below), None)
        if folder is None:
            elsewhere.append(path)
        else:
            below[folder].append(path[len(folder) + 1 :])
    ranges = {
        (folder, place): bounds
        for folder, names in below.items()
        for place, bounds in enumerate(files.key_ranges(sorted(names)))
    }
    listed = files.run(
        {key: keys_in(files, key[0], after, until) for key, (after, until) in ranges.items()}
    )
    keys: dict[str, dict[str, ListedObject] | Exception] = {folder: {} for folder in below}
    for (folder, _), found in listed.items():
        held = keys[folder]
        if isinstance(found, Exception):
            keys[folder] = found
        elif not isinstance(held, Exception):
            held |= found[0]
    names: dict[str, list[str] | Exception] = {}
    versions: dict[str, str | Exception | None] = {}
    for folder, held in keys.items():
        names[folder] = held if isinstance(held, Exception) else sorted(held)
        for name in below[folder]:
            found_here = held if isinstance(held, Exception) else held.get(name)
            versions[f"{folder}/{name}"] = (
                found_here[0] if isinstance(found_here, tuple) else found_here
            )
    return names, versions | (files.versions(elsewhere) if elsewhere else {})


async def keys_in(
    files: ObjectClient,
    folder: str,
    after: str | None,
    until: str | None,
    pages: int | None = None,
) -> tuple[dict[str, ListedObject], bool]:
    """The keys below ``folder`` from ``after`` (the first where None; a few before it may come
    too) up to ``until`` at least (to the last where None), by their names relative to it: ETag
    and size; at most ``pages`` pages of a thousand (no limit where None), and whether they
    reached ``until`` (or the last key)."""
    import obstore

    prefix = files.key(folder)
    prefix = f"{prefix}/" if prefix else ""
    # where the listing starts: before ``after`` (obstore takes no key with an empty part)
    offset = None if after is None else (prefix + after[:-1]).rstrip("/") or None
    found: dict[str, ListedObject] = {}
    asked = 0
    async for page in obstore.list(files.store, prefix or None, offset=offset, chunk_size=1000):
        asked += 1
        batch = {
            entry["path"][len(prefix) :]: (tag(entry["e_tag"]), int(entry["size"]))
            for entry in page
        }
        found |= batch
        if until is not None and batch and max(batch) >= until:
            return found, True
        if pages is not None and asked >= pages:
            return found, False
    return found, True


def _folders_above(path: str) -> Iterator[str]:
    """The folders above an object's path, nearest first."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path
