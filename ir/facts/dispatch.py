"""The types a dispatch macro binds where a launch (or a launcher's call) sits inside it.

Projects pick a kernel's element type at run time through a macro that switches on the
tensor's dtype and, in each case, declares the type the code in its last argument uses::

    DISPATCH_FLOAT_AND_HALF(input.scalar_type(), 0, "welford",
        using accscalar_t = at::acc_type<scalar_t_0, true>;
        welford_kernel<scalar_t_0, accscalar_t, accscalar_t><<<grid, block>>>(...));

where ``DISPATCH_FLOAT_AND_HALF`` (apex's ``type_shim.h``) expands to ``case Float: { using
scalar_t_##LEVEL = float; __VA_ARGS__; }`` and so on. The launch's ``scalar_t_0`` then has one
value per case: :func:`dispatch_branches` lists them, one dict of ``name -> C type`` per case,
so that a draft can take one as a guess (and say which others there are) instead of a TODO
with no guess. PyTorch's own ``AT_DISPATCH_CASE(at::ScalarType::Half, ...)`` binds
``scalar_t`` (vLLM's and llm-awq's ``VLLM_DISPATCH_FLOATING_TYPES`` are built of it), and its
``AT_DISPATCH_FLOATING_TYPES*`` macros list fixed cases: both are known here without torch's
headers. ``at::acc_type<T, true>`` (the accumulation type: float for every 16-bit type and
float, double for double) is evaluated.

The text is read, not the tree: macro bodies are expanded as text (parameters, ``##``,
nested macros of the file and its local headers, four levels deep), and only ``using N = T;``
and ``typedef T N;`` in blocks still open where the code lands are taken.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktx.ir.module import Module

#: PyTorch's scalar type enumerators and the C++ type ``AT_DISPATCH_CASE`` binds for each.
SCALAR_TYPES: dict[str, str] = {
    "Float": "float", "Double": "double", "Half": "at::Half", "BFloat16": "at::BFloat16",
    "Int": "int", "Long": "int64_t", "Short": "int16_t", "Char": "int8_t", "Byte": "uint8_t",
    "Bool": "bool", "Float8_e4m3fn": "at::Float8_e4m3fn", "Float8_e5m2": "at::Float8_e5m2",
}  # fmt: skip

#: PyTorch's fixed-case dispatch macros: the scalar types each lists before the ones passed.
_TORCH_FIXED: dict[str, tuple[str, ...]] = {
    "AT_DISPATCH_FLOATING_TYPES": ("Double", "Float"),
    "AT_DISPATCH_FLOATING_TYPES_AND_HALF": ("Double", "Float", "Half"),
    "AT_DISPATCH_FLOATING_TYPES_AND": ("Double", "Float"),
    "AT_DISPATCH_FLOATING_TYPES_AND2": ("Double", "Float"),
    "AT_DISPATCH_REDUCED_FLOATING_TYPES": ("Half", "BFloat16"),
}
#: how many leading arguments of each name extra scalar types (``_AND2(Half, BFloat16, ...)``)
_TORCH_EXTRA = {"AT_DISPATCH_FLOATING_TYPES_AND": 1, "AT_DISPATCH_FLOATING_TYPES_AND2": 2}

_HERE = "__ktx_dispatch_here__"
_DEPTH = 4


@dataclass(frozen=True)
class Define:
    """A function-like ``#define``: its parameters (``...`` kept) and its body (one line)."""

    params: tuple[str, ...]
    body: str


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def defines(text: str) -> dict[str, Define]:
    """The function-like macros ``text`` defines (a later definition wins)."""
    out: dict[str, Define] = {}
    for m in _DEFINE.finditer(text):
        params = tuple(q.strip() for q in m.group(2).split(",") if q.strip())
        body = re.sub(r"\\\n", " ", m.group(3))
        out[m.group(1)] = Define(params, body)
    return out


def local_defines(path: Path, text: str, depth: int = 2) -> dict[str, Define]:
    """The function-like macros of ``text`` and of the headers it includes with quotes that sit
    beside ``path`` (and theirs, ``depth`` levels): where a project keeps its dispatch macros."""
    out: dict[str, Define] = {}
    seen: set[Path] = set()

    def visit(p: Path, t: str, left: int) -> None:
        if left > 0:
            for inc in re.findall(r'#\s*include\s+"([^"]+)"', t):
                header = (p.parent / inc).resolve()
                if header in seen or not header.is_file():
                    continue
                seen.add(header)
                visit(header, header.read_text(errors="replace"), left - 1)
        out.update(defines(t))

    visit(path, text, depth)
    return out


@functools.lru_cache(maxsize=8)
def _cached_defines(path: str, text: str) -> dict[str, Define]:
    """:func:`local_defines`, read once per file text (a draft asks at every launcher call)."""
    return local_defines(Path(path), text)


def _closing(text: str, open_at: int) -> int | None:
    """Index just past the ``)`` matching the ``(`` at ``open_at``."""
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _arg_spans(text: str, open_at: int, close: int) -> list[tuple[int, int]]:
    """(start, end) of each top-level argument between ``(`` at ``open_at`` and ``close``."""
    spans, depth, start = [], 0, open_at + 1
    for i in range(open_at + 1, close - 1):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, close - 1))
    return spans


def _enclosing_call(
    text: str, pos: int, macros: dict[str, Define]
) -> tuple[str, int, int, list[tuple[int, int]]] | None:
    """The innermost invocation of a macro of ``macros`` (or a torch dispatch macro) whose
    arguments hold ``pos``: (name, its start, the argument index holding pos, arguments)."""
    best: tuple[str, int, int, list[tuple[int, int]]] | None = None
    names = "|".join(re.escape(n) for n in sorted({*macros, *_TORCH_FIXED}, key=len, reverse=True))
    if not names:
        return None
    for m in re.finditer(rf"\b({names})\s*\(", text[:pos]):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start : m.start()].lstrip().startswith("#"):
            continue
        close = _closing(text, m.end() - 1)
        if close is None or close <= pos:
            continue
        spans = _arg_spans(text, m.end() - 1, close)
        index = next(i for i, (a, b) in enumerate(spans) if a <= pos <= b or i == len(spans) - 1)
        if best is None or m.start() > best[1]:
            best = (m.group(1), m.start(), index, spans)
    return best


def _torch_cases(name: str, args: list[str]) -> str | None:
    """A torch dispatch macro's expansion, as ``AT_DISPATCH_CASE`` lines, or None."""
    if name in _TORCH_FIXED:
        extra = _TORCH_EXTRA.get(name, 0)
        kinds = [*_TORCH_FIXED[name], *(a.split("::")[-1] for a in args[:extra])]
        code = ", ".join(args[extra + 2 :])
        return " ".join(f"AT_DISPATCH_CASE(at::ScalarType::{k}, {code})" for k in kinds)
    return None


def _expand(text: str, macros: dict[str, Define], depth: int) -> str:
    """``text`` with the invocations of ``macros`` in it replaced by their bodies (and
    ``AT_DISPATCH_CASE``/``AT_DISPATCH_SWITCH`` by what they declare), ``depth`` levels."""
    if depth == 0:
        return text
    out, at = [], 0
    names = sorted({*macros, *_TORCH_FIXED, "AT_DISPATCH_CASE", "AT_DISPATCH_SWITCH"}, key=len, reverse=True)
    pattern = re.compile(rf"\b({'|'.join(re.escape(n) for n in names)})\s*\(")
    while True:
        m = pattern.search(text, at)
        if m is None:
            break
        close = _closing(text, m.end() - 1)
        if close is None:
            break
        args = [text[a:b].strip() for a, b in _arg_spans(text, m.end() - 1, close)]
        name = m.group(1)
        if name == "AT_DISPATCH_CASE" and args:
            ctype = SCALAR_TYPES.get(args[0].split("::")[-1])
            code = ", ".join(args[1:])
            body = f"{{ using scalar_t = {ctype}; {code}; }}" if ctype is not None else "{ }"
        elif name == "AT_DISPATCH_SWITCH":
            body = "{ " + ", ".join(args[2:]) + " }"
        elif name in macros:
            body = _body(macros[name], args)
        else:
            body = _torch_cases(name, args) or ""
        out.append(text[at : m.start()])
        out.append(_expand(body, macros, depth - 1))
        at = close
    out.append(text[at:])
    return "".join(out)


def _body(define: Define, args: list[str]) -> str:
    """A macro's body with its parameters replaced by ``args`` (``##`` pasted, ``#x`` dropped)."""
    values: dict[str, str] = {}
    for i, p in enumerate(define.params):
        if p == "...":
            values["__VA_ARGS__"] = ", ".join(args[i:])
            break
        values[p] = args[i] if i < len(args) else ""
    body = re.sub(r"(?<!#)#\s*([A-Za-z_]\w*)", '""', define.body)  # stringizing: irrelevant here
    body = re.sub(r"\b[A-Za-z_]\w*\b", lambda w: values.get(w.group(0), w.group(0)), body)
    return re.sub(r"\s*##\s*", "", body)


_USING = re.compile(
    r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+?)\s*;|\btypedef\s+([^;{}]+?)\s+([A-Za-z_]\w*)\s*;"
)


def _visible(text: str, here: int) -> list[tuple[str, str]]:
    """The ``using``/``typedef`` declarations before ``here`` whose blocks are still open there."""
    found = []
    for m in _USING.finditer(text, 0, here):
        between = text[m.end() : here]
        depth, closed = 0, False
        for c in between:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth < 0:
                    closed = True
                    break
        if not closed:
            name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
            found.append((name, " ".join(value.split())))
    return found


#: ``at::acc_type<T, true>``'s value on a GPU: float for float and the 16-bit types.
_ACC = re.compile(r"(?:at::)?acc_type\s*<\s*([\w:]+)\s*,\s*(?:true|false)\s*>")


def _resolve(value: str, bound: dict[str, str]) -> str:
    value = re.sub(r"\b[A-Za-z_]\w*\b", lambda w: bound.get(w.group(0), w.group(0)), value)
    return _ACC.sub(lambda m: "double" if m.group(1) == "double" else "float", value)


@dataclass(frozen=True)
class Dispatch:
    """The dispatch macro around a point, and the type names each of its cases binds there."""

    macro: str
    line: int
    branches: tuple[dict[str, str], ...]


def dispatch_at(module: Module, offset: int) -> Dispatch | None:
    """The dispatch macro around byte ``offset`` of ``module`` (its macros from the file and its
    local headers), or None when the offset is in none that binds a type."""
    text = module.text_str
    pos = len(module.source[:offset].decode("utf-8", "replace"))
    macros = _cached_defines(str(module.path), text) if module.path else defines(text)
    call = _enclosing_call(text, pos, macros)
    if call is None:
        return None
    branches = dispatch_branches(text, pos, macros)
    if not branches:
        return None
    return Dispatch(call[0], text.count("\n", 0, call[1]) + 1, branches)


def dispatch_branches(text: str, pos: int, macros: dict[str, Define]) -> tuple[dict[str, str], ...]:
    """The type names each case of the dispatch macro around offset ``pos`` of ``text`` binds
    (with the ``using`` lines of the code before ``pos`` in the macro's argument, resolved in
    that case), one dict per case in the macro's order; () when ``pos`` is in no dispatch."""
    call = _enclosing_call(text, pos, macros)
    if call is None:
        return ()
    name, _start, index, spans = call
    args = [text[a:b].strip() for a, b in spans]
    # the preprocessor splits ``k<a, b>`` at its comma too: code in a variadic argument starts
    # at the first argument ``...`` takes, and the marker stands for all of them
    params = macros[name].params if name in macros else ("TYPE", "NAME", "...")
    first = params.index("...") if "..." in params and index >= params.index("...") else index
    variadic = "..." in params and first == params.index("...")
    args = [*args[:first], _HERE, *([] if variadic else args[first + 1 :])]
    body = _body(macros[name], args) if name in macros else _torch_cases(name, args) or ""
    expanded = _expand(body, macros, _DEPTH)
    before = text[spans[first][0] : pos]
    own = _visible(before, len(before))
    out: list[dict[str, str]] = []
    for m in re.finditer(re.escape(_HERE), expanded):
        bound: dict[str, str] = {}
        for n, v in _visible(expanded, m.start()):
            bound[n] = _resolve(v, bound)
        if not bound:
            continue
        for n, v in own:
            bound[n] = _resolve(v, bound)
        if bound not in out:
            out.append(bound)
    return tuple(out)


def bind_types(text: str, bound: dict[str, str]) -> str:
    """``text`` with each name ``bound`` gives replaced by its type (``acc_type`` evaluated)."""
    return _resolve(text, bound)
