"""Which ``#include`` lines a plain build reaches, and which macros a file tests.

The drafter must tell a header the build needs (ggml's ``<cublas_v2.h>``, reached through the
``#else`` of ``#if defined(GGML_USE_HIP)``; apex's ``<torch/extension.h>``) from one only
another platform's branch includes (``<hip/hip_runtime.h>``): the first, if not installed, is a
compile flag the draft cannot write and must flag; the second is noise. So :func:`directives`
reads the conditional structure of a file with no macros defined but those the file itself
``#define``\\ s before the line (no ``-D``: the draft's flags define none), and marks each
include *live* (every enclosing branch is known to be taken), *dead* (one is known not to be)
or unknown (a condition on a value: ``CUDART_VERSION >= 11070``).

It also collects the macro names the file's conditions test that nothing in it defines
(``#ifdef BF16_AVAILABLE``): a project passes those with ``-D`` in its build, which a draft
cannot see, so they belong in a TODO beside the flags.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_INCLUDE = re.compile(r'([<"])([^>"]+)[>"]')
_DEFINED = re.compile(r"\bdefined\s*(?:\(\s*(\w+)\s*\)|(\w+))")
_BOOL_OPS = (ast.And, ast.Or)
#: Words of a macro that selects another platform than CUDA's (``GGML_USE_HIP``, ``USE_ROCM``):
#: a CUDA build leaves it undefined, so it is no ``-D`` the draft should ask about.
_OTHER_PLATFORM = re.compile(
    r"(?:^|_)(?:HIP|ROCM|MUSA|SYCL|METAL|VULKAN|OPENCL|CANN|MPS|XPU|NPU|CPU)(?:_|$)"
    r"|^CUDA(?:RT)?_VERSION$"  # the toolkit's headers define these, no build flag does
    r"|^(?:WIN32|WIN64|APPLE|ANDROID|linux|unix)$"
)
#: A macro another header defines, tested to see whether it was included (helper_cuda.h's
#: ``#ifdef CUBLAS_API_H_``, ``CUSPARSEAPI``): a header guard or a library's export macro.
_OTHER_HEADER = re.compile(r"_(?:H|HPP|CUH|INCLUDED)_?$|[A-Z]API$")


@dataclass(frozen=True)
class Include:
    """One ``#include``: quoted or angle-bracket, the name, and whether a plain build reaches
    it (True), does not (False) or it depends on a value the draft cannot know (None)."""

    quoted: bool
    name: str
    live: bool | None


@dataclass(frozen=True)
class FileDirectives:
    includes: tuple[Include, ...]
    tested: tuple[str, ...]
    """Macros the conditions test with ``defined``/``#ifdef``/``#ifndef`` that the file never
    ``#define``\\ s (include guards excluded), in order of first test."""
    defines: frozenset[str]


def _logical(text: str) -> str:
    return text.replace("&&", " and ").replace("||", " or ").replace("!", " not ").replace(" not =", "!=")


def _value(node: ast.AST) -> int | None:
    """The integer value of a condition's syntax tree, or None where it has a name in it."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _value(node.operand)
        return None if inner is None else int(not inner)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, _BOOL_OPS):
        values = [_value(v) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v == 0 for v in values):
                return 0
            return None if any(v is None for v in values) else 1
        if any(v not in (0, None) for v in values):
            return 1
        return None if any(v is None for v in values) else 0
    return None


def condition(text: str, defined: frozenset[str] | set[str]) -> bool | None:
    """``#if`` condition ``text`` with the macros ``defined`` defined and no others: True,
    False, or None when it depends on a value (``CUDART_VERSION >= 11070``)."""
    text = re.sub(r"//.*|/\*.*?\*/", "", text)
    text = _DEFINED.sub(lambda m: "1" if (m.group(1) or m.group(2)) in defined else "0", text)
    try:
        tree = ast.parse(_logical(text).strip(), mode="eval")
    except SyntaxError:
        return None
    value = _value(tree.body)
    return None if value is None else bool(value)


def _tested(directive: str, rest: str) -> list[str]:
    if directive in ("ifdef", "ifndef"):
        return rest.split()[:1]
    if directive in ("if", "elif"):
        return [a or b for a, b in _DEFINED.findall(rest)]
    return []


def directives(text: str) -> FileDirectives:
    """The includes of ``text`` with their liveness, and the macros its conditions test."""
    defines: set[str] = set()
    guards: set[str] = set()
    tested: list[str] = []
    # one frame per open #if: (this branch's state, whether an earlier branch was taken)
    stack: list[tuple[bool | None, bool | None]] = []
    includes: list[Include] = []
    pending_guard: str | None = None
    for line in text.splitlines():
        m = _DIRECTIVE.match(line)
        if m is None:
            if line.strip():
                pending_guard = None
            continue
        directive, rest = m.group(1), m.group(2)
        if directive == "define":
            name = rest.split("(")[0].split()[0] if rest.split() else ""
            if name and name == pending_guard:
                guards.add(name)
            defines.add(name)
            pending_guard = None
            continue
        pending_guard = None
        for name in _tested(directive, rest):
            if name not in tested:
                tested.append(name)
        if directive in ("if", "ifdef", "ifndef"):
            if directive == "ifdef":
                state: bool | None = rest.split()[0] in defines if rest.split() else None
            elif directive == "ifndef":
                state = rest.split()[0] not in defines if rest.split() else None
                pending_guard = rest.split()[0] if rest.split() else None
            else:
                state = condition(rest, defines)
            stack.append((state, state))
        elif directive == "elif" and stack:
            _, taken = stack[-1]
            state = False if taken else (None if taken is None else condition(rest, defines))
            unknown = taken is None or state is None
            stack[-1] = (state, True if taken or state else (None if unknown else False))
        elif directive == "else" and stack:
            _, taken = stack[-1]
            stack[-1] = (None if taken is None else not taken, True)
        elif directive == "endif" and stack:
            stack.pop()
        elif directive == "include":
            inc = _INCLUDE.match(rest)
            if inc is None:
                continue
            states = [s for s, _ in stack]
            live: bool | None = False if False in states else (None if None in states else True)
            includes.append(Include(inc.group(1) == '"', inc.group(2).strip(), live))
    unset = tuple(
        n
        for n in tested
        if n not in defines
        and n not in guards
        and not n.startswith("_")
        and not _OTHER_PLATFORM.search(n)
        and not _OTHER_HEADER.search(n)
    )
    return FileDirectives(tuple(includes), unset, frozenset(defines))
