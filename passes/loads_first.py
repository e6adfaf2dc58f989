"""``loads-first``: a kernel's straight-line loads are issued as soon as their addresses are known.

Short element-wise kernels often read in two rounds: small loads whose values decide the math
(merge_attn_states' two LSEs, a scale, a flag), then the bulk loads the math applies to
(the two value packs). Written in that order the bulk loads wait for the small loads *and* the
math between them (``expf``, a branch), so the kernel pays two DRAM round trips in a row.
Their addresses are known much earlier (``elem_offset`` in merge_attn_states). With
``LOADS_FIRST = 1`` (0, the original, by default) every ``x.load(p)`` statement of the kernel's
body (not in a loop or branch) whose pointer is ``const __restrict__`` is issued right after the
last statement its address depends on, into a register copy, and the original statement becomes
``x = ktx_early_x;``: all loads are then in flight together::

    const long long elem_offset = ...;
    Pack<T> ktx_early_p_out;  ktx_early_p_out.load(prefix_output + elem_offset);   // new
    Pack<T> ktx_early_s_out;  ktx_early_s_out.load(suffix_output + elem_offset);   // new
    float p_lse = prefix_lse[lse_idx];  ...  expf ...  if (isinf(max_lse)) { ... return; }
    p_out = ktx_early_p_out;                          // was p_out.load(prefix_output + elem_offset);

A load moves above an ``if`` that returns only when that condition tests nothing the address is
computed from (following locals back to their definitions, except through the addresses of
values read from memory: those values are data, not bounds): a bounds guard (``if (i >= n) return;``, or
``valid = i < n; if (!valid) return;``) stays above the loads it protects, which go right after
it; merge_attn_states' ``if (isinf(max_lse)) return;`` tests loaded LSEs and is crossed. A
``const __restrict__`` pointer cannot be written through another pointer, so no store is crossed
that could change what is read. Every change sits under ``#if KTX_LOADS_FIRST``; 0 is the
original byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Module, syntax
from ktx.ir.facts import assign
from ktx.ir.syntax import node_text
from ktx.passes._common import kernel_node, line_of
from ktx.passes._variants import Variants, insert_after_line

from ktx.passbase import KnobSpec, Pass, Phase, Rewriter, Site, Skip, Target

COND = "KTX_LOADS_FIRST"


@dataclass(frozen=True)
class EarlyLoad:
    statement: ts.Node
    variable: str
    type: str
    pointer: str
    after: ts.Node
    """The statement after which the load can be issued."""


@dataclass(frozen=True)
class LoadsFirstSite(Site):
    loads: tuple[EarlyLoad, ...]


class LoadsFirst(Pass[LoadsFirstSite]):
    name = "loads-first"
    phase = Phase.UNROLL
    summary = "issue a kernel's straight-line loads as soon as their addresses are known (knob LOADS_FIRST)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "LOADS_FIRST",
            "0, 1",
            "0 (loads where they are, the original)",
            "1: x.load(p) statements move up to where p is known, all loads in flight together",
        ),
    )
    after = ("expose", "block-size", "vectorize", "cache-hints", "fast-math", "hoist")

    def sites(self, target: Target) -> Iterator[LoadsFirstSite | Skip]:
        fn = target.kernel
        module = target.module
        body = kernel_node(target).child_by_field_name("body")
        assert body is not None
        rts = module.facts(fn, target.template_args).roots
        stmts = list(body.named_children)
        found: list[EarlyLoad] = []
        why: list[str] = []
        for pos, stmt in enumerate(stmts):
            load = _load_call(module, stmt)
            if load is None:
                continue
            var, pointer = load
            line = line_of(stmt)
            decl = next(
                (
                    s
                    for s in stmts[:pos]
                    if s.type == "declaration" and var in syntax.declared_names(module, s)
                ),
                None,
            )
            if decl is None:
                why.append(f"line {line}: {var} is not declared in the kernel's body")
                continue
            names = {syntax.text(module, i) for i in syntax.identifiers(pointer)}
            bases = [n for n in names if n in rts]
            root = rts.get(bases[0]) if len(bases) == 1 else None
            if root is None or root.space != "global" or not (root.const and root.restrict):
                why.append(
                    f"line {line}: {', '.join(bases) or 'the pointer'} is not a const __restrict__ pointer"
                )
                continue
            deps = _dependencies(module, stmts[:pos], names)
            last = max((i for i, s in enumerate(stmts[:pos]) if _defines(module, s, deps)), default=-1)
            if last < 0:
                why.append(f"line {line}: its address depends on nothing local; left for the compiler")
                continue
            guards = [
                i
                for i in range(last + 1, pos)
                if _returns(stmts[i])
                and _guarding(module, stmts[:i], _condition_names(module, stmts[i])) & deps
            ]
            last = max([last, *guards])
            between = [s for s in stmts[last + 1 : pos] if s.id != decl.id]
            if not between:
                why.append(f"line {line}: already issued where its address is known")
                continue
            found.append(
                EarlyLoad(stmt, var, _type_of(module, decl), syntax.text(module, pointer), stmts[last])
            )
        if not found:
            yield Skip(
                "no straight-line load to issue earlier" + (f" ({'; '.join(why)})" if why else ""),
                fn.name,
                fn.span,
            )
            return
        yield LoadsFirstSite(fn.name, fn.span, tuple(found))

    def rewrite(self, site: LoadsFirstSite, rw: Rewriter) -> None:
        module = rw.target.module
        rw.knob("LOADS_FIRST", (0, 1), 0, "1: straight-line loads issued as soon as their address is known")
        groups: dict[int, list[EarlyLoad]] = {}
        for ld in site.loads:
            groups.setdefault(ld.after.end_byte, []).append(ld)
        for end, loads in groups.items():
            indent = syntax.indentation(module.source, loads[0].statement.start_byte)
            lines = [f"{indent}// loads-first: issued as soon as the address is known"]
            for ld in loads:
                lines.append(f"{indent}{ld.type} ktx_early_{ld.variable};")
                lines.append(f"{indent}ktx_early_{ld.variable}.load({ld.pointer});")
            insert_after_line(rw, end, lines, COND)
        variants = Variants(rw, COND)
        for ld in site.loads:
            s = ld.statement
            variants.change(s, s.start_byte, s.end_byte, f"{ld.variable} = ktx_early_{ld.variable};")
        variants.commit()
        rw.note("loads of " + ", ".join(ld.pointer.split()[0] for ld in site.loads) + " issued first")


def _load_call(module: Module, stmt: ts.Node) -> tuple[str, ts.Node] | None:
    """``(x, p)`` for a statement ``x.load(p);``."""
    if stmt.type != "expression_statement" or not stmt.named_children:
        return None
    call = stmt.named_children[0]
    fn = call.child_by_field_name("function") if call.type == "call_expression" else None
    args = call.child_by_field_name("arguments") if fn is not None else None
    if fn is None or args is None or fn.type != "field_expression" or len(args.named_children) != 1:
        return None
    obj, field = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if obj is None or field is None or obj.type != "identifier" or syntax.text(module, field) != "load":
        return None
    return syntax.text(module, obj), args.named_children[0]


def _defines(module: Module, stmt: ts.Node, names: set[str]) -> bool:
    declared = syntax.declared_names(module, stmt) if stmt.type == "declaration" else set()
    return bool((declared | set(assign.assigned(module, stmt))) & names)


def _dependencies(module: Module, before: list[ts.Node], names: set[str]) -> set[str]:
    """``names`` and, transitively, the locals their declarations and assignments read."""
    deps = set(names)
    changed = True
    while changed:
        changed = False
        for stmt in before:
            if _defines(module, stmt, deps):
                new = {syntax.text(module, i) for i in syntax.identifiers(stmt)} - deps
                if new:
                    deps |= new
                    changed = True
    return deps


def _guarding(module: Module, before: list[ts.Node], names: set[str]) -> set[str]:
    """What a condition over ``names`` really tests: the names and, transitively, what they are
    computed from, stopping at values read from memory (``valid = i < n`` tests ``i``;
    ``lse = prefix_lse[k]`` is data, not a bound on any address)."""
    out = set(names)
    changed = True
    while changed:
        changed = False
        for stmt in before:
            if not _defines(module, stmt, out):
                continue
            new = {
                syntax.text(module, i) for i in syntax.identifiers(stmt) if not _in_memory_read(i, stmt)
            } - out
            if new:
                out |= new
                changed = True
    return out


def _in_memory_read(node: ts.Node, stop: ts.Node) -> bool:
    """Whether ``node`` sits inside a subscript or a dereference under ``stop`` (an address, whose
    value is data; ``i < n && mask[i]`` still tests ``i`` outside the subscript)."""
    current = node.parent
    while current is not None and current.id != stop.id:
        if current.type == "subscript_expression":
            return True
        if current.type == "pointer_expression" and node_text(current).lstrip().startswith("*"):
            return True
        current = current.parent
    return False


def _returns(stmt: ts.Node) -> bool:
    return stmt.type == "return_statement" or any(n.type == "return_statement" for n in syntax.walk(stmt))


def _condition_names(module: Module, stmt: ts.Node) -> set[str]:
    """The names the conditions guarding a ``return`` inside ``stmt`` read (all of ``stmt``'s
    names when the return is not inside an ``if``)."""
    if stmt.type != "if_statement":
        return {syntax.text(module, i) for i in syntax.identifiers(stmt)}
    cond = stmt.child_by_field_name("condition")
    return {syntax.text(module, i) for i in syntax.identifiers(cond)} if cond is not None else set()


def _type_of(module: Module, decl: ts.Node) -> str:
    type_node = decl.child_by_field_name("type")
    return syntax.text(module, type_node) if type_node is not None else "auto"
