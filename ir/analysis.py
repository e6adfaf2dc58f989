"""Analyses over the IR that several passes and reports share.

:func:`perf_constants` finds the compile-time constants that look like performance
parameters: the values a person tuned by hand (block sizes, vector widths, unroll
factors). ``ktx inspect`` lists them and the ``expose`` pass turns them into knobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir.consteval import int_literal
from ktx.ir.module import Module
from ktx.ir.source import Span

PerfKind = Literal["template-int", "define", "constexpr", "launch-literal"]
UseKind = Literal["launch", "template-arg", "loop-bound", "launch-bounds", "shared-size", "unroll"]

_INTEGRAL = {
    "int",
    "unsigned",
    "unsigned int",
    "uint32_t",
    "int32_t",
    "int64_t",
    "uint64_t",
    "size_t",
    "long",
    "short",
    "unsigned long",
    "long long",
}


@dataclass(frozen=True)
class Use:
    """Where a constant is used, and as what."""

    kind: UseKind
    span: Span


@dataclass(frozen=True)
class PerfConstant:
    """A compile-time constant that looks like a performance parameter."""

    name: str
    kind: PerfKind
    value: int | None
    span: Span
    """Where its value is written (the literal, the macro body, the template parameter)."""
    kernel: str | None
    """The kernel it belongs to (template params) or is launched with (launch literals)."""
    uses: tuple[Use, ...]


def _identifiers(node: ts.Node) -> Iterator[ts.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("identifier", "type_identifier"):
            yield n
        stack.extend(n.children)


def _numbers(node: ts.Node) -> Iterator[ts.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "number_literal":
            yield n
        stack.extend(n.children)


def _local_initializers(module: Module, scope: Span, names: set[str]) -> list[Span]:
    """Initializer spans of local variables ``names`` declared in ``scope``, followed transitively.

    Launchers compute sizes in locals (``dim3 block(std::min(d / 8, 256)); k<<<grid, block>>>``):
    the constants that matter are in those initializers, not in the launch itself.
    """
    fn = module.node(scope)
    decls: dict[str, ts.Node] = {}
    stack = [fn]
    while stack:
        n = stack.pop()
        if n.type == "init_declarator":
            name_node = n.child_by_field_name("declarator")
            value = n.child_by_field_name("value")
            if name_node is not None and value is not None and name_node.type == "identifier":
                decls.setdefault((name_node.text or b"").decode(), value)
        elif n.type == "function_declarator" and n.parent is not None and n.parent.type == "declaration":
            # ``dim3 block(threads);`` parses as a function declaration (C++'s vexing parse).
            name_node = n.child_by_field_name("declarator")
            params = n.child_by_field_name("parameters")
            if name_node is not None and params is not None and name_node.type == "identifier":
                decls.setdefault((name_node.text or b"").decode(), params)
        stack.extend(n.children)
    spans: list[Span] = []
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in decls:
            continue
        seen.add(name)
        value = decls[name]
        spans.append(module.span(value.start_byte, value.end_byte))
        todo.extend((i.text or b"").decode() for i in _identifiers(value))
    return spans


def launch_regions(module: Module) -> list[Span]:
    """Each launch's ``<<<...>>>`` plus the initializers of the locals it uses."""
    regions: list[Span] = []
    for site in module.launch_sites:
        regions.append(site.config)
        host = next(
            (f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None
        )
        if host is not None:
            names = {(i.text or b"").decode() for i in _identifiers(module.node(site.config))}
            regions.extend(_local_initializers(module, host.body, names))
    return regions


def use_regions(module: Module) -> list[tuple[UseKind, Span]]:
    """The spans where a constant's use marks it as a performance parameter."""
    regions: list[tuple[UseKind, Span]] = [("launch", s) for s in launch_regions(module)]
    for site in module.launch_sites:
        regions.extend(("template-arg", s) for s in site.template_arg_spans)
    for loop in module.loops:
        regions.extend(("loop-bound", s) for s in (loop.init, loop.cond, loop.step) if s is not None)
        if loop.pragma is not None and loop.pragma.is_unroll:
            regions.append(("unroll", loop.pragma.span))
    for fn in module.kernels:
        if fn.launch_bounds is not None:
            regions.append(("launch-bounds", fn.launch_bounds.span))
    for arr in module.shared_arrays:
        if not arr.extern:
            regions.append(("shared-size", arr.span))
    return regions


def _uses_by_name(module: Module) -> dict[str, list[Use]]:
    uses: dict[str, list[Use]] = {}
    for kind, span in use_regions(module):
        if kind == "unroll":
            # Pragma arguments are raw text to tree-sitter: match whole words.
            for word in module.text(span).replace("(", " ").replace(")", " ").split()[2:]:
                uses.setdefault(word, []).append(Use(kind, span))
            continue
        node = module.node(span)
        for ident in _identifiers(node):
            if span.start <= ident.start_byte and ident.end_byte <= span.end:
                name = (ident.text or b"").decode()
                uses.setdefault(name, []).append(Use(kind, module.span(ident.start_byte, ident.end_byte)))
    return uses


def perf_constants(module: Module) -> list[PerfConstant]:
    """Template int parameters, used ``#define``/``constexpr`` integers and launch literals."""
    uses = _uses_by_name(module)
    found: list[PerfConstant] = []
    for fn in module.kernels:
        for tp in fn.template_params:
            if tp.kind != "value" or (tp.type or "").strip() not in _INTEGRAL:
                continue
            value = int_literal(tp.default) if tp.default else None
            index = fn.template_params.index(tp)
            for site in module.launches_of(fn.name):
                if value is None and index < len(site.template_args):
                    value = int_literal(site.template_args[index])
            body_uses = [
                Use("loop-bound", lp.cond)
                for lp in module.loops_in(fn)
                if lp.cond is not None and tp.name in module.text(lp.cond)
            ]
            found.append(
                PerfConstant(
                    tp.name, "template-int", value, tp.span, fn.name, tuple(body_uses + uses.get(tp.name, []))
                )
            )
    for macro in module.macros:
        if macro.int_value is not None and macro.name in uses and macro.value_span is not None:
            found.append(
                PerfConstant(
                    macro.name, "define", macro.int_value, macro.value_span, None, tuple(uses[macro.name])
                )
            )
    for const in module.constants:
        if const.int_value is not None and const.name in uses:
            found.append(
                PerfConstant(
                    const.name, "constexpr", const.int_value, const.value_span, None, tuple(uses[const.name])
                )
            )
    # A literal that is the value of a constant already listed is that constant, not a new one.
    seen: set[int] = {c.span.start for c in found}
    for site in module.launch_sites:
        block_regions = [site.block]
        host = next(
            (f for f in module.functions if f.name == site.function and f.body.contains(site.span)), None
        )
        if host is not None:
            names = {(i.text or b"").decode() for i in _identifiers(module.node(site.block))}
            block_regions += _local_initializers(module, host.body, names)
        for region in block_regions:
            for num in _numbers(module.node(region)):
                if (
                    not (region.start <= num.start_byte and num.end_byte <= region.end)
                    or num.start_byte in seen
                ):
                    continue
                parent = num.parent
                if (
                    parent is not None
                    and parent.type == "binary_expression"
                    and parent.child_by_field_name("right") == num
                    and (parent.child_by_field_name("operator") or num).type in ("/", "%")
                ):
                    continue  # a divisor: a warp or pack width, not a block size
                value = int_literal((num.text or b"").decode())
                # Block sizes are multiples of a warp; 8 in ``d / 8`` is a pack width, not a size.
                if value is None or value < 32 or value % 32:
                    continue
                seen.add(num.start_byte)
                span = module.span(num.start_byte, num.end_byte)
                found.append(
                    PerfConstant(
                        f"{site.kernel}@{span.line}:{span.col}",
                        "launch-literal",
                        value,
                        span,
                        site.kernel,
                        (Use("launch", site.block),),
                    )
                )
    return found
