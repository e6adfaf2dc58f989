"""Statement variants under a knob: ``#if KNOB-condition / new / #else / original / #endif``.

Passes that restructure a kernel (``cluster-rows``, ``early-loads``) change a few statements and
must leave the original byte for byte at the knob's default. Editing a statement in place
cannot promise that (``blockIdx.y * n + i`` is not ``i`` even when ``blockIdx.y`` is 0); a
preprocessor group can: the template keeps the original lines in the ``#else`` branch, and
:func:`ktx.template.lower` keeps only the branch the config selects, so the default config
instantiates to the original lines. Whole lines only, so that tree-sitter still parses the
template (a group that cuts a statement in two does not parse).

:class:`Variants` collects, per statement, the sub-edits of its new text, then writes each
statement's group once (several changes to one statement land in one variant).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tree_sitter as ts

from ktx.passbase import Refuse, Rewriter


@dataclass
class Variants:
    """Per-statement sub-edits, written as ``#if cond`` groups by :meth:`commit`."""

    rw: Rewriter
    cond: str
    edits: dict[int, tuple[ts.Node, list[tuple[int, int, str]]]] = field(default_factory=dict)

    def change(self, stmt: ts.Node, start: int, end: int, text: str) -> None:
        """In the new variant of ``stmt``, bytes ``[start, end)`` (module offsets) become ``text``."""
        if not (stmt.start_byte <= start <= end <= stmt.end_byte):
            raise Refuse(f"an edit at byte {start} falls outside its statement (a pass bug)")
        _, subs = self.edits.setdefault(stmt.id, (stmt, []))
        if (start, end, text) not in subs:
            subs.append((start, end, text))

    def commit(self) -> None:
        for stmt, subs in self.edits.values():
            write_variant(self.rw, stmt, subs, self.cond)


def line_bounds(source: bytes, start: int, end: int) -> tuple[int, int]:
    """The start of the line holding ``start`` and the end (the newline) of the one holding ``end``."""
    first = source.rfind(b"\n", 0, start) + 1
    last = source.find(b"\n", end)
    return first, len(source) if last < 0 else last


def write_variant(
    rw: Rewriter, stmt: ts.Node, subs: list[tuple[int, int, str]], cond: str, start: int | None = None
) -> None:
    """Wrap the lines of ``stmt``: ``#if cond`` + edited copy + ``#else`` + original + ``#endif``.

    ``start`` (a line start before ``stmt``) takes preceding lines in too, such as a ``#pragma``.
    """
    source = rw.target.module.source
    first, last = line_bounds(source, stmt.start_byte, stmt.end_byte)
    line = stmt.start_point[0] + 1
    if source[first : stmt.start_byte].strip():
        raise Refuse(f"line {line}: the statement does not start its line, so it cannot get a variant")
    tail = source[stmt.end_byte : last].strip()
    if tail and not tail.startswith(b"//"):
        raise Refuse(f"line {line}: code follows the statement on its line, so it cannot get a variant")
    first = first if start is None else start
    new = bytearray(source[first:last])
    for a, b, text in sorted(subs, key=lambda s: (s[0], s[1]), reverse=True):
        new[a - first : b - first] = text.encode()
    wrap_lines(rw, first, last, new.decode(), cond)


def wrap_lines(rw: Rewriter, first: int, last: int, new: str, cond: str) -> None:
    """Lines ``[first, last)`` (a line start, a line end) become the ``#else`` of ``new``."""
    rw.insert(first, f"#if {cond}\n{new}\n#else\n")
    rw.insert(last, "\n#endif")


def insert_after_line(rw: Rewriter, offset: int, lines: list[str], cond: str) -> None:
    """Insert ``lines`` under ``#if cond`` after the line that holds ``offset``.

    The text goes before that line's newline, so it never meets an edit at the next line's start.
    """
    source = rw.target.module.source
    _, end = line_bounds(source, offset, offset)
    body = "".join(f"\n{text}" for text in lines)
    rw.insert(end, f"\n#if {cond}{body}\n#endif")


def insert_before_line(rw: Rewriter, offset: int, lines: list[str], cond: str) -> None:
    """Insert ``lines`` under ``#if cond`` before the line that holds ``offset``."""
    source = rw.target.module.source
    start, _ = line_bounds(source, offset, offset)
    body = "".join(f"{text}\n" for text in lines)
    rw.insert(start, f"#if {cond}\n{body}#endif\n")
