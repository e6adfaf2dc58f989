"""Element types and their sizes: what one access of a pointer moves, in bytes.

``sizeof`` comes from the built-in table (:data:`ktx.ir.consteval.SIZEOF`), the kernel's type
template parameters bound to the arguments of its launch or its spec, libclang (when the file
parses), and ``typedef`` chains into the file's local headers under ``#if defined(...)``
(llm.c's ``floatX``), which libclang, given no headers, cannot follow.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ktx.ir.access import element_size
from ktx.ir.consteval import SIZEOF
from ktx.ir.nodes import Function

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts


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
    launched = _launched_sizes(module, fn, template_args, type_text)
    if launched is not None:
        return launched
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


def _launched_sizes(
    module: Module, fn: Function, template_args: tuple[str, ...], type_text: str
) -> tuple[int, str] | None:
    """The widest size a type template parameter takes over every instantiation the file shows.

    DeepSpeed launches ``k<T><<<...>>>`` from ``template <typename T> void launch_k(...)`` and
    instantiates ``launch_k`` explicitly (``template void launch_k<float>(...);``,
    ``launch_k<__half>``). Each instantiation gives the kernel's ``T`` a size; packs sized for
    the widest are legal for every other one (the pack's bytes shrink, its alignment is checked
    at run time with the real ``sizeof``). Unknown (None) unless every launch of the kernel in
    this file names the parameter, and every name it passes resolves: a concrete type, or a type
    parameter of the launching function whose every other mention in the file is ``f<types>``.
    """
    if module.path and Path(module.path).suffix.lower() in _HEADER_SUFFIXES:
        return None  # a header's template is instantiated by files we do not see
    name = " ".join(type_text.split())
    params = [tp for tp in fn.template_params if not tp.variadic]
    pos = next((i for i, tp in enumerate(params) if tp.kind == "type" and tp.name == name), None)
    if pos is None or any(tp.variadic for tp in fn.template_params):
        return None
    launches = module.launches_of(fn.name)
    if not launches:
        return None
    if pos < len(template_args):
        given = " ".join(template_args[pos].split())
        from_launch = any(
            len(s.template_args) > pos and " ".join(s.template_args[pos].split()) == given for s in launches
        )
        if given != name and not from_launch:
            return None  # bound to another name by a spec: not ours to guess
    found: set[str] = set()
    for site in launches:
        if len(site.template_args) <= pos:
            return None
        arg = " ".join(site.template_args[pos].split())
        hosts = (f for f in module.functions if f.name == site.function and f.span.contains(site.span))
        host = next(hosts, None)
        host_pos = None
        if host is not None:
            host_pos = next(
                (i for i, tp in enumerate(host.template_params) if tp.kind == "type" and tp.name == arg), None
            )
        if host is None or host_pos is None:
            dispatched = _dispatched(module, site.span.start, arg)
            found |= dispatched if dispatched is not None else {arg}
            continue
        if any(tp.variadic for tp in host.template_params):
            return None
        bound = _instantiations(module, host.name, host_pos)
        if not bound:
            return None
        found |= bound
    sizes: list[tuple[int, str]] = []
    for t in sorted(found):
        size = SIZEOF.get(t) or _C_SIZES.get(t) or _TORCH_SIZES.get(t)
        if size is None or size & (size - 1):
            return None
        sizes.append((size, t))
    best = max(sizes)
    return best[0], f"{name} is {' or '.join(sorted(found))} at the launches"


def _instantiations(module: Module, host: str, pos: int) -> set[str] | None:
    """The types ``host<...>`` names at position ``pos`` wherever the file mentions ``host``
    other than where it is defined; None where one mention does not name them plainly."""
    source = module.source
    spans = [(f.span.start, f.span.end) for f in module.functions if f.name == host]
    out: set[str] = set()
    for m in re.finditer(rb"\b" + re.escape(host.encode()) + rb"\b", source):
        rest = source[m.end() : m.end() + 400].decode("utf-8", "replace")
        if re.match(r"\s*\(", rest) and any(a <= m.start() < b for a, b in spans):
            continue  # the definition's own declarator
        args = re.match(r"\s*<([^<>;(){}]*)>", rest)
        if args is None:
            return None
        parts = [" ".join(a.split()) for a in args.group(1).split(",")]
        if len(parts) <= pos or not parts[pos]:
            return None
        out.add(parts[pos])
    return out


_HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc"})

#: PyTorch's element types, as its dispatch macros name them.
_TORCH_SIZES = {"at::Half": 2, "c10::Half": 2, "at::BFloat16": 2, "c10::BFloat16": 2}


def _dispatched(module: Module, at: int, alias: str) -> set[str] | None:
    """The types ``alias`` stands for where a launch sits inside a dispatch macro defined in the
    file or its local headers (apex's ``DISPATCH_FLOAT_AND_HALF(TYPE, LEVEL, NAME, ...)``, whose
    cases say ``using scalar_t_##LEVEL = float;``); None where no enclosing macro defines it."""
    macros = _dispatch_macros(module)
    if not macros:
        return None
    source = module.source
    for name, (params, usings) in macros.items():
        for m in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\s*\(", source[:at]):
            args = _call_args(source, m.end(), at)
            if args is None:
                continue
            types = set()
            for prefix, pasted, type_text in usings:
                value = prefix
                if pasted:
                    if pasted not in params or params.index(pasted) >= len(args):
                        return None
                    value += args[params.index(pasted)]
                if value == alias:
                    types.add(type_text)
            if types:
                return types
    return None


def _call_args(source: bytes, start: int, inside: int) -> list[str] | None:
    """The top-level arguments of the call whose ``(`` ends at ``start``, if it encloses ``inside``."""
    depth, args, last = 1, [], start
    i = start
    while i < len(source):
        c = source[i : i + 1]
        if c in (b'"', b"'"):
            end = source.find(c, i + 1)
            while end > 0 and source[end - 1 : end] == b"\\":
                end = source.find(c, end + 1)
            if end < 0:
                return None
            i = end + 1
            continue
        if c in (b"(", b"[", b"{"):
            depth += 1
        elif c in (b")", b"]", b"}"):
            depth -= 1
            if depth == 0:
                if i < inside:
                    return None
                args.append(source[last:i].decode("utf-8", "replace").strip())
                return args
        elif c == b"," and depth == 1:
            args.append(source[last:i].decode("utf-8", "replace").strip())
            last = i + 1
        i += 1
    return None


def _dispatch_macros(module: Module) -> dict[str, tuple[list[str], list[tuple[str, str, str]]]]:
    """Function-like macros whose body declares ``using PREFIX[##PARAM] = TYPE;``."""
    out: dict[str, tuple[list[str], list[tuple[str, str, str]]]] = {}
    for text in _local_texts(module):
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)", lines[i])
            i += 1
            if m is None:
                continue
            body = m.group(3)
            while body.rstrip().endswith("\\") and i < len(lines):
                body = body.rstrip()[:-1] + " " + lines[i]
                i += 1
            usings = [
                (u.group(1), u.group(2) or "", " ".join(u.group(3).split()))
                for u in re.finditer(r"\busing\s+(\w+?)(?:\s*##\s*(\w+))?\s*=\s*([\w:\s]+?)\s*;", body)
            ]
            if usings:
                params = [p.strip() for p in m.group(2).split(",")]
                out[m.group(1)] = (params, usings)
    return out


def _local_texts(module: Module) -> list[str]:
    """The module's source and the local headers it includes (``#include "..."``), as text."""
    texts = [module.source.decode("utf-8", "replace")]
    if module.path:
        folder = Path(module.path).parent
        for inc in re.findall(rb'(?m)^\s*#\s*include\s+"([^"]+)"', module.source):
            path = folder / inc.decode("utf-8", "replace")
            if path.is_file():
                texts.append(path.read_text(errors="replace"))
    return texts


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
