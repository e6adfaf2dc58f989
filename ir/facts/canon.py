"""Canonical index texts: a loose normal form for the few index spellings matched as text.

:mod:`ktx.ir.affine` reads indices as affine forms; what it cannot (a start that is a cast of a
product of builtins, a lane ``threadIdx.x % 32``) is compared here as text with casts and
spaces removed and terms sorted, so that ``(size_t)blockIdx.x * blockDim.x + threadIdx.x`` and
``threadIdx.x + blockDim.x*blockIdx.x`` are one fact.
"""

from __future__ import annotations

import re

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.facts import assign
from ktx.ir.module import Module
from ktx.ir.syntax import text as _text

_CASTS = (
    "unsigned|int|long|longlong|size_t|int64_t|uint64_t|int32_t|uint32_t|unsignedint|unsignedlong"
    "|unsignedlonglong|longint|ssize_t|ptrdiff_t"
)


def canon(text: str) -> str:
    """A loose normal form of a small index expression: casts and spaces gone, terms sorted.

    >>> canon("(size_t)blockIdx.x * blockDim.x + threadIdx.x") == canon("threadIdx.x + blockDim.x*blockIdx.x")
    True
    """
    t = re.sub(r"\s+", "", text)
    t = re.sub(rf"static_cast<[^>]*>|\((?:{_CASTS})\)", "", t)
    t = strip(t)
    products = split_top(t, "+")
    return "+".join(sorted("*".join(sorted(split_top(term, "*"))) for term in products))


def balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def split_top(t: str, sep: str) -> list[str]:
    """``t`` split at ``sep`` outside parentheses, each part's outer parentheses removed."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(t):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == sep and depth == 0:
            parts.append(t[start:i])
            start = i + 1
    parts.append(t[start:])
    return [strip(p) for p in parts]


def strip(t: str) -> str:
    while t.startswith("(") and t.endswith(")") and balanced(t[1:-1]):
        t = t[1:-1]
    return t


def expand(module: Module, fn_body: ts.Node, node: ts.Node, before: int, depth: int = 0) -> str:
    """``node``'s text with locals that have one plain, never reassigned initialiser inlined."""
    from ktx.ir.access import substitute

    if depth > 4:
        return _text(module, node)
    locals_ = syntax.local_declarations(module, fn_body, before=before)
    values: dict[str, str] = {}
    for ident in syntax.identifiers(node):
        name = _text(module, ident)
        local = locals_.get(name)
        if local is None or local.value is None or name in values:
            continue
        if assign.reassigned_after(module, fn_body, name, local.declaration.end_byte):
            continue
        values[name] = expand(module, fn_body, local.value, before, depth + 1)
    return substitute(module, node, values) if values else _text(module, node)


GLOBAL_INDEX = canon("blockIdx.x * blockDim.x + threadIdx.x")
