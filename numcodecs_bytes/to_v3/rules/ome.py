"""OME-Zarr's conventions: a 0.4 hierarchy (Zarr v2) made 0.5 (Zarr v3), as the rules that say
what each converted node's ``zarr.json`` holds.

OME-Zarr 0.5 is Zarr v3 plus a change of metadata (RFC-2): every OME group
keeps its OME keys (`OME_KEYS`) under an ``ome`` attribute with
``"version": "0.5"``, ``version`` leaves ``multiscales[*]`` and ``well``, and
every level array of a multiscale image names its dimensions (``dimension_names``)
after the multiscale's axes. No chunk changes. The spec text still asks for a
``version`` in ``plate`` (ome/ngff#322) where the schema has none: ``plate`` and
``image-label`` keep one, ``"0.5"``, as ome-zarr-py writes them and as both
ome-zarr-py and ome-zarr-models read them.

A group is made 0.5 only where the result holds together (`ome_05`): every
level an array of as many dimensions as the axes, of one data type (an integer
type in a label image), every label, well, field and series it names made 0.5
too, and every OME group below it. Where not, it is converted as plain Zarr v3,
its 0.4 attributes kept as they are, with a note giving the reason; so are the
groups that name or hold it.
Pure: documents in, documents out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from .documents import depth, parents

__all__ = [
    "OME_KEYS",
    "attributes_05",
    "is_ome_04",
    "kind_of",
    "level_dimension_names",
    "ome_05",
    "with_dimension_names",
]

OME_KEYS = (
    "multiscales",
    "omero",
    "labels",
    "image-label",
    "plate",
    "well",
    "bioformats2raw.layout",
    "series",
)
"""The attributes OME-Zarr 0.4 keeps at a group's top level, and 0.5 under ``ome``."""

VERSIONED = ("multiscales", "image-label", "plate", "well")
"""The OME keys whose values carry a ``version`` in 0.4."""

FROM, TO = "0.4", "0.5"

INTEGER_TYPES = {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
"""Zarr v3 data types a label image may have (the spec: integers)."""


def _join(group: str, path: str) -> str:
    """A path relative to a group, as the run names nodes ("" the root)."""
    joined = posixpath.normpath(posixpath.join("/", group, path))
    return joined.strip("/")


def _axis_names(multiscale: Any) -> list[str] | None:
    """A multiscale's axes names (0.4: objects with a ``name``), or None where they are not
    distinct names."""
    axes = multiscale.get("axes") if isinstance(multiscale, dict) else None
    if not isinstance(axes, list):
        return None
    names = [axis.get("name") if isinstance(axis, dict) else None for axis in axes]
    strings = [name for name in names if isinstance(name, str) and name]
    if not strings or len(strings) != len(names) or len(set(strings)) != len(strings):
        return None
    return strings


def _datasets(multiscale: dict[str, Any]) -> list[str]:
    datasets = multiscale.get("datasets")
    if not isinstance(datasets, list):
        return []
    return [d["path"] for d in datasets if isinstance(d, dict) and isinstance(d.get("path"), str)]


def _versions(attributes: Mapping[str, Any]) -> list[Any]:
    """The versions a group's 0.4 OME keys declare (one per multiscale)."""
    found: list[Any] = []
    for key in VERSIONED:
        value = attributes.get(key)
        for entry in value if key == "multiscales" and isinstance(value, list) else [value]:
            if isinstance(entry, dict):
                found.append(entry.get("version"))
    return found


def level_dimension_names(group: str, attributes: Mapping[str, Any]) -> dict[str, list[str]]:
    """The ``dimension_names`` of each level array of an OME-Zarr 0.4 group's multiscales, by the
    array's path: its multiscale's axes names; none for a group that is no 0.4 image.

    Examples
    --------
    >>> axes = [{"name": "c", "type": "channel"}, {"name": "y"}, {"name": "x"}]
    >>> multiscale = {"version": "0.4", "axes": axes, "datasets": [{"path": "0"}, {"path": "1"}]}
    >>> level_dimension_names("plate/A/1/0", {"multiscales": [multiscale]})
    {'plate/A/1/0/0': ['c', 'y', 'x'], 'plate/A/1/0/1': ['c', 'y', 'x']}
    """
    multiscales = attributes.get("multiscales")
    if not isinstance(multiscales, list):
        return {}
    names: dict[str, list[str]] = {}
    for multiscale in multiscales:
        axes = _axis_names(multiscale)
        if axes is not None and multiscale.get("version") == FROM:
            for path in _datasets(multiscale):
                names[_join(group, path)] = axes
    return names


def with_dimension_names(
    document: dict[str, Any], names: list[str]
) -> tuple[dict[str, Any], str | None]:
    """An array's ``zarr.json`` document with the dimension names its OME multiscale gives (where
    they are as many as its dimensions; else as it is: the group's check reports it), and a note
    where they replace others (xarray's)."""
    shape = document.get("shape")
    if not isinstance(shape, list) or len(shape) != len(names):
        return document, None
    before = document.get("dimension_names")
    note = None
    if before is not None and list(before) != names:
        note = f"dimension_names {before} replaced by its OME multiscale's axes {names}"
    return {**document, "dimension_names": list(names)}, note


def _without_version(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != "version"} if isinstance(value, dict) else value


def attributes_05(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.4 group's attributes as 0.5 holds them: the OME keys under ``ome``, the rest as they
    are.

    Examples
    --------
    >>> attributes_05({"well": {"images": [{"path": "0"}], "version": "0.4"}, "mine": 1})
    {'mine': 1, 'ome': {'version': '0.5', 'well': {'images': [{'path': '0'}]}}}
    >>> attributes_05({"plate": {"wells": [], "version": "0.4"}})["ome"]["plate"]
    {'wells': [], 'version': '0.5'}
    """
    ome: dict[str, Any] = {"version": TO}
    for key in OME_KEYS:
        if key not in attributes:
            continue
        value = attributes[key]
        if key == "multiscales" and isinstance(value, list):
            value = [_without_version(entry) for entry in value]
        elif key == "well":
            value = _without_version(value)
        elif key in ("plate", "image-label") and isinstance(value, dict):
            value = {**value, "version": TO}
        ome[key] = value
    rest = {key: value for key, value in attributes.items() if key not in OME_KEYS}
    return {**rest, "ome": ome}


def is_ome_04(attributes: Mapping[str, Any]) -> bool:
    """Whether a group's attributes hold OME keys at the top level (0.4 and earlier)."""
    return any(key in attributes for key in OME_KEYS)


def _ome_05(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A group's ``ome`` attribute where it is OME-Zarr 0.5."""
    attributes = document.get("attributes") if document else None
    ome = attributes.get("ome") if isinstance(attributes, dict) else None
    return ome if isinstance(ome, dict) and ome.get("version") == TO else None


def kind_of(document: Mapping[str, Any] | None) -> str | None:
    """What an OME-Zarr 0.5 group is ("image", "label image", "labels", "plate", "well",
    "collection", "series", "OME group"); None for any other node."""
    ome = _ome_05(document)
    if ome is None:
        return None
    for key, kind in (
        ("image-label", "label image"),
        ("multiscales", "image"),
        ("plate", "plate"),
        ("well", "well"),
        ("labels", "labels"),
        ("bioformats2raw.layout", "collection"),
        ("series", "series"),
    ):
        if key in ome:
            return kind
    return "OME group"


def _named(group: str, attributes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The OME groups a group names, (what, path): its labels, a plate's wells, a well's fields,
    a collection's series (relative to the collection's root, the ``OME`` group's parent)."""
    named: list[tuple[str, str]] = []
    labels = attributes.get("labels")
    if isinstance(labels, list):
        named += [("label", _join(group, name)) for name in labels if isinstance(name, str)]
    for key, what, entries in (("plate", "well", "wells"), ("well", "field", "images")):
        value = attributes.get(key)
        listed = value.get(entries) if isinstance(value, dict) else None
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                named.append((what, _join(group, entry["path"])))
    series = attributes.get("series")
    if isinstance(series, list):
        root = posixpath.dirname(group)
        named += [("series", _join(root, path)) for path in series if isinstance(path, str)]
    return named


def _problem(
    group: str,
    attributes: Mapping[str, Any],
    documents: Mapping[str, dict[str, Any]],
    made: Mapping[str, Any],
) -> str | None:
    """Why a 0.4 group cannot be made 0.5 as it is; None where it can."""
    if "ome" in attributes:
        return "it has an 'ome' attribute already, beside 0.4's keys"
    versions = sorted({str(version) for version in _versions(attributes)})
    if versions and versions != [FROM]:
        return f"it declares OME-Zarr version {', '.join(versions)}; 0.5 is made from 0.4 alone"
    multiscales = attributes.get("multiscales", [])
    if not isinstance(multiscales, list) or not all(isinstance(m, dict) for m in multiscales):
        return "its multiscales is not a list of objects"
    for i, multiscale in enumerate(multiscales):
        axes = _axis_names(multiscale)
        if axes is None:
            return f"multiscales[{i}] has no axes of distinct names"
        data_types = set()
        datasets = _datasets(multiscale)
        if not datasets:
            return f"multiscales[{i}] names no dataset"
        for path in datasets:
            level = documents.get(_join(group, path))
            if level is None or level.get("node_type") != "array":
                return f"its dataset {path!r} is no array of the store, or was not converted"
            if len(level["shape"]) != len(axes):
                return (
                    f"its dataset {path!r} has {len(level['shape'])} dimensions where its axes "
                    f"are {len(axes)} ({', '.join(axes)})"
                )
            if level.get("dimension_names") != axes:
                return (
                    f"its dataset {path!r} names its dimensions {level.get('dimension_names')} "
                    f"where 0.5 asks for its axes {axes} (its zarr.json is kept as it is)"
                )
            data_types.add(str(level.get("data_type")))
        if len(data_types) > 1:
            return f"its levels differ in data type ({', '.join(sorted(data_types))})"
        if "image-label" in attributes and not data_types <= INTEGER_TYPES:
            return f"a label image of data type {data_types.pop()}, not an integer type"
    for what, path in _named(group, attributes):
        if path not in made and _ome_05(documents.get(path)) is None:
            return f"its {what} {path!r} is not made OME-Zarr 0.5 (see there)"
    return None


def ome_05(
    documents: Mapping[str, dict[str, Any]], convertible: set[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The groups among ``convertible`` (by path) that hold OME-Zarr 0.4 made 0.5, given every
    node's ``zarr.json`` document as converted (``documents``: arrays with their dimension names),
    and the reason each other 0.4 group stays plain Zarr v3. Deepest first: a group is made 0.5
    only where every OME group it holds or names is.

    Examples
    --------
    >>> axes = [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    >>> image = {"multiscales": [{"version": "0.4", "axes": axes, "datasets": [{"path": "0"}]}]}
    >>> documents = {
    ...     "": {"node_type": "group", "attributes": image},
    ...     "0": {"node_type": "array", "shape": [4, 4], "data_type": "uint16",
    ...           "dimension_names": ["y", "x"]},
    ... }
    >>> made, problems = ome_05(documents, {"", "0"})
    >>> made[""]["attributes"]["ome"]["multiscales"][0]["datasets"]
    [{'path': '0'}]
    >>> documents["0"]["shape"] = [1, 4, 4]
    >>> ome_05(documents, {"", "0"})[1][""]
    "OME-Zarr 0.4 not made 0.5: its dataset '0' has 3 dimensions where its axes are 2 (y, x); ...
    """
    made: dict[str, dict[str, Any]] = {}
    problems: dict[str, str] = {}
    groups = [
        path
        for path, document in documents.items()
        if path in convertible
        and document.get("node_type") == "group"
        and is_ome_04(document.get("attributes") or {})
    ]
    # below each folder, the first 0.4 group not made 0.5 (here, or left by an earlier run): no
    # group holding one is made 0.5. Deepest first, every group below one is decided before it.
    unmade_below: dict[str, str] = {}

    def left(path: str) -> None:
        for parent in parents(path):
            if parent not in unmade_below or path < unmade_below[parent]:
                unmade_below[parent] = path

    deciding = set(groups)
    for path, document in documents.items():
        if path not in deciding and document.get("node_type") == "group":
            if is_ome_04(document.get("attributes") or {}):
                left(path)
    for path in sorted(groups, key=lambda path: (-depth(path), path)):
        document = documents[path]
        problem = _problem(path, document["attributes"], documents, made)
        held = unmade_below.get(path)
        if problem is None and held is not None:
            problem = f"the OME group {held!r} it holds is not made OME-Zarr 0.5 (see there)"
        if problem is None:
            made[path] = {**document, "attributes": attributes_05(document["attributes"])}
        else:
            problems[path] = (
                f"OME-Zarr 0.4 not made 0.5: {problem}; converted as plain Zarr v3, its 0.4 "
                "attributes kept as they are"
            )
            left(path)
    return made, problems
