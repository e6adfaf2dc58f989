"""The facts of a kernel as stable text: what ``ktx inspect --facts`` prints and goldens check.

One line per fact, in source order, so that a refusal can be debugged by reading what the
analysis saw (MLIR's analysis printers, ``-test-print-...``, serve the same purpose)::

    kernel k (line 1)
      launch: line 9 <<<(n + 255) / 256, 256>>>
      element: i = blockDim.x*blockIdx.x + threadIdx.x (int), guard `if (i < n)` line 3
      loop L0 line 4: i from threadIdx.x step blockDim.x while i < n; owner block, partitions
      ref line 5: store y[i] root y index i elt float 4B unconditional alias restrict:y loop L0
      reduction: sum s over the loop at line 4 (line 6)
      pack L0: y, x (4B)

Node ids, byte offsets and anything else that moves with unrelated edits are left out.
"""

from __future__ import annotations

import tree_sitter as ts
from ktx.ir.facts.kernel import Facts
from ktx.ir.facts.packing import Refusal, element_plan, loop_plan
from ktx.ir.facts.tuning import instantiated_values, items_coverage, thread_indexed_shared, tuning_params

_MAX_BYTES = 16


def render(facts: Facts) -> str:
    """Every fact of ``facts`` as text, one line each."""
    m, fn = facts.module, facts.fn
    lines = [f"kernel {fn.name} (line {fn.span.line})"]
    for site in facts.launch.launches:
        lines.append(
            f"  launch: line {site.span.line} <<<{_flat(m.text(site.grid))}, {_flat(m.text(site.block))}>>>"
            + (f" template <{', '.join(site.template_args)}>" if site.template_args else "")
        )
    for alias in facts.launch.block_aliases:
        value = "" if alias.value is None else f" = {alias.value}"
        lines.append(f"  block alias: {alias.name} is blockDim.{alias.axis} ({alias.kind}{value})")
    for alias in facts.launch.block_x_equal:
        value = "" if alias.value is None else f" = {alias.value}"
        lines.append(f"  block x: {alias.name} is blockDim.{alias.axis} ({alias.kind}{value}, not a knob)")
    for name, number in facts.launch.template_values:
        lines.append(f"  template value: {name} = {number}")
    if facts.template_args:
        lines.append(f"  template args: {', '.join(facts.template_args)}")
    for tp in tuning_params(m, fn, facts.template_args):
        value = "per shape" if tp.spec_selected else ("?" if tp.value is None else str(tp.value))
        lines.append(f"  setting: {tp.name} {tp.kind} {tp.role} = {value} ({tp.why})")
        if tp.kind == "template-int":
            found = instantiated_values(m, fn, tp.name, facts.template_args)
            if found:
                lines.append(f"  setting {tp.name}: the file instantiates {', '.join(map(str, found))}")
        cov = items_coverage(m, fn, tp.name, facts.template_args) if tp.role == "items" else None
        if cov is not None:
            guards = ", ".join(map(str, cov.lines))
            lines.append(
                f"  setting {tp.name}: covers {tp.name} x step {cov.step('blockDim.x')} of {cov.extent}, "
                f"past it guarded (line {guards})"
            )
        for ti in thread_indexed_shared(m, fn, tp.name):
            axis = "xyz"[ti.axis]
            what = f"threadIdx.{axis}" + (f" {'%' if ti.modulo else '/'} {ti.per}" if ti.per > 1 else "")
            lines.append(
                f"  setting {tp.name}: sizes __shared__ {ti.array}[{ti.extent}], written at {what} "
                f"(line {ti.line}): at least {ti.needed('blockDim.' + axis)} entries"
            )
    t = facts.element
    if t is not None:
        guard = "no guard"
        if t.guard is not None:
            op = "<=" if t.guard.inclusive else "<"
            how = "if" if t.guard.kind == "if" else "return unless"
            guard = f"guard {how} {t.var} {op} {t.guard.bound_text} (line {t.guard.line})"
        lines.append(f"  element: {t.var} = {t.form} ({_flat(t.type) or 'int'}), {guard}")
    for lf in facts.loops:
        s = lf.shape
        if s is None or s.var is None:
            desc = f"{lf.loop.kind}, shape unknown"
        else:
            desc = f"{s.var} from {_opt(s.start)} step {_opt(s.step)} while {s.var} {s.cmp} {_opt(s.bound)}"
        owned = f"owner {lf.owner}" + (", partitions" if lf.partitions else "")
        lines.append(f"  loop {lf.label} line {lf.loop.span.line} depth {lf.depth}: {desc}; {owned}")
    for r in facts.refs:
        where = f" loop {r.loop_label}" if r.loop_label else ""
        size = f" {r.element_size}B" if r.element_size is not None else " size?"
        via = f" via {r.intrinsic}" if r.intrinsic else ""
        if r.unit_type and r.unit_type != r.element_type and r.width != 1:
            via += f" unit {r.unit_type} x{_opt(r.width)}"
        lines.append(
            f"  ref line {r.line}: {r.kind} {_flat(_text(r.node))} root {r.root or '?'} index {_opt(r.index)}"
            f" elt {r.element_type or '?'}{size}{via} "
            f"{'conditional' if r.conditional else 'unconditional'} alias {r.alias}{where}"
        )
    for red in facts.reductions():
        lines.append(f"  reduction: {red.describe()}")
    plan = element_plan(facts, _MAX_BYTES, True)
    if isinstance(plan, Refusal):
        lines.append(f"  pack element: no, {plan.reason}")
    elif plan is not None:
        lines.append(f"  pack element: {_sizes(plan.sizes)}")
    for lf in facts.loops:
        p = loop_plan(facts, lf.loop, _MAX_BYTES)
        if isinstance(p, str):
            lines.append(f"  pack {lf.label}: no, {p}")
            continue
        unknown = {a.pointer for a in p.packed if a.memory.element_type in p.unsized}
        shown = tuple((q, s) for q, s in p.sizes if q not in unknown)
        sized = (
            f"sizeof({', '.join(p.unsized)}) at compile time for {', '.join(sorted(unknown))}"
            if unknown
            else ""
        )
        lines.append(f"  pack {lf.label}: " + ", ".join(x for x in (_sizes(shown), sized) if x))
    return "\n".join(lines)


def _sizes(sizes: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{p} ({s}B)" for p, s in sizes)


def _opt(x: object) -> str:
    return "?" if x is None else str(x)


def _text(node: ts.Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _flat(text: str) -> str:
    return " ".join(text.split())
