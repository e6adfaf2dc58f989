"""What a kernel's source says about each parameter and template parameter, for a spec to agree with.

A spec (``ktx.toml``) restates the kernel's signature: each parameter's name, element type and
role, and the template arguments. When it contradicts the source, verification can be vacuous
(issue 21): an ``out`` nobody writes stays at its poison in the original and in every
candidate, so every candidate "matches". This module answers the source side of that
comparison, from the facts the passes already use, and only what the analysis is sure of:

* :func:`param_facts`: per parameter, whether the kernel provably stores to it (a store or an
  update the index analysis reads, through local row pointers and vector casts), whether it may
  write it at all (also through helpers that take a non-const pointer; a pointer to ``const``
  is never written without a store the analysis sees), and its element type resolved through
  the template arguments and ``typedef``/``using``/``#define`` chains in the file and its local
  headers (several candidates where ``#if`` branches cannot be told apart; none when unknown);
* :func:`launched_template_args`: per template parameter, every argument the file's launches
  give it (through explicit instantiations of a templated launcher and dispatch macros), or
  None where one launch leaves it open (deduced, a runtime name, a macro's parameter).

>>> from ktx.ir import parse
>>> m = parse('''template <typename T, int V>
... __global__ void k(T* __restrict__ y, const T* __restrict__ x, int n) {
...   int i = threadIdx.x; if (i < n) y[i] = x[i]; }
... void go(float* y, const float* x, int n) { k<float, 4><<<1, 32>>>(y, x, n); }''')
>>> [(p.name, p.stored, p.may_write, p.element_types) for p in param_facts(m, m.kernel(), ("float", "4"))]
[('y', True, True, ('float',)), ('x', False, False, ('float',)), ('n', False, False, ('int',))]
>>> launched_template_args(m, m.kernel())
(frozenset({'float'}), frozenset({'4'}))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktx.ir.facts.types import _dispatched, _instantiations, _local_texts, _typedefs
from ktx.ir.nodes import Function

if TYPE_CHECKING:  # types only: these facts are asked through Module.facts(), which imports this
    from ktx.ir.facts.kernel import Facts
    from ktx.ir.module import Module

#: Words of a declared type that say nothing about the element type.
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b|[*&]")
_HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc"})
_INT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*")


@dataclass(frozen=True)
class ParamFact:
    """One kernel parameter as the source declares and uses it."""

    name: str
    pointer_depth: int
    const: bool
    """A pointer to ``const`` (the kernel cannot write it without a cast)."""
    stored: bool
    """The kernel provably stores to it (a store or update the index analysis reads)."""
    may_write: bool
    """The kernel may write it: a store, or a non-const pointer handed to code that may write."""
    element_types: tuple[str, ...]
    """The element type, template arguments bound and aliases followed; several where ``#if``
    branches cannot be told apart, none where a template argument is not known."""
    at: tuple[int, int]
    """The parameter's (line, column) in the source, both 1-based."""
    store_at: tuple[int, int] | None = None
    """Where the first store the analysis reads sits (None: no store)."""


def param_facts(
    module: Module, fn: Function, template_args: Sequence[str] | None = None
) -> tuple[ParamFact, ...]:
    """Each parameter of kernel ``fn`` with ``template_args`` bound (None: the first launch's)."""
    return module.facts(fn, template_args).params


def params_of(facts: Facts) -> tuple[ParamFact, ...]:
    """Each parameter of the kernel ``facts`` describe (what :attr:`Facts.params` answers)."""
    module, fn = facts.module, facts.fn
    stores = [r for r in facts.refs if r.kind in ("store", "update") and r.root]
    stored: dict[str, tuple[int, int]] = {}
    for ref in stores:
        stored.setdefault(ref.root, (ref.node.start_point[0] + 1, ref.node.start_point[1] + 1))
    written = facts.written_roots
    out = []
    for p in fn.params:
        const_pointer = p.is_pointer and p.const
        may_write = p.name in stored or (p.is_pointer and not const_pointer and p.name in written)
        out.append(
            ParamFact(
                p.name,
                p.pointer_depth,
                const_pointer,
                p.name in stored,
                may_write,
                element_types(module, fn, facts.template_args, p.type),
                (p.span.line, p.span.col),
                stored.get(p.name),
            )
        )
    return tuple(out)


def element_types(
    module: Module, fn: Function, template_args: Sequence[str], type_text: str
) -> tuple[str, ...]:
    """The types ``type_text``'s element type may be, qualifiers and pointers dropped: a template
    parameter bound to its argument, then ``typedef``/``using``/``#define`` followed to the end of
    the chain in the file and its local headers (each branch ``#if`` leaves open). Empty when a
    template parameter is unbound or bound to a spec placeholder (``{dtype}``)."""
    name = " ".join(_QUALIFIERS.sub(" ", type_text).split())
    for tp, arg in zip(fn.template_params, template_args, strict=False):
        if tp.kind == "type" and tp.name == name:
            name = " ".join(_QUALIFIERS.sub(" ", arg).split())
            break
    else:
        if any(tp.name == name for tp in fn.template_params):
            return ()
    if not name or "{" in name:
        return ()
    texts = _local_texts(module)
    defined = {d.decode() for d in re.findall(rb"(?m)^\s*#\s*define\s+(\w+)", module.source)}
    done: list[str] = []
    todo, seen = [name], {name}
    while todo:
        current = todo.pop(0)
        found = _aliases(texts, current, defined)
        if not found:
            done.append(current)
        for alias in found:
            if alias not in seen:
                seen.add(alias)
                todo.append(alias)
    return tuple(dict.fromkeys(done))


def _aliases(texts: Sequence[str], name: str, defined: set[str]) -> list[str]:
    """What ``name`` is declared as: ``typedef``/``using`` (in the active ``#if`` branches) or an
    object-like ``#define name type``."""
    found: list[str] = []
    macro = re.compile(rf"(?m)^\s*#\s*define\s+{re.escape(name)}\s+([A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)*)\s*$")
    for text in texts:
        found += _typedefs(text, name, set(defined))
        found += [" ".join(m.group(1).split()) for m in macro.finditer(text)]
    return [f for f in dict.fromkeys(found) if f != name]


def launched_template_args(module: Module, fn: Function) -> tuple[frozenset[str] | None, ...]:
    """Per template parameter of ``fn``, the arguments the file's launches give it (whitespace
    normalised), or None where the file does not tell: no launch, a launch that leaves it to
    deduction or a default, a runtime or ``constexpr`` name for a value parameter, a launcher's
    template parameter never instantiated plainly, a launch inside a macro. A kernel in a header
    is instantiated by files not seen here: all None."""
    params = fn.template_params
    unknown: tuple[frozenset[str] | None, ...] = tuple(None for _ in params)
    launches = module.launches_of(fn.name)
    if not launches or any(tp.variadic for tp in params):
        return unknown
    if module.path and Path(module.path).suffix.lower() in _HEADER_SUFFIXES:
        return unknown
    out: list[frozenset[str] | None] = []
    for pos, tp in enumerate(params):
        found: set[str] | None = set()
        for site in launches:
            got = _site_arg(
                module, site.template_args, site.function, site.span.start, site.macro, pos, tp.kind
            )
            if got is None or found is None:
                found = None
                break
            found |= got
        out.append(frozenset(found) if found else None)
    return tuple(out)


def _plain(module: Module, arg: str, kind: str) -> bool:
    """``arg`` names one instantiation wherever it is written: a literal value, or a type the
    file or CUDA gives one meaning."""
    if kind == "value":
        return bool(_INT.fullmatch(arg)) or arg in ("true", "false")
    from ktx.ir.facts.launcher import _uncertain

    return kind != "type" or _uncertain(module, None, arg) is None


def _site_arg(
    module: Module, args: Sequence[str], function: str | None, at: int, macro: str | None, pos: int, kind: str
) -> set[str] | None:
    if macro is not None or pos >= len(args):
        return None
    arg = " ".join(args[pos].split())
    host = next((f for f in module.functions if f.name == function and f.span.start <= at < f.span.end), None)
    host_pos = None
    if host is not None:
        host_pos = next((i for i, t in enumerate(host.template_params) if t.name == arg), None)
    if host is not None and host_pos is not None:
        if any(t.variadic for t in host.template_params):
            return None
        found = _instantiations(module, host.name, host_pos)
        bound = {" ".join(b.split()) for b in found or ()}
        if not bound or not all(_plain(module, b, kind) for b in bound):
            # ``rope_norm_cuda<forward, float, float>`` called from a template whose own
            # ``forward`` is the argument again: the file names no instantiation of it
            return None
        return bound
    if kind == "value":
        return {arg} if _INT.fullmatch(arg) or arg in ("true", "false") else None
    if kind != "type":
        return None
    if host is not None and host.param(arg) is not None:
        return None
    dispatched = _dispatched(module, at, arg)
    if dispatched is not None:
        return {" ".join(d.split()) for d in dispatched}
    # ``scalar_t`` inside a dispatch macro of a header not read (vLLM's
    # ``VLLM_DISPATCH_FLOATING_TYPES`` over torch's ``AT_DISPATCH_SWITCH``), or a launcher local:
    # a name the file gives no one meaning says nothing about which types are instantiated.
    from ktx.ir.facts.launcher import _uncertain

    return None if _uncertain(module, host, arg) is not None else {arg}
