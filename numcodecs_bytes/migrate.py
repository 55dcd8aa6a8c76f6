"""Upgrade configs and stores written when the spec draft called this codec ``endian``.

`migrate_config` renames one codec config. `migrate_store` walks a Zarr store
(v2 and v3, groups, consolidated metadata, sharding) and rewrites each metadata
file that names the legacy codec, atomically, touching nothing else: not the
chunks, not the rest of the file's text.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .codec import CODEC_ID, LEGACY_CODEC_ID

__all__ = [
    "LEGACY_NAME",
    "METADATA_FILES",
    "Change",
    "MigrationReport",
    "NotAStoreError",
    "is_legacy_config",
    "migrate_config",
    "migrate_metadata",
    "migrate_store",
]

LEGACY_NAME = LEGACY_CODEC_ID
"""The codec's name in the draft spec, as v2 ``id`` and as v3 ``name``."""

_NAME = CODEC_ID
METADATA_FILES = (".zarray", ".zmetadata", "zarr.json")
"""The metadata files that can name a codec (``.zgroup`` and ``.zattrs`` cannot)."""
_NODE_FILES = (*METADATA_FILES, ".zgroup")  # any of these makes a folder a Zarr node
_RENAME = f"{LEGACY_NAME!r} -> {_NAME!r}"
_TEMP_SUFFIX = ".numcodecs-bytes-tmp"
_BACKUP_SUFFIX = ".bak"


def is_legacy_config(config: Any) -> bool:
    """Whether ``config`` is a legacy ``endian`` codec entry (v2 or v3 form)."""
    if isinstance(config, str):
        return config == LEGACY_NAME
    return isinstance(config, dict) and (config.get("id") == LEGACY_NAME or config.get("name") == LEGACY_NAME)


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
    >>> migrate_config({"id": "zlib", "level": 1})
    {'id': 'zlib', 'level': 1}
    """
    migrated = copy.deepcopy(config)
    if not is_legacy_config(config):
        return migrated
    if isinstance(migrated, str):
        return _NAME
    key = "id" if migrated.get("id") == LEGACY_NAME else "name"
    migrated[key] = _NAME
    return migrated


# -- one metadata document ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One codec renamed: where in which file."""

    file: str
    location: str  # a JSON path, e.g. "codecs[0].configuration.codecs[1]"

    def __str__(self) -> str:
        return f"{self.file}: {self.location}: {_RENAME}"


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
    document = copy.deepcopy(document)
    locations: list[str] = []
    if filename == ".zarray":
        _migrate_zarray(document, "", locations)
    elif filename == ".zmetadata":
        for key, node in (document.get("metadata") or {}).items() if isinstance(document, dict) else ():
            if key.endswith(".zarray"):
                _migrate_zarray(node, f"metadata[{key!r}].", locations)
    elif filename == "zarr.json":
        _migrate_v3_node(document, "", locations)
    return document, locations


def _migrate_zarray(node: Any, where: str, locations: list[str]) -> None:
    if not isinstance(node, dict):
        return
    if is_legacy_config(node.get("compressor")):
        node["compressor"] = migrate_config(node["compressor"])
        locations.append(f"{where}compressor")
    _migrate_codec_list(node.get("filters"), f"{where}filters", locations)


def _migrate_v3_node(node: Any, where: str, locations: list[str]) -> None:
    if not isinstance(node, dict):
        return
    _migrate_codec_list(node.get("codecs"), f"{where}codecs", locations)
    consolidated = node.get("consolidated_metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        for key, child in consolidated["metadata"].items():
            _migrate_v3_node(child, f"{where}consolidated_metadata.metadata[{key!r}].", locations)


def _migrate_codec_list(codecs: Any, where: str, locations: list[str]) -> None:
    """Rename legacy codecs in a codec list, and in the codec lists nested in its codecs (sharding)."""
    if not isinstance(codecs, list):
        return
    for index, codec in enumerate(codecs):
        if is_legacy_config(codec):
            codecs[index] = migrate_config(codec)
            locations.append(f"{where}[{index}]")
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if isinstance(configuration, dict):
            for nested in ("codecs", "index_codecs"):
                _migrate_codec_list(configuration.get(nested), f"{where}[{index}].configuration.{nested}", locations)


# The legacy name where a codec names itself; the parse check below decides which ones are codecs.
_NAME_TOKEN = re.compile(rf'("(?:id|name)"\s*:\s*)"{LEGACY_NAME}"|(?<=[\[,])(\s*)"{LEGACY_NAME}"(?=\s*[,\]])')


def rewrite_text(text: str, migrated: Any) -> str:
    """The file's text with only the renamed codecs changed, parsing to ``migrated``.

    Replaces the legacy name tokens in place, so that key order, indentation,
    number formatting and escapes all stay as they were. Should a token
    stand elsewhere too (a user attribute), each one is tried alone and kept
    only if it brings the text closer to ``migrated``. Failing that, the
    document is written again in the file's own indentation.
    """
    matches = list(_NAME_TOKEN.finditer(text))

    def replaced(chosen: list[re.Match[str]]) -> str:
        pieces, last = [], 0
        for match in chosen:
            pieces += [text[last : match.start()], match.group(0).replace(f'"{LEGACY_NAME}"', f'"{_NAME}"')]
            last = match.end()
        return "".join(pieces) + text[last:]

    candidate = replaced(matches)
    if _parses_to(candidate, migrated):
        return candidate
    original = json.loads(text)
    wanted = _differences(original, migrated)
    chosen = [m for m in matches if _differences(original, json.loads(replaced([m]))) <= wanted]
    candidate = replaced(chosen)
    if _parses_to(candidate, migrated):
        return candidate
    return _dumps_like(text, migrated)


def _parses_to(text: str, expected: Any) -> bool:
    try:
        return bool(json.loads(text) == expected)
    except ValueError:
        return False


def _differences(a: Any, b: Any, where: str = "") -> set[str]:
    """The JSON paths at which two documents differ."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        pairs = [(a[key], b[key], f"{where}/{key}") for key in a]
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = [(x, y, f"{where}/{i}") for i, (x, y) in enumerate(zip(a, b, strict=True))]
    else:
        return set() if a == b else {where}
    found: set[str] = set()
    for x, y, path in pairs:
        found |= _differences(x, y, path)
    return found


def _dumps_like(text: str, document: Any) -> str:
    """``document`` as JSON in the indentation style of ``text``."""
    indent: int | str | None = None
    found = re.search(r"\n([ \t]+)\S", text)
    if found:
        whitespace = found.group(1)
        indent = "\t" if whitespace.startswith("\t") else len(whitespace)
    elif "\n" in text.strip():
        indent = 0
    if indent is not None:
        separators = (",", ": ")
    else:  # one line: as spaced as the original
        separators = (", ", ": ") if '": ' in text else (",", ":")
    ending = "\n" if text.endswith("\n") else ""
    return json.dumps(document, indent=indent, separators=separators, ensure_ascii="\\u" in text) + ending


# -- walking a store -----------------------------------------------------------------------------------------


class NotAStoreError(ValueError):
    """The path is not a Zarr store (or does not exist)."""


class _Files(Protocol):
    """What migrate_store needs of a file system: a local folder or an fsspec one."""

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """Top down: (folder, its subfolders, its files); clearing the subfolders prunes the walk."""
        ...

    def read(self, path: str) -> bytes: ...
    def replace(self, path: str, data: bytes, backup: bool) -> None: ...
    def remove(self, path: str) -> None: ...


class _LocalFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        for folder, subfolders, files in os.walk(self.root):
            subfolders.sort()
            yield folder, subfolders, sorted(files)

    def read(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def replace(self, path: str, data: bytes, backup: bool) -> None:
        """Write ``data`` to ``path`` atomically: a complete old or new file at every moment."""
        folder, name = os.path.split(path)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
            raise PermissionError(f"not writable: {path}")
        if backup:
            self._write_then_rename(folder, name, Path(path).read_bytes(), path + _BACKUP_SUFFIX, mode)
        self._write_then_rename(folder, name, data, path, mode)

    @staticmethod
    def _write_then_rename(folder: str, name: str, data: bytes, target: str, mode: int) -> None:
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=_TEMP_SUFFIX)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself reaches the disk
        finally:
            os.close(directory)

    def remove(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)


class _FsspecFiles:
    """Any fsspec file system. Object stores replace an object in one PUT, which is atomic."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs, self.root = fs, root.rstrip("/")

    def walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        for folder, subfolders, files in self.fs.walk(self.root, detail=False):
            subfolders.sort()
            yield folder, subfolders, sorted(files)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def replace(self, path: str, data: bytes, backup: bool) -> None:
        if backup:
            self.fs.pipe_file(path + _BACKUP_SUFFIX, self.fs.cat_file(path))
        self.fs.pipe_file(path, data)

    def remove(self, path: str) -> None:
        self.fs.rm_file(path)


def _open_files(location: str | os.PathLike[str]) -> tuple[_Files, str]:
    text = os.fspath(location)
    if "://" in text and not text.startswith("file://"):
        try:
            import fsspec
        except ImportError:
            raise NotAStoreError(f"{text}: URLs need fsspec (pip install fsspec)") from None
        fs, url_root = fsspec.core.url_to_fs(text)
        root = url_root.rstrip("/")
        files: _Files = _FsspecFiles(fs, root)
        is_dir, is_file = fs.isdir, fs.isfile
    else:
        root = str(Path(text.removeprefix("file://")))
        files = _LocalFiles(Path(root))
        is_dir, is_file = os.path.isdir, os.path.isfile
    if not is_dir(root):
        raise NotAStoreError(f"{text}: no such folder")
    if not any(is_file(f"{root}/{name}") for name in _NODE_FILES):
        raise NotAStoreError(f"{text}: not a Zarr store (no zarr.json, .zgroup, .zarray or .zmetadata)")
    return files, root


@dataclass
class MigrationReport:
    """What `migrate_store` did (or, in a dry run, would do)."""

    nodes: int = 0
    changes: list[Change] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    leftovers_removed: list[str] = field(default_factory=list)


def migrate_store(
    location: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    backup: bool = False,
    on_change: Callable[[str, list[Change]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Rename every legacy ``endian`` codec in a Zarr store's metadata to ``bytes``.

    Parameters
    ----------
    location : str or path
        A local folder (a group or an array), or an fsspec URL.
    dry_run : bool
        Report what would change; change no byte.
    backup : bool
        Keep each original beside it as ``<name>.bak``.
    on_change : callable, optional
        Called with each file (relative to the store) and its changes, as it goes.
    on_progress : callable, optional
        Called with (nodes seen, files changed) after each node.

    Returns
    -------
    MigrationReport
        Files that could not be migrated are listed with the reason; the
        others are migrated all the same.

    Raises
    ------
    NotAStoreError
        If ``location`` is not a folder holding Zarr metadata.
    """
    files, root = _open_files(location)
    report = MigrationReport()
    for folder, subfolders, names in files.walk():
        for name in names:
            if name.endswith(_TEMP_SUFFIX):  # left behind by a run that was killed
                path = f"{folder}/{name}"
                if not dry_run:
                    files.remove(path)
                report.leftovers_removed.append(_relative(path, root))
        if any(name in names for name in _NODE_FILES):
            report.nodes += 1
        for name in (n for n in names if n in METADATA_FILES):
            path = f"{folder}/{name}"
            relative = _relative(path, root)
            try:
                document, changes = _migrate_file(files, path, name, relative, dry_run, backup)
            except UnicodeDecodeError:
                report.failures.append((relative, "not UTF-8 text"))
                continue
            except ValueError as exc:
                report.failures.append((relative, f"not valid JSON ({exc})"))
                continue
            except OSError as exc:
                report.failures.append((relative, exc.strerror or str(exc)))
                continue
            if name == ".zarray" or (
                name == "zarr.json" and isinstance(document, dict) and document.get("node_type") == "array"
            ):
                subfolders.clear()  # an array holds chunks, not nodes: do not list them
            if changes:
                report.changes += changes
                report.files_changed.append(relative)
                if on_change is not None:
                    on_change(relative, changes)
        if on_progress is not None:
            on_progress(report.nodes, len(report.files_changed))
    return report


def _migrate_file(
    files: _Files, path: str, name: str, relative: str, dry_run: bool, backup: bool
) -> tuple[Any, list[Change]]:
    """Migrate one metadata file; returns its parsed document and the changes."""
    text = files.read(path).decode("utf-8")
    document = json.loads(text)
    migrated, locations = migrate_metadata(document, name)
    if locations and not dry_run:
        files.replace(path, rewrite_text(text, migrated).encode("utf-8"), backup)
    return document, [Change(relative, location) for location in locations]


def _relative(path: str, root: str) -> str:
    """``path`` relative to the store's root (walks yield paths below it)."""
    return path[len(root) :].lstrip("/\\").replace(os.sep, "/")


# -- the command line ------------------------------------------------------------------------------------------


def run_migrate(location: str, dry_run: bool, backup: bool) -> int:
    """``numcodecs-bytes migrate``: print each change and a summary; return the exit code."""
    verb = "would change" if dry_run else "changed"
    last_progress = [0.0]
    show_progress = sys.stderr.isatty() or os.environ.get("NUMCODECS_BYTES_PROGRESS") == "1"

    def on_change(relative: str, changes: list[Change]) -> None:
        print(f"{verb} {relative}:", flush=False)
        for change in changes:
            print(f"  {change.location}: {_RENAME}", flush=False)
        sys.stdout.flush()

    def on_progress(nodes: int, changed: int) -> None:
        now = time.monotonic()
        if show_progress and nodes >= 100 and now - last_progress[0] > 0.2:
            last_progress[0] = now
            print(f"\r{nodes} nodes scanned, {_count(changed, 'file')} {verb}", end="", file=sys.stderr, flush=True)

    try:
        report = migrate_store(location, dry_run=dry_run, backup=backup, on_change=on_change, on_progress=on_progress)
    except NotAStoreError as exc:
        print(f"numcodecs-bytes migrate: error: {exc}", file=sys.stderr)
        return 2
    if show_progress and report.nodes >= 100:
        print(file=sys.stderr)
    for leftover in report.leftovers_removed:
        print(f"{'would remove' if dry_run else 'removed'} {leftover} (left by an interrupted run)")
    for relative, reason in report.failures:
        print(f"failed {relative}: {reason}", file=sys.stderr)
    summary = (
        f"{'dry run: ' if dry_run else ''}{_count(len(report.files_changed), 'file')} {verb} "
        f"({_count(len(report.changes), 'codec')}) in {_count(report.nodes, 'node')}"
    )
    if report.failures:
        summary += f"; {_count(len(report.failures), 'file')} could not be migrated"
    print(summary)
    return 1 if report.failures else 0


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
