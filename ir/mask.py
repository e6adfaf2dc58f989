"""Hide attribute-like macros from tree-sitter without moving a byte.

tree-sitter-cuda knows CUDA's keywords but not the attribute macros real code builds from
them (``#define FLASHINFER_INLINE inline __attribute__((always_inline)) __device__``) nor
``__align__(16)``; each use becomes an ERROR node. Before parsing, such uses are replaced
by spaces of the same length, so every byte offset still points at the original text (which
the module keeps, prints and edits); the qualifiers the macro stood for are remembered and
given back to the functions that used it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that make a macro body "only attributes": qualifiers and attribute syntax.
_ATTRIBUTE_WORDS = {
    "inline",
    "static",
    "__inline__",
    "__forceinline__",
    "__noinline__",
    "__device__",
    "__host__",
    "__global__",
    "constexpr",
    "__attribute__",
    "always_inline",
    "noinline",
    "unused",
    "__align__",
    "__restrict__",
}
# The words among them that are qualifiers a function keeps (attribute arguments are not).
_QUALIFIERS = {
    "inline",
    "static",
    "constexpr",
    "__inline__",
    "__forceinline__",
    "__noinline__",
    "__device__",
    "__host__",
    "__global__",
}
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+((?:\\\r?\n|\\.|[^\\\n])*)", re.M)
# ``__align__(16)``, ``__align__(alignof(T))``: parentheses nest up to three deep.
_ALIGN = re.compile(rb"__align__\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")
_WORD = re.compile(r"[A-Za-z_]\w*")
# Any #define (object- or function-like) with its continuation lines.
_ANY_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define\b(?:\\\r?\n|\\.|[^\\\n])*", re.M)
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Masked:
    """The text tree-sitter parses, and the qualifiers each masked macro stood for."""

    text: bytes
    attribute_macros: dict[str, tuple[str, ...]]


def attribute_macros(source: bytes) -> dict[str, tuple[str, ...]]:
    """Object-like macros whose body holds only qualifiers and attributes, with those qualifiers."""
    found: dict[str, tuple[str, ...]] = {}
    for m in _DEFINE.finditer(source):
        name = m.group(1).decode()
        body = m.group(2).decode("utf-8", "replace").replace("\\\n", " ")
        words = _WORD.findall(body)
        if not words:
            continue
        stripped = re.sub(r"\(\([^)]*\)\)|\([^()]*\)", " ", body)
        if all(w in _ATTRIBUTE_WORDS or w in found for w in words) and not re.search(r"[^\w\s]", stripped):
            quals: list[str] = []
            for w in words:
                if w in found:
                    quals.extend(found[w])  # a macro built from another attribute macro
                elif w in _QUALIFIERS:
                    quals.append(w)
            found[name] = tuple(quals)
    return found


def mask(source: bytes) -> Masked:
    """Blank ``__align__(N)``, uses of attribute macros and comments in #define bodies.

    Every offset is kept: only bytes other than newlines are replaced, by spaces.
    """
    macros = attribute_macros(source)
    data = bytearray(source)

    def blank(start: int, end: int) -> None:
        for i in range(start, end):
            if data[i] not in (0x0A, 0x0D):
                data[i] = 0x20

    for m in _ALIGN.finditer(source):
        blank(m.start(), m.end())
    # tree-sitter ends a #define body at ``/*``: the rest of a multi-line dispatch macro
    # would be parsed as code. Comments inside bodies are blanked (the module keeps them).
    for d in _ANY_DEFINE.finditer(source):
        for c in _BLOCK_COMMENT.finditer(source, d.start(), d.end()):
            blank(c.start(), c.end())
    if macros:
        define_spans = [(m.start(), m.end()) for m in _DEFINE.finditer(source)]
        pattern = re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in macros) + rb")\b")
        for m in pattern.finditer(source):
            if any(s <= m.start() < e for s, e in define_spans):
                continue
            blank(m.start(), m.end())
    return Masked(bytes(data), macros)
