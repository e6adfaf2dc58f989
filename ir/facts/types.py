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
    name = " ".join(type_text.split())
    params = [tp for tp in fn.template_params if not tp.variadic]
    pos = next((i for i, tp in enumerate(params) if tp.kind == "type" and tp.name == name), None)
    if pos is None or any(tp.variadic for tp in fn.template_params):
        return None
    if pos < len(template_args) and " ".join(template_args[pos].split()) != name:
        return None  # bound to another name (a spec's, or the first launch's): not ours to guess
    launches = module.launches_of(fn.name)
    if not launches:
        return None
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
            found.add(arg)
            continue
        if any(tp.variadic for tp in host.template_params):
            return None
        bound = _instantiations(module, host.name, host_pos)
        if not bound:
            return None
        found |= bound
    sizes: list[tuple[int, str]] = []
    for t in sorted(found):
        size = SIZEOF.get(t) or _C_SIZES.get(t)
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
