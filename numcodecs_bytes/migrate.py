"""Upgrade configs and stores written when the spec draft called this codec ``endian``.

`migrate_config` renames one codec config. `migrate_store` walks a Zarr store
(v2 and v3, groups, consolidated metadata, sharding) and rewrites each metadata
file that names the legacy codec, atomically, touching nothing else: not the
chunks, not the rest of the file's text.

What `migrate_store` (and ``numcodecs-bytes migrate``) guarantees:

- Only codec names change. A codec is ours by its `id` in v2 metadata and
  by its `name` in v3 metadata (`{"id": "zlib", "name": "endian"}` is a zlib
  codec and stays as it is; so do user attributes that say `endian`). In the
  text, only the name's own string token is replaced (located from the text's
  structure, in one pass); key order, indentation, line endings, number
  spellings, escapes and a UTF-8 byte order mark stay as they were. A name
  written with escapes (`"\\u0065ndian"`) becomes a plain `"bytes"`. Chunks are
  never read.
- Local folders: atomic replace. Each file is written to a temporary file in
  the same folder, given the original's permission bits, owner and group, and
  renamed over the original once a batch of them is on the disk. A run that is
  killed leaves every file either old or new; the next run finishes the job
  and removes the temporary files of dead runs. One run at a time per store
  (an advisory lock on the store's folder, released when the process ends): a
  second run is refused and touches nothing. Just before each rename the file
  is compared with what was read: if someone else changed it meanwhile, it is
  left as it is and reported.
- Object stores (`s3://bucket/store`, or any fsspec URL): an object is
  replaced in one PUT, so readers see the old or the new object, never a mix;
  there is no rename and no lock. Folders are listed a level at a time (on S3
  the whole store in one listing, where that pays) and files read and written
  in batches, up to `jobs` requests in flight. On S3 a PUT holds only while
  the object is the version read (`If-Match`), so two runs at once change each
  file once, and a PUT whose answer was lost is read back, not reported as a
  conflict; on other file systems the object is read again just before the
  write (two writers racing in between are not excluded). Credentials come
  from the usual environment (`AWS_*` variables, `~/.aws`); another endpoint
  from `storage_options` (`--storage-option endpoint_url=...`) or
  `FSSPEC_S3_ENDPOINT_URL`. Each request has `request_timeout` seconds, the
  run `run_timeout` if given. Tested on an S3 API server (moto) through s3fs,
  behind a proxy that injects faults.
- Backups (`backup=True`): each original is kept beside it as `<name>.bak`,
  written before the file is replaced. A `.bak` that exists already is never
  overwritten: where it holds exactly the original (a run killed between the
  backup and the replace), the rerun takes it as its own and goes on; where
  it holds anything else, the file is reported and left as it is.
- Nothing is skipped in silence. A file that cannot be migrated (not JSON,
  not UTF-8, not a regular file, not writable, a `.bak` that holds something
  else) and a folder that is not visited (unreadable; a symbolic link, which
  is never followed, and a linked metadata file, which is never replaced by a
  copy) are named with the reason; everything else is migrated. A
  hard-linked file is reported and left as it is (a replace would split it
  from its other names). Only the files' owner (or root) can migrate them: a
  group member who does not own a file is told that its owner could not be
  kept, and the file stays as it is. The command line's output and exit codes
  are those of `numcodecs_bytes.__main__` (``numcodecs-bytes migrate --help``).

Examples
--------
>>> import json, tempfile
>>> from pathlib import Path
>>> from numcodecs_bytes.__main__ import main
>>> store = Path(tempfile.mkdtemp(), "old.zarr")
>>> store.mkdir()
>>> _ = (store / "zarr.json").write_text(json.dumps({
...     "zarr_format": 3, "node_type": "array", "shape": [3], "data_type": "int16",
...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
...     "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
...     "codecs": [{"name": "endian", "configuration": {"endian": "big"}}],
... }, indent=2))
>>> main(["migrate", str(store), "--verbose"])
changed zarr.json:
  codecs[0]: 'endian' -> 'bytes'
1 file changed (1 codec) in 1 node (... s)
0
>>> main(["migrate", str(store)])  # a rerun: nothing left to do
nothing to do: no legacy codec in 1 node (... s)
0
>>> json.loads((store / "zarr.json").read_text())["codecs"]
[{'name': 'bytes', 'configuration': {'endian': 'big'}}]
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from .names import CODEC_ID, LEGACY_CODEC_ID, named, v2_id, v3_name
from .stores import (
    JOBS,
    NODE_FILES,
    REQUEST_TIMEOUT,
    Files,
    Replacement,
    open_store,
    prune_array_folder,
    reason,
    relative_path,
    store_lock,
    walk_store,
)

__all__ = [
    "LEGACY_NAME",
    "METADATA_FILES",
    "RENAME",
    "Change",
    "MigrationReport",
    "is_legacy_config",
    "legacy_codecs",
    "migrate_config",
    "migrate_metadata",
    "migrate_store",
]

LEGACY_NAME = LEGACY_CODEC_ID
"""The codec's name in the draft spec, as v2 ``id`` and as v3 ``name``."""

_NAME = CODEC_ID
METADATA_FILES = (".zarray", ".zmetadata", "zarr.json")
"""The metadata files that can name a codec (``.zgroup`` and ``.zattrs`` cannot)."""
RENAME = f"{LEGACY_NAME!r} -> {_NAME!r}"
"""How a change is spelled in reports: ``'endian' -> 'bytes'``."""


def is_legacy_config(config: Any) -> bool:
    """Whether ``config`` is a legacy ``endian`` codec entry.

    A v2 codec (numcodecs) is named by its ``id`` alone, a v3 codec by its
    ``name`` (or is the bare name): ``{"id": "zlib", "name": "endian"}`` is a
    zlib codec with a parameter called ``name``, not ours.
    """
    return named(config, LEGACY_NAME)


def migrate_config(config: Any) -> Any:
    """Return a copy of a codec config, with a legacy ``endian`` codec made ``bytes``.

    The v2 form ``{"id": "endian", ...}``, the v3 form ``{"name": "endian",
    ...}`` and the v3 short form ``"endian"`` become ``bytes`` with the same
    meaning (the two codecs are the same; only the name changed). Any other
    config comes back unchanged. The input is never mutated.

    Examples
    --------
    >>> from numcodecs_bytes import migrate_config
    >>> migrate_config({"id": "endian", "endian": "big", "dtype": "<i4"})
    {'id': 'bytes', 'endian': 'big', 'dtype': '<i4'}
    >>> migrate_config({"name": "endian", "configuration": {"endian": "little"}})
    {'name': 'bytes', 'configuration': {'endian': 'little'}}
    >>> migrate_config({"id": "zlib", "level": 1, "name": "endian"})
    {'id': 'zlib', 'level': 1, 'name': 'endian'}
    """
    migrated = copy.deepcopy(config)
    if not is_legacy_config(config):
        return migrated
    if isinstance(migrated, str):
        return _NAME
    migrated["id" if "id" in migrated else "name"] = _NAME
    return migrated


# -- one metadata document ------------------------------------------------------------------------------

JsonPath = tuple[str | int, ...]  # a JSON path: object keys and array indices


@dataclass(frozen=True)
class Change:
    """One codec renamed: where in which file."""

    file: str
    location: str  # a JSON path, e.g. "codecs[0].configuration.codecs[1]"

    def __str__(self) -> str:
        return f"{self.file}: {self.location}: {RENAME}"


def migrate_metadata(document: Any, filename: str) -> tuple[Any, list[str]]:
    """Migrate the codecs of one parsed metadata file.

    Parameters
    ----------
    document : object
        The parsed JSON of a ``.zarray``, ``.zmetadata`` or ``zarr.json``.
    filename : str
        Which of these it is.

    Returns
    -------
    (object, list of str)
        The migrated document (a new object; the input is not mutated) and the
        JSON paths of the codecs that were renamed.
    """
    found = legacy_codecs(document, filename)
    return _renamed(document, found), [location for location, _ in found]


def legacy_codecs(document: Any, filename: str) -> list[tuple[str, JsonPath]]:
    """The legacy codecs of one parsed metadata file: (readable location, JSON path of the name string)."""
    found: list[tuple[str, JsonPath]] = []
    if filename == ".zarray":
        _zarray(document, (), "", found)
    elif filename == ".zmetadata":
        metadata = document.get("metadata") if isinstance(document, dict) else None
        for key, node in metadata.items() if isinstance(metadata, dict) else ():
            if isinstance(key, str) and key.endswith(".zarray"):
                _zarray(node, ("metadata", key), f"metadata[{key!r}].", found)
    elif filename == "zarr.json":
        _v3_node(document, (), "", found)
    return found


def _zarray(node: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    if not isinstance(node, dict):
        return
    compressor = node.get("compressor")
    if v2_id(compressor) == LEGACY_NAME:
        found.append((f"{where}compressor", (*path, "compressor", "id")))
    filters = node.get("filters")
    for index, codec in enumerate(filters if isinstance(filters, list) else ()):
        if v2_id(codec) == LEGACY_NAME:
            found.append((f"{where}filters[{index}]", (*path, "filters", index, "id")))


def _v3_node(node: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    if not isinstance(node, dict):
        return
    _v3_codecs(node.get("codecs"), (*path, "codecs"), f"{where}codecs", found)
    consolidated = node.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        for key, child in consolidated["metadata"].items():
            child_path = (*path, "consolidated_metadata", "metadata", key)
            _v3_node(child, child_path, f"{where}consolidated_metadata.metadata[{key!r}].", found)


def _v3_codecs(codecs: Any, path: JsonPath, where: str, found: list[tuple[str, JsonPath]]) -> None:
    """Legacy codecs in a v3 codec list, and in the codec lists nested in its codecs (sharding)."""
    if not isinstance(codecs, list):
        return
    for index, codec in enumerate(codecs):
        if v3_name(codec) == LEGACY_NAME:  # the name is the entry itself in the short form
            found.append((f"{where}[{index}]", (*path, index) if isinstance(codec, str) else (*path, index, "name")))
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if isinstance(configuration, dict):
            for nested in ("codecs", "index_codecs"):
                nested_path = (*path, index, "configuration", nested)
                _v3_codecs(configuration.get(nested), nested_path, f"{where}[{index}].configuration.{nested}", found)


def _renamed(document: Any, found: list[tuple[str, JsonPath]]) -> Any:
    """A copy of ``document`` with the name at each path of ``found`` made ``bytes``."""
    renamed = copy.deepcopy(document)
    for _, path in found:
        node = renamed
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = _NAME
    return renamed


# One JSON token: a string, a structural character, a scalar, or white space.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+|\s+', re.S)


def _name_token_spans(text: str, paths: set[JsonPath]) -> dict[JsonPath, tuple[int, int]]:
    """Where in ``text`` the string values at ``paths`` stand: one pass over the tokens, no recursion.

    The text must be valid JSON (it was parsed before). Of repeated keys the
    last one counts, as for ``json.loads``.
    """
    spans: dict[JsonPath, tuple[int, int]] = {}
    frames: list[list[Any]] = []  # per open container: [is_object, current key or index, expecting a key]
    for token in _TOKEN.finditer(text):
        char = token.group(0)[0]
        if char in " \t\r\n":
            continue
        top = frames[-1] if frames else None
        if char in "{[":
            frames.append([char == "{", None if char == "{" else 0, char == "{"])
        elif char in "}]":
            frames.pop()
        elif char == ":":
            assert top is not None
            top[2] = False
        elif char == ",":
            assert top is not None
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
        elif top is not None and top[0] and top[2]:  # an object key
            raw = token.group(0)
            top[1] = json.loads(raw) if "\\" in raw else raw[1:-1]
        elif char == '"':
            path = tuple(frame[1] for frame in frames)
            if path in paths:
                spans[path] = token.span()
    return spans


def rewrite_text(text: str, document: Any, filename: str) -> str:
    """The file's text with only the legacy codec names replaced by ``"bytes"``.

    The tokens are located from the structure of the text itself, in one pass:
    key order, indentation, number spellings, escapes and line endings
    elsewhere stay exactly as they were; a name written with escapes
    (``"\\u0065ndian"``) is written plainly.

    Raises
    ------
    ValueError
        If the result would not parse to the migrated document (never expected).
    """
    return _rewrite(text, document, legacy_codecs(document, filename))


def _rewrite(text: str, document: Any, found: list[tuple[str, JsonPath]]) -> str:
    """`rewrite_text` for the legacy codecs already ``found`` in ``document``."""
    paths = {path for _, path in found}
    pieces, last = [], 0
    for start, end in sorted(_name_token_spans(text, paths).values()):
        pieces += [text[last:start], f'"{_NAME}"']
        last = end
    result = "".join(pieces) + text[last:]
    if json.loads(result) != _renamed(document, found):
        raise ValueError("the renamed text does not parse to the migrated document")
    return result


# -- walking a store -----------------------------------------------------------------------------------------


@dataclass
class MigrationReport:
    """What `migrate_store` did (or, in a dry run, would do)."""

    nodes: int = 0
    changes: list[Change] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (file or folder, reason)
    leftovers_removed: list[str] = field(default_factory=list)


def migrate_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    backup: bool = False,
    on_change: Callable[[str, list[Change]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    jobs: int = JOBS,
    storage_options: dict[str, Any] | None = None,
    request_timeout: float = REQUEST_TIMEOUT,
    run_timeout: float | None = None,
) -> MigrationReport:
    """Rename every legacy ``endian`` codec in a Zarr store's metadata to ``bytes``.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would change; change no byte.
    backup : bool
        Keep each original beside it as ``<name>.bak`` (an existing one is
        never overwritten: that file is reported and left as it is).
    on_change : callable, optional
        Called with each file (relative to the store) and its changes, as it goes.
    on_progress : callable, optional
        Called after each batch with (folders walked, folders found so far).
    jobs, storage_options, request_timeout, run_timeout
        How the store is reached, as `stores.open_store` takes them: requests
        in flight on an object store, fsspec's options for a URL, seconds per
        request (60; a file whose request takes longer is reported), seconds
        for the whole run (no limit; past it, `stores.RunTimeoutError`).

    Returns
    -------
    MigrationReport
        Files that could not be migrated, and folders that were not visited
        (unreadable, or symbolic links, which are never followed), are listed
        with the reason; everything else is migrated all the same.

    Raises
    ------
    NotAStoreError
        If ``location`` is not a folder holding Zarr metadata, or cannot be reached.
    StoreBusyError
        If another run is migrating the same local store.
    """
    files, root = open_store(
        location, jobs=jobs, storage_options=storage_options, request_timeout=request_timeout, run_timeout=run_timeout
    )
    with nullcontext() if dry_run else store_lock(files, root):
        return _migrate_files(files, root, dry_run, backup, on_change, on_progress)


def _migrate_files(
    files: Files,
    root: str,
    dry_run: bool,
    backup: bool,
    on_change: Callable[[str, list[Change]], None] | None,
    on_progress: Callable[[int, int], None] | None,
) -> MigrationReport:
    report = MigrationReport()
    for batch in walk_store(files, root, dry_run=dry_run, on_progress=on_progress):
        report.leftovers_removed += batch.leftovers_removed
        report.failures += batch.problems
        report.nodes += sum(any(name in folder.files for name in NODE_FILES) for folder in batch.folders)
        metadata = {f"{f.path}/{name}": (f, name) for f in batch.folders for name in f.files if name in METADATA_FILES}
        changed: dict[str, tuple[Replacement, list[Change]]] = {}
        for path, data in files.read(metadata).items():
            folder, name = metadata[path]
            relative = relative_path(path, root)
            try:
                document, found, replacement = _migrated_file(path, name, data, backup)
            except Exception as exc:
                report.failures.append((relative, reason(exc)))
                continue
            if name == ".zarray":
                prune_array_folder(folder, document)
            elif name == "zarr.json" and isinstance(document, dict) and document.get("node_type") == "array":
                folder.subfolders[:] = []  # a Zarr v3 array holds chunks only
            if found:
                changed[path] = (replacement, [Change(relative, location) for location, _ in found])
        write_failures = {} if dry_run else files.replace(replacement for replacement, _ in changed.values())
        for path, (_, changes) in changed.items():
            relative = relative_path(path, root)
            if path in write_failures:
                report.failures.append((relative, reason(write_failures[path])))
                continue
            report.changes += changes
            report.files_changed.append(relative)
            if on_change is not None:
                on_change(relative, changes)
    return report


def _migrated_file(
    path: str, name: str, data: bytes | Exception, backup: bool
) -> tuple[Any, list[tuple[str, JsonPath]], Replacement]:
    """One metadata file's parsed document, its legacy codecs, and the file with them renamed.

    ``data`` is what reading the file gave: its bytes, or the error raised here.
    """
    if isinstance(data, Exception):
        raise data
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""  # zarr reads it: keep it
    text = data[len(bom) :].decode("utf-8")
    document = json.loads(text)
    found = legacy_codecs(document, name)
    renamed = bom + _rewrite(text, document, found).encode("utf-8") if found else data
    return document, found, Replacement(path, renamed, data, backup)
