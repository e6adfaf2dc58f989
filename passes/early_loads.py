"""``early-loads``: the loads of the loop after a reduction are issued before the reduction.

A row reduction runs in two passes: a loop accumulates (``sum_sq``, an absmax), the block or the
group combines the partial results, and a second loop uses the result with more loads
(``weight``, the row again). Those loads do not depend on the reduction, but the second loop
issues them only after it: at a few rows the kernel then waits on DRAM twice in a row (the
reduction's barrier and shuffles in between). With ``PREFETCH`` = P (0, the original, by
default) the first P iterations of that loop get their loads issued early, into registers, so
that their latency overlaps the first loop and the reduction::

    Pack<T> ktx_pf_w[P];                         // new: the loads of the first P iterations,
    for k < P: i = init + k * stride; if (cond) ktx_pf_w[k].load(weight + i * VEC);
    accumulating loop                            // as early as their addresses are known
    ... reduction ...
    for k < P (unrolled): i = init + k * stride; if (cond) { body, w = ktx_pf_w[k] instead of w.load(...) }
    for (i = init + P * stride; cond; i += stride) body          // the rest, as written

Loads are ``x.load(pointer)`` statements of the loop's body (the pack idiom of the suite and of
FlashInfer) through a ``const __restrict__`` pointer (a parameter or a local row pointer made
from one), so no store of the kernel can change what they read; they are issued as early as
their addresses are known (rmsnorm's weight before the first loop). Where an earlier loop with
the same header loads the same pack (rmsnorm's and per_token_group_quant's second walk reads
the row again), the row stays in registers instead: the earlier loop's first P iterations keep
their packs (``ktx_pf_in[k] = in``) and the later loop loads nothing for them. Everything the
hoisted code names must exist where it goes and keep its value until the loop. Every change
sits in ``#if KTX_PREFETCH > 0`` groups whose ``#else`` is the original, so ``PREFETCH = 0`` is
the original byte for byte.

Refused (with the construct and its line): no loop that accumulates a value before another
loop; a loop whose header is not ``for (int i = init; i < n; i += stride)`` or whose body
assigns ``i``, breaks or returns; no qualifying load; a load through a pointer that is not
``const __restrict__``, or whose address uses a name declared inside the loop or changed
between the accumulating loop and the loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Loop, Module, syntax
from ktx.ir.facts import assign
from ktx.passes._common import kernel_node, line_of
from ktx.passes._variants import insert_after_line, line_bounds, wrap_lines

from ktx.passbase import KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

COND = "KTX_PREFETCH > 0"


@dataclass(frozen=True)
class HoistedLoad:
    statement: ts.Node
    """``w.load(weight + i * VEC);``"""
    variable: str
    type: str
    pointer: str
    """The argument text: ``weight + i * VEC``."""


@dataclass(frozen=True)
class Kept:
    """A load of the later loop that an earlier loop with the same header already makes, at the
    same iteration, into ``source`` (``in.load(input_row + i * VEC)`` in both of rmsnorm's
    loops): its pack is kept in registers instead of being loaded again."""

    load: HoistedLoad
    loop: Loop
    statement: ts.Node
    """The earlier loop's statement."""
    capture: ts.Node
    """The earlier loop's ``source.load(p);``."""
    source: str


@dataclass(frozen=True)
class EarlySite(Site):
    after: ts.Node
    """The accumulating loop's statement: the prefetch goes right after it."""
    loop: Loop
    statement: ts.Node
    var_type: str
    init: str
    cond: str
    stride: str
    loads: tuple[HoistedLoad, ...]
    kept: tuple[Kept, ...] = ()


class EarlyLoads(Pass[EarlySite]):
    name = "early-loads"
    phase = Phase.UNROLL
    summary = "issue the loads of the loop after a reduction before the reduction (knob PREFETCH)"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "PREFETCH",
            "0, 1, 2, … max",
            "0 (loads where they are, the original)",
            "iterations of the loop after the reduction whose loads are issued before it",
        ),
    )
    options = (Option("max", "int", 4, "most iterations (packs per thread) prefetched"),)
    after = (
        "expose",
        "block-size",
        "unroll",
        "tile",
        "vectorize",
        "launch-bounds",
        "cache-hints",
        "fast-math",
        "cluster-rows",
    )

    def sites(self, target: Target) -> Iterator[EarlySite | Skip]:
        fn = target.kernel
        module = target.module
        kernel = kernel_node(target)
        body = kernel.child_by_field_name("body")
        assert body is not None
        top = {c.id: c for c in body.named_children}
        loops = [(lp, module.node(lp.span)) for lp in target.loops if lp.kind == "for"]
        loops = [(lp, _stmt(n)) for lp, n in loops]
        loops = [
            (lp, n) for lp, n in loops if n.parent is not None and n.parent.id == body.id and n.id in top
        ]
        accumulating = [(lp, n) for lp, n in loops if _carried(module, n, lp)]
        if not accumulating:
            yield Skip(
                "no loop of the kernel's body accumulates a value: there is no reduction", fn.name, fn.span
            )
            return
        last_lp, last = accumulating[-1]
        later = [(lp, n) for lp, n in loops if n.start_byte > last.end_byte]
        if not later:
            yield Skip(
                f"no loop follows the accumulating loop {target.label(last_lp)} (line {line_of(last)})",
                fn.name,
                fn.span,
            )
            return
        reasons: list[str] = []
        for lp, stmt in later:
            try:
                yield self._site(target, body, last, lp, stmt)
                return
            except Refuse as refusal:
                reasons.append(f"{target.label(lp)}: {refusal.reason}")
        yield Skip("; ".join(reasons), fn.name, fn.span)

    def _site(self, target: Target, body: ts.Node, after: ts.Node, loop: Loop, stmt: ts.Node) -> EarlySite:
        module = target.module
        label = target.label(loop)
        if loop.init is None or loop.cond is None or loop.step is None or loop.var is None:
            raise Refuse(f"the header of loop {label} is not for (int i = init; i < n; i += stride)")
        init = module.node(loop.init)
        if init.type != "declaration" or len(init.children_by_field_name("declarator")) != 1:
            raise Refuse(f"loop {label} does not declare its index in its header")
        decl = init.children_by_field_name("declarator")[0]
        value = decl.child_by_field_name("value")
        type_node = init.child_by_field_name("type")
        if value is None or type_node is None:
            raise Refuse(f"loop {label}'s index has no initial value")
        var = loop.var
        cond = syntax.node_at(module, loop.cond, "binary_expression")
        op = cond.child_by_field_name("operator") if cond is not None else None
        left = cond.child_by_field_name("left") if cond is not None else None
        if (
            cond is None
            or op is None
            or left is None
            or syntax.text(module, op) not in ("<", "<=")
            or (syntax.text(module, left) != var)
        ):
            raise Refuse(f"loop {label}'s condition is not {var} < n")
        step = syntax.node_at(module, loop.step, "assignment_expression")
        sop = step.child_by_field_name("operator") if step is not None else None
        stride = step.child_by_field_name("right") if step is not None else None
        if step is None or sop is None or stride is None or syntax.text(module, sop) != "+=":
            raise Refuse(f"loop {label}'s step is not {var} += stride")
        loop_body = module.node(loop.body)
        if loop_body.type != "compound_statement":
            raise Refuse(f"loop {label}'s body is not a block")
        for n in syntax.walk(loop_body):
            if n.type in ("break_statement", "return_statement", "goto_statement"):
                raise Refuse(
                    f"loop {label} leaves early ({syntax.text(module, n).strip()} at line {line_of(n)})"
                )
        if var in assign.assigned(module, loop_body):
            raise Refuse(f"loop {label} assigns its index {var} in its body")
        for part in (value, cond, stride):
            _available(module, body, part, after, stmt, {var}, f"loop {label}'s header")
        loads = self._loads(target, body, after, stmt, loop_body, var, label)
        header = _header(module, loop)
        kept: list[Kept] = []
        for other in target.loops:
            other_stmt = _stmt(module.node(other.span))
            if (
                other.id == loop.id
                or other.kind != "for"
                or other_stmt.parent is None
                or other_stmt.parent.id != body.id
                or other_stmt.end_byte > after.end_byte
                or _header(module, other) != header
                or other.var != var
            ):
                continue
            other_body = module.node(other.body)
            if other_body.type != "compound_statement" or any(
                n.type in ("break_statement", "return_statement", "goto_statement", "continue_statement")
                for n in syntax.walk(other_body)
            ):
                continue
            types = syntax.local_declarations(module, other_body)
            done = {k.load.statement.id for k in kept}
            for ld in loads:
                if ld.statement.id in done:
                    continue
                for child in other_body.named_children:
                    call = _load_of(module, child)
                    if call is None or call[1] != ld.pointer:
                        continue
                    local = types.get(call[0])
                    if local is not None and local.type == ld.type:
                        kept.append(Kept(ld, other, other_stmt, child, call[0]))
                        break
        return EarlySite(
            label,
            loop.span,
            after,
            loop,
            stmt,
            syntax.text(module, type_node),
            syntax.text(module, value),
            syntax.text(module, cond),
            _atom(module, stride),
            loads,
            tuple(kept),
        )

    def _loads(
        self,
        target: Target,
        body: ts.Node,
        after: ts.Node,
        stmt: ts.Node,
        loop_body: ts.Node,
        var: str,
        label: str,
    ) -> tuple[HoistedLoad, ...]:
        module = target.module
        rts = module.facts(target.kernel, target.template_args).roots
        locals_ = syntax.local_declarations(module, loop_body)
        found: list[HoistedLoad] = []
        why: list[str] = []
        for child in loop_body.named_children:
            call = _load_of(module, child)
            if call is None:
                continue
            name = call[0]
            local = locals_.get(name)
            if local is None:
                why.append(f"{name} (line {line_of(child)}) is not declared in the loop")
                continue
            pointer = call[2]
            bases = [
                syntax.text(module, i) for i in syntax.identifiers(pointer) if syntax.text(module, i) in rts
            ]
            root = rts.get(bases[0]) if len(bases) == 1 else None
            if root is None or root.space != "global" or not (root.const and root.restrict):
                what = bases[0] if bases else syntax.text(module, pointer)
                why.append(f"{what} (line {line_of(child)}) is not a const __restrict__ pointer")
                continue
            try:
                _available(module, body, pointer, after, stmt, {var}, f"the address at line {line_of(child)}")
            except Refuse as refusal:
                why.append(refusal.reason)
                continue
            found.append(HoistedLoad(child, name, local.type, syntax.text(module, pointer)))
        if not found:
            raise Refuse(
                f"loop {label} has no load to issue early ({'; '.join(why) or 'no x.load(p) statement'})"
            )
        return tuple(found)

    def rewrite(self, site: EarlySite, rw: Rewriter) -> None:
        module = rw.target.module
        top = max(1, self.int_option("max"))
        values = [v for v in range(top + 1) if v & (v - 1) == 0]
        macro = rw.knob(
            "PREFETCH",
            values,
            0,
            "iterations of the loop after the reduction whose loads go before it (0: as written)",
        )
        indent = syntax.indentation(module.source, site.statement.start_byte)
        inner = indent + "  "
        kept = {k.load.statement.id: k for k in site.kept}
        arrays = {ld.statement.id: f"ktx_pf_{ld.variable}" for ld in site.loads}
        index = f"const {site.var_type} {site.loop.var} = {site.init} + ktx_k * {site.stride};"
        early = [ld for ld in site.loads if ld.statement.id not in kept]
        if early:
            names = ", ".join(ld.pointer.split()[0] for ld in early)
            prefetch = [
                f"{indent}// early-loads: the loads of loop {site.label} ({names}) for its first {macro} "
                "iterations, issued before the reduction",
                *[f"{indent}{ld.type} {arrays[ld.statement.id]}[{macro}];" for ld in early],
                "#pragma unroll",
                f"{indent}for (int ktx_k = 0; ktx_k < {macro}; ++ktx_k) {{",
                f"{inner}{index}",
                f"{inner}if ({site.cond}) {{",
                *[f"{inner}  {arrays[ld.statement.id]}[ktx_k].load({ld.pointer});" for ld in early],
                f"{inner}}}",
                f"{indent}}}",
            ]
            needed: set[str] = set()
            for text in (site.init, site.cond, site.stride, *(ld.pointer for ld in early)):
                needed |= set(re.findall(r"[A-Za-z_]\w*", text))
            needed.discard(site.loop.var or "")
            at = _earliest(module, site.after, needed)
            insert_after_line(rw, at.end_byte, prefetch, COND)
        # An earlier loop that loads the same packs keeps its first iterations' packs.
        by_loop: dict[int, list[Kept]] = {}
        for k in site.kept:
            by_loop.setdefault(k.loop.id, []).append(k)
        for group in by_loop.values():
            first = group[0]
            decls = [
                f"{indent}// early-loads: loop {site.label} takes these packs from here, not from memory"
            ]
            decls += [f"{indent}{k.load.type} {arrays[k.load.statement.id]}[{macro}];" for k in group]
            edits = [
                (
                    k.capture.end_byte,
                    k.capture.end_byte,
                    f" {arrays[k.load.statement.id]}[ktx_k] = {k.source};",
                )
                for k in group
            ]
            self._split(rw, first.loop, first.statement, site, macro, edits, decls)
        # The loop: P unrolled iterations that use the registers, then the rest.
        edits = [
            (
                ld.statement.start_byte,
                ld.statement.end_byte,
                f"{ld.variable} = {arrays[ld.statement.id]}[ktx_k];",
            )
            for ld in site.loads
        ]
        self._split(rw, site.loop, site.statement, site, macro, edits, [])
        notes = []
        if early:
            what = ", ".join(ld.pointer.split()[0] for ld in early)
            notes.append(f"loads of {what} in loop {site.label} can go before the reduction")
        if site.kept:
            reused = ", ".join(k.load.pointer.split()[0] for k in site.kept)
            source = rw.target.label(site.kept[0].loop)
            notes.append(
                f"loop {site.label} takes the packs of {reused} that loop {source} loaded (registers)"
            )
        rw.note("; ".join(notes))

    def _split(
        self,
        rw: Rewriter,
        loop: Loop,
        statement: ts.Node,
        site: EarlySite,
        macro: str,
        edits: list[tuple[int, int, str]],
        before: list[str],
    ) -> None:
        """``loop`` becomes ``before``, its first ``macro`` iterations unrolled (body with ``edits``),
        then the rest from ``init + macro * stride``, under ``#if``; the original in ``#else``."""
        module = rw.target.module
        source = module.source
        indent = syntax.indentation(source, statement.start_byte)
        inner = indent + "  "
        loop_body = module.node(loop.body)
        body_text = bytearray(source[loop_body.start_byte : loop_body.end_byte])
        for a, b, text in sorted(edits, reverse=True):
            body_text[a - loop_body.start_byte : b - loop_body.start_byte] = text.encode()
        first_body = _reindent(body_text.decode(), "  ")
        pragma = loop.pragma
        first, last = line_bounds(source, statement.start_byte, statement.end_byte)
        start = line_bounds(source, pragma.span.start, pragma.span.start)[0] if pragma is not None else first
        if source[first : statement.start_byte].strip():
            raise Refuse(f"line {line_of(statement)}: the loop does not start its line")
        original = source[start:last].decode()
        assert loop.init is not None
        init = module.node(loop.init)
        value = init.children_by_field_name("declarator")[0].child_by_field_name("value")
        assert value is not None
        rel = value.end_byte - start
        rest = original[:rel] + f" + {macro} * {site.stride}" + original[rel:]
        index = f"const {site.var_type} {loop.var} = {site.init} + ktx_k * {site.stride};"
        prologue = [
            *before,
            "#pragma unroll",
            f"{indent}for (int ktx_k = 0; ktx_k < {macro}; ++ktx_k) {{",
            f"{inner}{index}",
            f"{inner}if ({site.cond}) {first_body}",
            f"{indent}}}",
        ]
        wrap_lines(rw, start, last, "\n".join(prologue) + "\n" + rest, COND)


def _earliest(module: Module, after: ts.Node, names: set[str]) -> ts.Node:
    """The last statement of the body, up to ``after``, that declares or assigns one of ``names``:
    the loads can be issued right after it (``after`` itself when none comes earlier)."""
    body = after.parent
    assert body is not None
    last = None
    for stmt in body.named_children:
        if stmt.start_byte > after.start_byte:
            break
        declared = syntax.declared_names(module, stmt) if stmt.type == "declaration" else set()
        if (declared | set(assign.assigned(module, stmt))) & names:
            last = stmt
    return last if last is not None else after


def _load_of(module: Module, stmt: ts.Node) -> tuple[str, str, ts.Node] | None:
    """``(x, text of p, p)`` for a statement ``x.load(p);`` (a local's pack load)."""
    call = stmt.named_children[0] if stmt.type == "expression_statement" and stmt.named_children else None
    fn = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
    args = call.child_by_field_name("arguments") if call is not None else None
    if fn is None or args is None or fn.type != "field_expression" or len(args.named_children) != 1:
        return None
    obj, field = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if obj is None or field is None or obj.type != "identifier" or syntax.text(module, field) != "load":
        return None
    pointer = args.named_children[0]
    return syntax.text(module, obj), syntax.text(module, pointer), pointer


def _header(module: Module, loop: Loop) -> tuple[str, ...]:
    """The loop's header pieces, whitespace removed (two loops with equal headers walk the same
    indices in the same order)."""
    return tuple(
        "".join(module.text(part).split()) if part is not None else ""
        for part in (loop.init, loop.cond, loop.step)
    )


def _atom(module: Module, node: ts.Node) -> str:
    """``node``'s text, parenthesised unless it is a name, a field, a literal or a call."""
    text = syntax.text(module, node)
    simple = (
        "identifier",
        "field_expression",
        "number_literal",
        "call_expression",
        "parenthesized_expression",
    )
    return text if node.type in simple else f"({text})"


def _reindent(text: str, by: str) -> str:
    lines = text.split("\n")
    return "\n".join(
        [lines[0]]
        + [by + line if line.strip() and not line.lstrip().startswith("#") else line for line in lines[1:]]
    )


def _stmt(node: ts.Node) -> ts.Node:
    while node.type != "for_statement" and node.parent is not None:
        node = node.parent
    return node


def _carried(module: Module, stmt: ts.Node, loop: Loop) -> list[str]:
    """What ``loop`` accumulates across iterations; a loop that shuffles or synchronises is part
    of a reduction, not a walk that accumulates."""
    if any(True for _ in syntax.calls(module, stmt, syntax.BARRIERS | syntax.SHUFFLES)):
        return []
    local = syntax.declared_names(module, stmt) | {loop.var or ""}
    return sorted(set(assign.assigned(module, stmt)) - local)


def _available(
    module: Module, body: ts.Node, node: ts.Node, after: ts.Node, loop: ts.Node, allowed: set[str], what: str
) -> None:
    """Refuse unless every name in ``node`` is declared before ``after`` ends (or is a parameter,
    a builtin or a name outside the kernel) and keeps its value until ``loop``."""
    declared = syntax.local_declarations(module, body)
    for ident in syntax.identifiers(node):
        name = syntax.text(module, ident)
        if name in allowed:
            continue
        local = declared.get(name)
        if local is not None and local.declaration.start_byte >= after.end_byte:
            raise Refuse(
                f"{what} uses {name}, declared after the accumulating loop "
                f"(line {line_of(local.declaration)})"
            )
        for w in assign.assigned(module, body).get(name, []):
            if after.end_byte <= w.start_byte < loop.start_byte:
                raise Refuse(f"{what} uses {name}, which changes before the loop (line {line_of(w)})")
