"""Row loads to keep in registers: packs a block's second pass over a row loads again.

A normalisation reads its row twice: a loop reduces it (``sum x^2``), a barrier publishes the
result, a second loop with the same header reads the row again and writes. When the row fits in
the block's registers, the first loop's packs can stay there, and the second loop's other
loads (the weight) can be issued before the reduction, so that the barrier hides them. This
module finds the two loops and the loads the second one can take from registers:

* both loops are ``for (int i = INIT; i < BOUND; i += STEP)`` with the same text, at the same
  level of the kernel's body, the first before the second;
* a load of the second loop, a statement ``v.load(ADDR);`` (a pack's load), is *kept* when the
  first loop has ``u.load(ADDR);`` with the same address text, or *early* when ``ADDR`` reads a
  ``const __restrict__`` pointer only (no write of the kernel reaches it);
* a kept load's pointer is ``const __restrict__`` too: nothing between the loops rewrites it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import tree_sitter as ts
from ktx.ir.access import roots
from ktx.ir.nodes import Function
from ktx.ir.syntax import identifiers, text, walk

if TYPE_CHECKING:
    from ktx.ir.module import Module

__all__ = ["KeptLoad", "RowKeep", "row_keep"]


@dataclass(frozen=True)
class KeptLoad:
    """A load statement of the second loop that registers can serve."""

    kind: Literal["kept", "early"]
    statement: ts.Node
    """``v.load(ADDR);`` in the second loop."""
    variable: str
    type: str
    address: str
    source: ts.Node | None
    """``u.load(ADDR);`` in the first loop (``kept``), or None (``early``)."""
    source_variable: str = ""


@dataclass(frozen=True)
class RowKeep:
    first: ts.Node
    second: ts.Node
    var: str
    var_type: str
    init: str
    bound: str
    step: str
    loads: tuple[KeptLoad, ...]

    @property
    def line(self) -> int:
        return self.second.start_point[0] + 1


def _header(module: Module, loop: ts.Node) -> tuple[str, str, str, str, str] | None:
    """``(type, var, init, bound, step)`` of ``for (T var = init; var < bound; var += step)``."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if loop.type != "for_statement" or init is None or cond is None or upd is None:
        return None
    if init.type != "declaration":
        return None
    t = init.child_by_field_name("type")
    decls = [d for d in init.named_children if d.type == "init_declarator"]
    if t is None or len(decls) != 1:
        return None
    dn, dv = decls[0].child_by_field_name("declarator"), decls[0].child_by_field_name("value")
    if dn is None or dv is None:
        return None
    var = text(module, dn)
    op, left, right = (cond.child_by_field_name(f) for f in ("operator", "left", "right"))
    if cond.type != "binary_expression" or op is None or op.type != "<" or left is None or right is None:
        return None
    if text(module, left).strip() != var:
        return None
    uop, uleft, uright = (upd.child_by_field_name(f) for f in ("operator", "left", "right"))
    if (
        upd.type != "assignment_expression"
        or uop is None
        or uop.type != "+="
        or uleft is None
        or uright is None
    ):
        return None
    if text(module, uleft).strip() != var:
        return None
    return text(module, t), var, text(module, dv), text(module, right), text(module, uright)


def _load(module: Module, stmt: ts.Node) -> tuple[str, str, ts.Node] | None:
    """``(v, ADDR, address node)`` for the statement ``v.load(ADDR);``."""
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return None
    call = stmt.named_children[0]
    fn = call.child_by_field_name("function") if call.type == "call_expression" else None
    args = call.child_by_field_name("arguments") if fn is not None else None
    if fn is None or args is None or fn.type != "field_expression" or len(args.named_children) != 1:
        return None
    obj, field = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if obj is None or field is None or obj.type != "identifier" or text(module, field) != "load":
        return None
    return text(module, obj), "".join(text(module, args.named_children[0]).split()), args.named_children[0]


def _type_of(module: Module, body: ts.Node, name: str) -> str | None:
    for n in walk(body):
        if n.type != "declaration":
            continue
        t = n.child_by_field_name("type")
        for d in n.named_children:
            if d.type == "identifier" and text(module, d) == name and t is not None:
                return text(module, t)
    return None


def row_keep(module: Module, fn: Function) -> RowKeep | str:
    """The two row loops and the loads registers can serve, or why there are none."""
    body = module.node(fn.body)
    loops = [s for s in body.named_children if s.type == "for_statement"]
    rts = roots(module, fn)
    for a_pos, first in enumerate(loops):
        ha = _header(module, first)
        if ha is None:
            continue
        for second in loops[a_pos + 1 :]:
            hb = _header(module, second)
            if hb is None or [" ".join(x.split()) for x in ha] != [" ".join(x.split()) for x in hb]:
                continue
            b_body, a_body = second.child_by_field_name("body"), first.child_by_field_name("body")
            if b_body is None or a_body is None or b_body.type != "compound_statement":
                continue
            first_loads: dict[str, tuple[ts.Node, str]] = {}
            for s in a_body.named_children:
                ld = _load(module, s)
                if ld is not None:
                    first_loads[ld[1]] = (s, ld[0])
            found: list[KeptLoad] = []
            for s in b_body.named_children:
                ld = _load(module, s)
                if ld is None:
                    continue
                v, addr, node = ld
                names = {text(module, i) for i in identifiers(node)}
                pointers = [rts[n] for n in names if n in rts]
                if len(pointers) != 1 or not (pointers[0].const and pointers[0].restrict):
                    continue
                vt = _type_of(module, b_body, v)
                if vt is None:
                    continue
                if addr in first_loads:
                    src, u = first_loads[addr]
                    if _type_of(module, a_body, u) != vt:
                        continue
                    found.append(KeptLoad("kept", s, v, vt, text(module, node), src, u))
                else:
                    found.append(KeptLoad("early", s, v, vt, text(module, node), None))
            if found:
                return RowKeep(first, second, ha[1], ha[0], ha[2], ha[3], ha[4], tuple(found))
    return (
        "no two row loops with the same header whose second loads packs (v.load(p)) from a "
        "const __restrict__ row or from what the first loop loaded"
    )
