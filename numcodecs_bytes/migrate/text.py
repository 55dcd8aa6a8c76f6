"""Edits of a JSON file's text that change only what they must: a string token replaced, a member
added to an object in the file's own style. Everything else (key order, indentation, number
spellings, escapes, line endings) stays as it was.

Pure: text in, text out. The places are found from the text's structure in one pass over its tokens,
with no recursion (a deeply nested file cannot exhaust the stack).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

__all__ = ["JsonPath", "Spans", "member_added", "spans", "value_text"]

JsonPath = tuple[str | int, ...]
"""A place in a JSON document: object keys and array indices."""

# One JSON token: a string, a structural character, a scalar, or white space.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+|\s+', re.S)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


class Spans(NamedTuple):
    """Where values stand in a text: (start, end) of each string token and of each object, by JSON
    path."""

    strings: dict[JsonPath, tuple[int, int]]
    objects: dict[JsonPath, tuple[int, int]]


def spans(text: str, strings: set[JsonPath], objects: set[JsonPath]) -> Spans:
    """Where in ``text`` the string values at ``strings`` and the objects at ``objects`` stand.

    The text must be valid JSON (it was parsed before). Of repeated keys the
    last one counts, as for ``json.loads``.

    >>> spans('{"a": ["x", {"b": 1}]}', {("a", 0)}, {("a", 1)})
    Spans(strings={('a', 0): (7, 10)}, objects={('a', 1): (12, 20)})
    """
    found = Spans({}, {})
    # per open container: [is_object, current key or index, expecting a key, start]
    frames: list[list[Any]] = []
    for token in _TOKEN.finditer(text):
        char = token.group(0)[0]
        if char in " \t\r\n":
            continue
        top = frames[-1] if frames else None
        if char in "{[":
            frames.append([char == "{", None if char == "{" else 0, char == "{", token.start()])
        elif char in "}]":
            frame = frames.pop()
            path = tuple(f[1] for f in frames)
            if char == "}" and path in objects:
                found.objects[path] = (frame[3], token.end())
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
            if path in strings:
                found.strings[path] = token.span()
    return found


def member_added(text: str, start: int, end: int, key: str, value: Any) -> str:
    """The object ``text[start:end]`` with the member ``key: value`` added last, in the file's
    style: on a line of its own at its members' indentation where they stand one per line (nested
    objects alike), else after a comma with the spacing its members have.

    >>> member_added('{"name": "bytes"}', 0, 17, "configuration", {"endian": "little"})
    '{"name": "bytes", "configuration": {"endian": "little"}}'
    >>> pretty = '{\\n  "name": "bytes"\\n}'
    >>> print(member_added(pretty, 0, 21, "configuration", {"endian": "little"}))
    {
      "name": "bytes",
      "configuration": {
        "endian": "little"
      }
    }
    """
    body = text[start + 1 : end - 1]
    members = body.strip()
    colon, comma = _separators(text)
    # one member a line (an empty object too, in such a file)
    if "\n" in body or (not members and "\n" in text):
        if "\n" in body:
            line_start = text.rfind("\n", 0, end - 1) + 1
            closing_indent = (
                text[line_start : end - 1] if not text[line_start : end - 1].strip() else ""
            )
        else:
            closing_indent = _line_indentation(text, start)
        member_indent = _indentation(body) if members else closing_indent + _unit(text)
        newline = "\r\n" if "\r\n" in text else "\n"
        member = (
            f"{json.dumps(key)}{colon}{_pretty(value, member_indent, _unit(text), colon, newline)}"
        )
        separator = "," if members else ""
        return (
            f"{{{body.rstrip()}{separator}{newline}"
            f"{member_indent}{member}{newline}{closing_indent}}}"
        )
    member = f"{json.dumps(key)}{colon}{json.dumps(value, separators=(comma, colon))}"
    kept = body.rstrip()
    return f"{{{kept}{comma if members else ''}{member}{body[len(kept) :]}}}"


def value_text(text: str, start: int, value: Any) -> str:
    """``value`` as JSON to stand at ``start`` in ``text``, in the file's style: objects one member
    a line in a file written so, inline with the file's separators otherwise.

    >>> codec = {"name": "bytes"}
    >>> value_text('["bytes"]', 1, codec), value_text('{"a":["bytes"]}', 6, codec)
    ('{"name": "bytes"}', '{"name":"bytes"}')
    """
    colon, comma = _separators(text)
    if "\n" not in text:
        return json.dumps(value, separators=(comma, colon))
    newline = "\r\n" if "\r\n" in text else "\n"
    return _pretty(value, _line_indentation(text, start), _unit(text), colon, newline)


def _separators(text: str) -> tuple[str, str]:
    """The file's separators after a key and between members: ``": "`` and ``", "``, or ``":"`` and
    ``","``."""
    structure = _STRING.sub('""', text)  # separators in string values are not the file's
    colon = ":" if re.search(r'":\S', structure) and not re.search(r'":\s', structure) else ": "
    comma = "," if re.search(r",\S", structure) and not re.search(r",[ \t]", structure) else ", "
    if "," not in structure:  # one member at most: the separators go together
        comma = colon.replace(":", ",")
    return colon, comma


def _line_indentation(text: str, position: int) -> str:
    line = text[text.rfind("\n", 0, position) + 1 : position]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indentation(body: str) -> str:
    """The indentation of the last member's line in an object's text (its members one a line)."""
    lines = [line.rstrip("\r") for line in body.split("\n")[1:] if line.strip()]
    last = lines[-1] if lines else ""
    return last[: len(last) - len(last.lstrip())]


def _unit(text: str) -> str:
    """One level of the file's indentation: the smallest indentation of a line (two spaces where
    none)."""
    indents = [len(line) - len(line.lstrip(" \t")) for line in text.split("\n")[1:] if line.strip()]
    smallest = min((n for n in indents if n), default=2)
    return (" " if "\n " in text or "\t" not in text else "\t") * smallest


def _pretty(value: Any, indent: str, unit: str, colon: str, newline: str) -> str:
    """``value`` as JSON with nested objects one member a line, ``indent`` being the line it starts
    on."""
    if not isinstance(value, dict) or not value:
        return json.dumps(value)
    inner = indent + unit
    members = [
        f"{inner}{json.dumps(k)}{colon}{_pretty(v, inner, unit, colon, newline)}"
        for k, v in value.items()
    ]
    return "{" + newline + f",{newline}".join(members) + f"{newline}{indent}}}"
