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
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .codec import CODEC_ID, LEGACY_CODEC_ID

try:
    import fcntl
except ImportError:  # Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LEGACY_NAME",
    "METADATA_FILES",
    "RENAME",
    "Change",
    "MigrationReport",
    "NotAStoreError",
    "StoreBusyError",
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
_NODE_FILES = (*METADATA_FILES, ".zgroup")  # any of these makes a folder a Zarr node
RENAME = f"{LEGACY_NAME!r} -> {_NAME!r}"
"""How a change is spelled in reports: ``'endian' -> 'bytes'``."""
_TEMP_SUFFIX = ".numcodecs-bytes-tmp"
_BACKUP_SUFFIX = ".bak"


def is_legacy_config(config: Any) -> bool:
    """Whether ``config`` is a legacy ``endian`` codec entry.

    A v2 codec (numcodecs) is named by its ``id`` alone, a v3 codec by its
    ``name`` (or is the bare name): ``{"id": "zlib", "name": "endian"}`` is a
    zlib codec with a parameter called ``name``, not ours.
    """
    if isinstance(config, str):
        return config == LEGACY_NAME
    if not isinstance(config, dict):
        return False
    return config.get("id") == LEGACY_NAME if "id" in config else config.get("name") == LEGACY_NAME


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
    if isinstance(compressor, dict) and compressor.get("id") == LEGACY_NAME:
        found.append((f"{where}compressor", (*path, "compressor", "id")))
    filters = node.get("filters")
    for index, codec in enumerate(filters if isinstance(filters, list) else ()):
        if isinstance(codec, dict) and codec.get("id") == LEGACY_NAME:
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
        if codec == LEGACY_NAME:
            found.append((f"{where}[{index}]", (*path, index)))
        elif isinstance(codec, dict) and codec.get("name") == LEGACY_NAME:
            found.append((f"{where}[{index}]", (*path, index, "name")))
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


class NotAStoreError(ValueError):
    """The location is not a Zarr store, does not exist, or cannot be reached (a usage error)."""


class StoreBusyError(RuntimeError):
    """Another migrate run holds the store's lock."""


class _Files(Protocol):
    """What migrate_store needs of a file system: a local folder or an fsspec one."""

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        """Top down: (folder, its subfolders, its files); clearing the subfolders prunes the walk.

        What cannot be visited (an unreadable folder, a link) is added to ``failures``.
        """
        ...

    def read(self, path: str) -> bytes: ...
    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None: ...
    def remove(self, path: str) -> None: ...


class _LocalFiles:
    """A local folder. Files are replaced atomically (rename), keeping mode, owner and group."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        def unreadable(error: OSError) -> None:
            failures.append((str(error.filename), f"folder not read: {error.strerror or error}"))

        for folder, subfolders, files in os.walk(self.root, onerror=unreadable):
            for name in [name for name in subfolders if os.path.islink(os.path.join(folder, name))]:
                subfolders.remove(name)  # never followed: it may lead out of the store, or in a loop
                failures.append((os.path.join(folder, name), "symbolic link to a folder: not followed"))
            subfolders.sort()
            yield folder, subfolders, sorted(files)

    def read(self, path: str) -> bytes:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise OSError(f"symbolic link (to {os.readlink(path)}): not replaced by a file; migrate its target")
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")  # a FIFO or a device would block or never end
        return Path(path).read_bytes()

    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None:
        """Write ``data`` to ``path`` atomically: a complete old or new file at every moment."""
        folder, name = os.path.split(path)
        info = os.stat(path)
        if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
            raise OSError(f"not writable: {path}")
        if backup:
            if os.path.lexists(path + _BACKUP_SUFFIX):
                raise OSError(f"{name}{_BACKUP_SUFFIX} exists already: not overwritten")
            self._write_then_rename(folder, name, expected, path + _BACKUP_SUFFIX, info)
        self._write_then_rename(folder, name, data, path, info, expected)

    @staticmethod
    def _write_then_rename(
        folder: str, name: str, data: bytes, target: str, info: os.stat_result, expected: bytes | None = None
    ) -> None:
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=_TEMP_SUFFIX)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, stat.S_IMODE(info.st_mode))
            if hasattr(os, "chown") and (os.stat(temporary).st_uid, os.stat(temporary).st_gid) != (
                info.st_uid,
                info.st_gid,
            ):
                os.chown(temporary, info.st_uid, info.st_gid)
            _check_unchanged(target, expected)
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


def _check_unchanged(path: str, expected: bytes | None) -> None:
    """Just before a replace: the file still holds what was read (a concurrent writer's change is kept)."""
    if expected is not None and Path(path).read_bytes() != expected:
        raise OSError("changed by someone else while migrating: left as it is")


class _FsspecFiles:
    """Any fsspec file system. An object store replaces an object in one PUT: readers see old or new."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs, self.root = fs, root.rstrip("/")

    def walk(self, failures: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
        for folder, subfolders, files in self.fs.walk(self.root, detail=False):
            subfolders.sort()
            yield folder, subfolders, sorted(files)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def replace(self, path: str, data: bytes, backup: bool, expected: bytes) -> None:
        if backup:
            if self.fs.exists(path + _BACKUP_SUFFIX):
                raise OSError(f"{path.rsplit('/', 1)[-1]}{_BACKUP_SUFFIX} exists already: not overwritten")
            self.fs.pipe_file(path + _BACKUP_SUFFIX, expected)
        if bytes(self.fs.cat_file(path)) != expected:
            raise OSError("changed by someone else while migrating: left as it is")
        self.fs.pipe_file(path, data)

    def remove(self, path: str) -> None:
        self.fs.rm_file(path)


def _open_files(location: str | os.PathLike[str]) -> tuple[_Files, str]:
    text = os.fspath(location)
    if not text.strip():
        raise NotAStoreError("the store path is empty")
    if "://" in text and not text.startswith("file://"):
        try:
            import fsspec

            fs, url_root = fsspec.core.url_to_fs(text)
        except ImportError as exc:
            raise NotAStoreError(f"{text}: this URL needs a package that is not installed ({exc})") from None
        except (ValueError, KeyError) as exc:  # fsspec's words for an unknown protocol
            raise NotAStoreError(f"{text}: not a URL fsspec can open ({exc})") from None
        root = url_root.rstrip("/")
        files: _Files = _FsspecFiles(fs, root)
        is_dir, is_file = fs.isdir, fs.isfile
    else:
        root = str(Path(text.removeprefix("file://")))
        files = _LocalFiles(Path(root))
        is_dir, is_file = os.path.isdir, os.path.isfile
    try:
        if not is_dir(root):
            raise NotAStoreError(f"{text}: no such folder")
        if not any(is_file(f"{root}/{name}") for name in _NODE_FILES):
            raise NotAStoreError(f"{text}: not a Zarr store (no zarr.json, .zgroup, .zarray or .zmetadata)")
    except OSError as exc:
        raise NotAStoreError(f"{text}: cannot be reached ({exc})") from None
    return files, root


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
        Called with (nodes seen, files changed) after each node.

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
    files, root = _open_files(location)
    with _store_lock(root if isinstance(files, _LocalFiles) and not dry_run else None):
        return _migrate_files(files, root, dry_run, backup, on_change, on_progress)


@contextmanager
def _store_lock(root: str | None) -> Iterator[None]:
    """One run at a time per local store, so that only dead runs' temporary files are removed.

    An advisory lock (``flock``) on the store's folder itself: no file is added,
    and the system releases it when the process ends, however it ends.
    """
    if root is None or fcntl is None:
        yield
        return
    descriptor = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StoreBusyError(f"{root}: another numcodecs-bytes migrate run is working on this store") from None
        yield
    finally:
        os.close(descriptor)


def _migrate_files(
    files: _Files,
    root: str,
    dry_run: bool,
    backup: bool,
    on_change: Callable[[str, list[Change]], None] | None,
    on_progress: Callable[[int, int], None] | None,
) -> MigrationReport:
    report = MigrationReport()
    skipped: list[tuple[str, str]] = []
    for folder, subfolders, names in files.walk(skipped):
        for name in names:
            if name.endswith(_TEMP_SUFFIX):  # left behind by a run that was killed (we hold the lock)
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
            except RecursionError:
                report.failures.append((relative, "nested too deeply to parse"))
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
    report.failures += [(_relative(path, root) or ".", reason) for path, reason in skipped]
    return report


def _migrate_file(
    files: _Files, path: str, name: str, relative: str, dry_run: bool, backup: bool
) -> tuple[Any, list[Change]]:
    """Migrate one metadata file; returns its parsed document and the changes."""
    data = files.read(path)
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""  # zarr reads it: keep it
    text = data[len(bom) :].decode("utf-8")
    document = json.loads(text)
    found = legacy_codecs(document, name)
    if found and not dry_run:
        files.replace(path, bom + _rewrite(text, document, found).encode("utf-8"), backup, data)
    return document, [Change(relative, location) for location, _ in found]


def _relative(path: str, root: str) -> str:
    """``path`` relative to the store's root (walks yield paths below it)."""
    return path[len(root) :].lstrip("/\\").replace(os.sep, "/")
