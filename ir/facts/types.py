"""Element types and their sizes: what one access of a pointer moves, in bytes.

``sizeof`` comes from the built-in table (:data:`ktx.ir.consteval.SIZEOF`), the kernel's type
template parameters bound to the arguments of its launch or its spec, libclang (when the file
parses), and ``typedef`` chains into the file's local headers under ``#if defined(...)``
(llm.c's ``floatX``), which libclang, given no headers, cannot follow.
"""

from __future__ import annotations

import re
from pathlib import Path

from ktx.ir.access import element_size
from ktx.ir.consteval import SIZEOF
from ktx.ir.module import Module
from ktx.ir.nodes import Function


def type_size(
    module: Module, fn: Function, template_args: tuple[str, ...], type_text: str
) -> tuple[int, str] | None:
    """(sizeof, how it was found) for an element type; ``typedef`` chains in local headers too.

    llm.c writes ``floatX`` (``typedef __nv_bfloat16 floatX;`` in its ``common.h``, under
    ``#if defined(ENABLE_BF16)``, which the ``.cu`` file defines before the include). When the
    conditions cannot be told apart, the widest candidate is taken: packs sized for it are
    legal for every other one.
    """
    size = element_size(module, type_text, fn, template_args)
    if size is None:
        size = _C_SIZES.get(" ".join(type_text.split()))
    if size is not None:
        return size, ""
    defined = set(re.findall(rb"(?m)^\s*#\s*define\s+(\w+)", module.source))
    texts = [module.source.decode("utf-8", "replace")]
    if module.path:
        folder = Path(module.path).parent
        for inc in re.findall(rb'(?m)^\s*#\s*include\s+"([^"]+)"', module.source):
            path = folder / inc.decode("utf-8", "replace")
            if path.is_file():
                texts.append(path.read_text(errors="replace"))
    candidates: list[str] = []
    for text in texts:
        candidates += _typedefs(text, type_text, {d.decode() for d in defined})
    sizes = [(SIZEOF.get(c), c) for c in candidates]
    known = [(s, c) for s, c in sizes if s is not None]
    if not known or len(known) != len(sizes):
        return None
    best = max(known)
    return best[0], f"{type_text} is {best[1]}"


#: C and <stdint.h> integer types that :data:`ktx.ir.consteval.SIZEOF` may not list.
_C_SIZES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "uint8_t": 1,
    "int8_t": 1,
    "bool": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "double": 8,
}


def _typedefs(text: str, name: str, defined: set[str]) -> list[str]:
    """The types ``name`` is declared as in ``text``, in the branches ``defined`` selects."""
    pattern = re.compile(
        rf"^\s*(?:typedef\s+([\w\s:]+?)\s+{re.escape(name)}\s*;|using\s+{re.escape(name)}\s*=\s*([\w\s:]+?)\s*;)"
    )
    # Per open #if: is this branch active (None: cannot tell), and was a branch taken before it.
    stack: list[tuple[bool | None, bool | None]] = []
    found: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", s)
        if m:
            kind, rest = m.group(1), m.group(2).strip()
            if kind in ("if", "ifdef", "ifndef"):
                value = _cond(kind, rest, defined)
                stack.append((value, value))
            elif kind in ("elif", "else") and stack:
                _, taken = stack[-1]
                if taken is True:
                    value = False
                elif taken is None:
                    value = None
                else:
                    value = True if kind == "else" else _cond("if", rest, defined)
                stack[-1] = (value, True if value is True else (None if value is None else taken))
            elif kind == "endif" and stack:
                stack.pop()
            continue
        dm = re.match(r"#\s*define\s+(\w+)", s)
        if dm and all(v is not False for v, _ in stack):
            defined.add(dm.group(1))
        if any(v is False for v, _ in stack):
            continue
        tm = pattern.match(line)
        if tm:
            found.append(" ".join((tm.group(1) or tm.group(2)).split()))
    return found


def _cond(kind: str, rest: str, defined: set[str]) -> bool | None:
    """``#if defined(X)`` / ``#ifdef X`` / ``!defined(X)``; None for anything else."""
    if kind in ("ifdef", "ifndef"):
        return (rest.split()[0] in defined) == (kind == "ifdef") if rest else None
    m = re.fullmatch(r"(!?)\s*defined\s*\(?\s*(\w+)\s*\)?", rest.split("//")[0].strip())
    if m is None:
        return None
    return (m.group(2) in defined) != bool(m.group(1))
