"""Where a file instantiates a template function with written arguments: the launcher's
instantiations, for a kernel whose template arguments are the launcher's own parameters.

``kQuantizeBlockwise<T, 4096, 4, STOCHASTIC, DATA_TYPE><<<...>>>`` inside ``template <typename
T, int STOCHASTIC, int DATA_TYPE> void quantizeBlockwise(...)`` names no instantiation by
itself; the file's ``template void quantizeBlockwise<half, 1, General8bit>(...);`` lines (or
calls ``quantizeBlockwise<half, 0, NF4>(...)``, or a macro such as DeepSpeed's
``INSTANTIATE_FOR_TYPE(float)`` whose body is one) say which the project builds. A draft can
take one of them as a guess that at least exists, and name the others in its TODO. The text
is read, not the tree: macro bodies are not parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Instance:
    """One instantiation: the written template arguments, the line, and how (``template``
    for an explicit instantiation, ``call``, or ``macro NAME`` for one a macro expands to)."""

    args: tuple[str, ...]
    line: int
    how: str
    offset: int = -1
    """Where in the text (a character offset): -1 where unknown."""


def _balanced(text: str, start: int, open_: str, close: str) -> int | None:
    """Index just past the ``close`` matching the ``open_`` at ``start``, or None."""
    depth = 0
    for i in range(start, min(len(text), start + 4000)):
        c = text[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        elif c in ";{}" and open_ == "<":
            return None
    return None


def split_args(text: str) -> tuple[str, ...]:
    """``half, Traits<64, 4>, 0`` -> the three arguments (commas inside ``<>``/``()`` kept)."""
    out, depth, cur = [], 0, ""
    for c in text:
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(" ".join(cur.split()))
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(" ".join(cur.split()))
    return tuple(out)


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)", re.M)


def _macro_at(text: str, pos: int) -> tuple[str, tuple[str, ...]] | None:
    """The function-like macro whose body (its ``\\``-continued lines) holds ``pos``, or None."""
    for m in _DEFINE.finditer(text, 0, pos + 1):
        stop = m.end()
        while True:  # the end of the logical line
            nl = text.find("\n", stop)
            if nl < 0:
                stop = len(text)
                break
            stop = nl
            if not text[:nl].rstrip(" \t\r").endswith("\\"):
                break
            stop = nl + 1
        if m.start() <= pos < stop:
            return m.group(1), tuple(q.strip() for q in m.group(2).split(",") if q.strip())
    return None


def _invocations(text: str, macro: str) -> list[tuple[tuple[str, ...], int]]:
    """``MACRO(a, b)`` uses outside ``#define`` lines: their arguments and lines."""
    out = []
    for m in re.finditer(rf"\b{re.escape(macro)}\s*\(", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start : m.start()].lstrip().startswith("#"):
            continue
        end = _balanced(text, m.end() - 1, "(", ")")
        if end is None:
            continue
        out.append((split_args(text[m.end() : end - 1]), text.count("\n", 0, m.start()) + 1))
    return out


def instances(text: str, name: str) -> tuple[Instance, ...]:
    """Every ``name<...>(`` in ``text`` with written arguments, in file order: explicit
    instantiations, calls, and the instantiations a function-like macro's uses expand to."""
    found: list[tuple[int, Instance]] = []
    for m in re.finditer(rf"(?<![\w:.>])(?:\w+::)*{re.escape(name)}\s*<", text):
        end = _balanced(text, m.end() - 1, "<", ">")
        if end is None or not text[end:].lstrip().startswith("("):
            continue
        args = split_args(text[m.end() : end - 1])
        before = text[max(0, m.start() - 200) : m.start()]
        how = "template" if re.search(r"\btemplate\s+[\w:\s*&<>,]*$", before) else "call"
        macro = _macro_at(text, m.start())
        if macro is None:
            found.append((m.start(), Instance(args, text.count("\n", 0, m.start()) + 1, how, m.start())))
            continue
        mname, params = macro
        for given, line in _invocations(text, mname):
            if len(given) != len(params):
                continue
            subst = dict(zip(params, given, strict=True))
            expanded = tuple(_substitute(a, subst) for a in args)
            at = _offset(text, line)
            found.append((at, Instance(expanded, line, f"macro {mname}", at)))
    found.sort(key=lambda f: f[0])
    return tuple(i for _, i in found)


def _substitute(text: str, values: dict[str, str]) -> str:
    """``text`` with each word that is a key of ``values`` replaced by its value."""
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda w: values.get(w.group(0), w.group(0)), text)


def _offset(text: str, line: int) -> int:
    """The offset of the start of ``line`` (1-based)."""
    at = 0
    for _ in range(line - 1):
        at = text.find("\n", at) + 1
    return at
