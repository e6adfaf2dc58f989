"""Where each key and array element of a TOML file sits (line and column).

``tomllib`` returns plain dicts with no positions, yet a spec error is only useful when it says
*which line* to fix. This is a light scanner, not a TOML parser: it follows table headers,
``key = value`` lines and the brackets/braces inside values (skipping strings and comments),
and records the position of every key path such as ``("args", 2, "dtype")`` or
``("shapes", "default", 3, "tokens")``. The file has already been parsed by ``tomllib``, so the
scanner may assume well-formed input and stay small.

>>> pos = TomlPositions.scan('a = 1\\n[[args]]\\nname = "x"\\n[[args]]\\nname = "y"\\n', "k.toml")
>>> pos.locate(("args", 1, "name")).line
5
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ktx.ir.errors import Location

PathPart = str | int
KeyPath = tuple[PathPart, ...]

_BARE = re.compile(r"[A-Za-z0-9_\-]+")


def _split_dotted(text: str) -> list[str]:
    """Split ``a."b.c".d`` into its parts."""
    parts: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \t.":
            i += 1
            continue
        if ch in "\"'":
            end = text.index(ch, i + 1)
            parts.append(text[i + 1 : end])
            i = end + 1
            continue
        m = _BARE.match(text, i)
        if not m:
            break
        parts.append(m.group(0))
        i = m.end()
    return parts


@dataclass
class TomlPositions:
    """Key path -> (line, col), both 1-based."""

    path: str | None
    where: dict[KeyPath, tuple[int, int]]

    @classmethod
    def scan(cls, text: str, path: str | None = None) -> TomlPositions:
        scanner = _Scanner(text)
        scanner.run()
        return cls(path, scanner.where)

    def locate(self, key: KeyPath) -> Location:
        """The position of ``key``, or of its nearest ancestor that was found."""
        probe = tuple(key)
        while probe:
            hit = self.where.get(probe)
            if hit is not None:
                return Location(self.path, hit[0], hit[1])
            probe = probe[:-1]
        return Location(self.path, 1, 1)

    def value_col(self, key: KeyPath) -> Location:
        """Position of the first character of the *value* of ``key`` (for expression errors)."""
        hit = self.where.get(("=", *tuple(key)))
        if hit is None:
            return self.locate(key)
        return Location(self.path, hit[0], hit[1])


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.line_start = 0
        self.where: dict[KeyPath, tuple[int, int]] = {}
        self.array_counts: dict[KeyPath, int] = {}

    # position helpers
    def _pos(self, index: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, index) + 1
        start = self.text.rfind("\n", 0, index) + 1
        return line, index - start + 1

    def _record(self, key: KeyPath, index: int) -> None:
        self.where.setdefault(key, self._pos(index))

    def _record_value(self, key: KeyPath, index: int) -> None:
        # A string value's content starts after its quote.
        if self.text.startswith(('"""', "'''"), index):
            index += 3
        elif index < len(self.text) and self.text[index] in "\"'":
            index += 1
        self.where.setdefault(("=", *key), self._pos(index))

    def _skip_ws(self, newlines: bool) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.i += 1
            elif ch == "#":
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            else:
                break

    def _skip_string(self) -> None:
        text = self.text
        for quote in ('"""', "'''"):
            if text.startswith(quote, self.i):
                end = text.find(quote, self.i + 3)
                self.i = len(text) if end < 0 else end + 3
                while text.startswith(quote[0], self.i):  # up to two extra quotes allowed
                    self.i += 1
                return
        quote = text[self.i]
        j = self.i + 1
        while j < len(text) and text[j] != quote and text[j] != "\n":
            j += 2 if (quote == '"' and text[j] == "\\") else 1
        self.i = j + 1

    def run(self) -> None:
        text = self.text
        table: KeyPath = ()
        while self.i < len(text):
            self._skip_ws(newlines=True)
            if self.i >= len(text):
                break
            if text.startswith("[[", self.i):
                end = text.index("]]", self.i)
                parts = tuple(_split_dotted(text[self.i + 2 : end]))
                count = self.array_counts.get(parts, 0)
                self.array_counts[parts] = count + 1
                self._record(parts, self.i)
                table = (*parts, count)
                self._record(table, self.i)
                self.i = end + 2
                continue
            if text[self.i] == "[":
                end = text.index("]", self.i)
                table = tuple(_split_dotted(text[self.i + 1 : end]))
                self._record(table, self.i)
                self.i = end + 1
                continue
            key_start = self.i
            eq = self._find_eq()
            if eq < 0:
                # Not a key line: skip it.
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
                continue
            parts = tuple(_split_dotted(text[key_start:eq]))
            key = (*table, *parts)
            self._record(key, key_start)
            self.i = eq + 1
            self._value(key)

    def _find_eq(self) -> int:
        """Index of the ``=`` ending the key that starts at ``self.i`` (or -1)."""
        text = self.text
        j = self.i
        while j < len(text) and text[j] != "\n":
            ch = text[j]
            if ch in "\"'":
                end = text.find(ch, j + 1)
                if end < 0:
                    return -1
                j = end + 1
                continue
            if ch == "=":
                return j
            if not (_BARE.match(ch) or ch in " \t."):
                return -1
            j += 1
        return -1

    def _value(self, key: KeyPath) -> None:
        """Scan one value, recording nested keys and array elements."""
        text = self.text
        self._skip_ws(newlines=False)
        self._record_value(key, self.i)
        if self.i >= len(text):
            return
        ch = text[self.i]
        if ch == "[":
            self.i += 1
            index = 0
            while True:
                self._skip_ws(newlines=True)
                if self.i >= len(text):
                    return
                if text[self.i] == "]":
                    self.i += 1
                    return
                elem = (*key, index)
                self._record(elem, self.i)
                self._value(elem)
                self._skip_ws(newlines=True)
                if self.i < len(text) and text[self.i] == ",":
                    self.i += 1
                index += 1
        if ch == "{":
            self.i += 1
            while True:
                self._skip_ws(newlines=True)
                if self.i >= len(text):
                    return
                if text[self.i] == "}":
                    self.i += 1
                    return
                if text[self.i] == ",":
                    self.i += 1
                    continue
                start = self.i
                eq = self._find_eq()
                if eq < 0:
                    self.i += 1
                    continue
                sub = (*key, *_split_dotted(text[start:eq]))
                self._record(sub, start)
                self.i = eq + 1
                self._value(sub)
        if ch in "\"'":
            self._skip_string()
            return
        # A bare scalar: number, bool, date. Ends at , ] } newline or comment.
        while self.i < len(text) and text[self.i] not in ",]}\n#":
            self.i += 1
