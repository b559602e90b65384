"""Where a key sits in a TOML text: a light line scan, so config errors can say "line N".

tomllib returns plain dicts without positions, so a semantic error (a value out of range, a
block outside the tank) would otherwise name only the key. This scan follows `[table]` and
`[[array]]` headers and `key =` lines, which is how case files are written; keys given as
inline tables or dotted keys in another table are not found, and the caller then names the key
without a line.
"""

from __future__ import annotations

import re

__all__ = ["key_line"]

_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*([^\[\]]+?)\s*\]\]")
_TABLE_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
_KEY = re.compile(r"""^\s*([A-Za-z0-9_.\-]+|"[^"]*"|'[^']*')\s*=""")


def _name(text: str) -> str:
    """A header or key name without quotes and blanks around dots."""
    return ".".join(part.strip().strip("\"'") for part in text.split("."))


def key_line(
    text: str, section: str, key: str | None = None, index: int | None = None
) -> int | None:
    """The 1-based line of `key` in `[section]` (entry `index` of `[[section]]`), or None.

    With `key` None, or when the key is not written there, the line of the section's header;
    None when the section is not written as a header either.
    """
    current: str | None = ""
    entries: dict[str, int] = {}
    header: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        array = _ARRAY_HEADER.match(line)
        table = None if array else _TABLE_HEADER.match(line)
        if array or table:
            name = _name((array or table).group(1))  # type: ignore[union-attr]
            position = None
            if array:
                position = entries.get(name, -1) + 1
                entries[name] = position
            wanted = name == section and (index is None or position == index)
            current = section if wanted else None
            if wanted and header is None:
                header = number
            continue
        match = _KEY.match(line)
        if match is None or key is None:
            continue
        name = _name(match.group(1))
        if current == section and name == key:
            return number
        if current == "" and name == f"{section}.{key}" and index is None:
            return number
    return header
