"""Byte spans and line/column lookup.

All IR positions are byte offsets into the original source, because tree-sitter works in
bytes and byte-range edits are what keep comments and formatting intact. Humans read
lines and columns, so :class:`LineIndex` converts, 1-based as editors show them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Span:
    """A half-open byte range ``[start, end)`` of the source, with its 1-based line and column."""

    start: int
    end: int
    line: int = 0
    col: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad span [{self.start}, {self.end})")

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    @property
    def length(self) -> int:
        return self.end - self.start


class LineIndex:
    """Maps byte offsets to 1-based (line, column) pairs; columns count bytes."""

    def __init__(self, source: bytes) -> None:
        self._starts = [0]
        pos = source.find(b"\n")
        while pos >= 0:
            self._starts.append(pos + 1)
            pos = source.find(b"\n", pos + 1)

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        line, col = self.line_col(start)
        return Span(start, end, line, col)

    def line_start(self, line: int) -> int:
        """Byte offset of the first byte of a 1-based line."""
        return self._starts[line - 1]
