"""C element types and the spec dtype each one is, through the file's own aliases.

``ktx init`` types each ``[[args]]`` entry from the kernel's parameter types. The types are
written as the project spells them: ``float``, ``__nv_bfloat16``, or an alias (``typedef float
floatX;``, ``#define floatX float``) in the file or a header it includes from its own folder,
under ``#if`` branches the file selects. :func:`dtype_of` follows those aliases (only the
branches the file's own ``#define``s take) to a name of :data:`DTYPES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ktx.dtypes import C_TYPES

if TYPE_CHECKING:
    from ktx.ir.module import Module


#: C/CUDA element types to spec dtypes (PyTorch's c10::BFloat16 ... included); ktx.dtypes is a leaf.
DTYPES: Mapping[str, str] = C_TYPES


def dtype_of(module: Module, path: Path, type_name: str) -> str | None:
    """The dtype of the C type ``type_name`` (qualifiers dropped, aliases followed), or None."""
    name = " ".join(type_name.replace("const", " ").replace("__restrict__", " ").split())
    seen: set[str] = set()
    while name not in DTYPES and name not in seen:
        seen.add(name)
        alias = _alias(module, path, name)
        if alias is None:
            return None
        name = alias
    return DTYPES.get(name)


def _alias(module: Module, path: Path, name: str) -> str | None:
    """The type ``name`` stands for, by ``typedef``/``using``/``#define`` in the file or a local
    header it includes, in the branches of ``#if defined(M)``/``#ifdef``/``#else`` that the
    file's own ``#define M`` lines select (llm.c's ``#define ENABLE_BF16`` picks bf16)."""
    main = module.text_str
    defined = set(re.findall(r"^\s*#\s*define\s+(\w+)", main, re.M))
    texts = []
    for inc in re.findall(r'#\s*include\s+"([^"]+)"', main):
        header = path.parent / inc
        if header.is_file():
            texts.append(header.read_text(errors="replace"))
    texts.append(main)
    pattern = re.compile(
        rf"typedef\s+([\w:\s]+?)\s+{re.escape(name)}\s*;|using\s+{re.escape(name)}\s*=\s*([\w:\s]+?)\s*;"
        rf"|#\s*define\s+{re.escape(name)}\s+([\w:]+)\s*$"
    )
    found = None
    for text in texts:
        for line in _active_lines(text, defined):
            m = pattern.search(line)
            if m:
                found = " ".join((m.group(1) or m.group(2) or m.group(3)).split())
    return found


def _active_lines(text: str, defined: set[str]) -> Iterator[str]:
    """The lines a preprocessor keeps, for conditions on ``defined(M)`` (others count as true)."""
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)

    def cond(expr: str) -> bool:
        m = re.fullmatch(r"\s*(!?)\s*defined\s*\(?\s*(\w+)\s*\)?\s*", expr)
        if m is None:
            return True
        return (m.group(2) in defined) != bool(m.group(1))

    for line in text.splitlines():
        d = re.match(r"\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", line)
        outer = all(a for a, _ in stack)
        if d is None:
            if outer:
                yield line
            continue
        kind, rest = d.groups()
        if kind in ("ifdef", "ifndef", "if"):
            c = (
                rest.strip() in defined
                if kind == "ifdef"
                else (rest.strip() not in defined if kind == "ifndef" else cond(rest))
            )
            stack.append((c, c))
        elif kind == "elif" and stack:
            _, taken = stack.pop()
            c = not taken and cond(rest)
            stack.append((c, taken or c))
        elif kind == "else" and stack:
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif kind == "endif" and stack:
            stack.pop()
