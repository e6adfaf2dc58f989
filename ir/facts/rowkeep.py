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

Scalar rows (llm.c's layernorm and fused_residual, one element a subscript, after row-owner) are
:class:`ScalarKeep`: a first loop and every later loop with the same header in the same statement
list (a block, or a branch of row-owner's ``#if``), the elements ``p[e]`` the later loops read
that the first one read or stored (*kept*), and those of pointers no statement of the kernel
writes, declared ``const`` (*early*: the weight, the bias). Kept values are taken at the end of
the first loop's iteration (a stored element is final: the first loop writes only at the
counter's index plus a value fixed over the loop), and nothing between the loops stores to
memory; the later loops store only at such indices, through pointers that are not kept. Without
``__restrict__`` that assumes no pointer overlaps another at a shifted index (in place, the same
index, stays correct).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import tree_sitter as ts
from ktx.ir.access import roots
from ktx.ir.memref import Root
from ktx.ir.nodes import Function
from ktx.ir.syntax import declared_names, identifiers, memory_writes, text, walk

if TYPE_CHECKING:
    from ktx.ir.module import Module

__all__ = ["KeptLoad", "RowKeep", "ScalarKeep", "ScalarLoad", "row_keep", "row_keeps"]


@dataclass(frozen=True)
class KeptLoad:
    """A load statement of the second loop that registers can serve.

    ``kept``: the first loop loaded the same address; ``early``: a const row no statement
    writes (the weight); ``stored``: the first loop stored ``u`` at the same address (FlashInfer's
    fused add stashes ``x = input + residual`` in shared memory with ``x_vec.store(smem_x + ...)``
    and its second loop loads it back); ``array``: the same round trip of a local array
    ``float x[N]`` through ``float4`` casts (kernels/fused_add_rmsnorm), where ``statement`` and
    ``source`` are the two inner ``for`` loops and ``extent`` is ``N``. A stored value is the
    value the second loop would read as long as nothing between the loops writes through the
    stash pointer (checked) and the stash address is one thread's, one iteration's (the
    kernel's own premise: its second loop reads back what its thread stashed)."""

    kind: Literal["kept", "early", "stored", "array"]
    statement: ts.Node
    """``v.load(ADDR);`` in the second loop."""
    variable: str
    type: str
    address: str
    source: ts.Node | None
    """``u.load(ADDR);`` in the first loop (``kept``), or None (``early``)."""
    source_variable: str = ""
    guard: str = ""
    """``(G)`` when the loads sit in ``if (G) { ... }`` (the same text in both loops), else empty:
    FlashInfer's RMSNorm guards each pack by ``(i * num_threads + thread_id) * VEC_SIZE < d``."""
    extent: str = ""
    """``array`` only: the local array's size as declared (``VEC``)."""
    dead_stash: bool = False
    """``array`` only: the first loop's stash store is dead in the iterations whose values stay
    in registers (:func:`_stash_dead`), so a head may leave it out."""


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
    prefetch: tuple[KeptLoad, ...] = ()
    """Loads of the first loop no later loop needs (fused_add_rmsnorm's input and residual packs),
    which a loads-first head may issue ahead of the first loop's math: set only when every
    store of the first loop that may reach global memory is a pack store in place (``u.store(A)``
    with ``A`` an address the same iteration loaded, under the same guard) and every loaded
    pointer is ``__restrict__``, so no iteration's store can reach another iteration's load
    (the stores to a shared stash cannot reach a global row). Kind ``kept``, ``source`` the
    load statement itself."""

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
    if upd.type == "update_expression" and "++" in text(module, upd):
        arg = upd.child_by_field_name("argument")
        if arg is None or text(module, arg).strip() != var:
            return None
        return text(module, t), var, text(module, dv), text(module, right), "1"
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


def _load(module: Module, stmt: ts.Node, method: str = "load") -> tuple[str, str, ts.Node] | None:
    """``(v, ADDR, address node)`` for the statement ``v.load(ADDR);`` (``v.store(ADDR);`` with
    ``method="store"``)."""
    if stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return None
    call = stmt.named_children[0]
    fn = call.child_by_field_name("function") if call.type == "call_expression" else None
    args = call.child_by_field_name("arguments") if fn is not None else None
    if fn is None or args is None or fn.type != "field_expression" or len(args.named_children) != 1:
        return None
    obj, field = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if obj is None or field is None or obj.type != "identifier" or text(module, field) != method:
        return None
    return text(module, obj), "".join(text(module, args.named_children[0]).split()), args.named_children[0]


def _loads_in(
    module: Module, body: ts.Node, method: str = "load"
) -> list[tuple[ts.Node, str, tuple[str, str, ts.Node]]]:
    """``(statement, guard, load)`` for each ``v.load(ADDR);`` at the body's top level, or in the
    consequence of a top-level ``if (G)`` without ``else`` (guard: G's text with its parentheses);
    ``v.store(ADDR);`` statements with ``method="store"``."""
    out: list[tuple[ts.Node, str, tuple[str, str, ts.Node]]] = []
    for st in body.named_children:
        ld = _load(module, st, method)
        if ld is not None:
            out.append((st, "", ld))
            continue
        if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
            continue
        cond, cons = st.child_by_field_name("condition"), st.child_by_field_name("consequence")
        if cond is None or cons is None:
            continue
        guard = " ".join(text(module, cond).split())
        for c in cons.named_children if cons.type == "compound_statement" else [cons]:
            ld = _load(module, c, method)
            if ld is not None:
                out.append((c, guard, ld))
    return out


def _read_only(module: Module, body: ts.Node, name: str) -> bool:
    """``name`` is only read in ``body``: every use is inside a ``.load(...)`` argument or a
    subscript that is not assigned to. A ``__restrict__`` pointer without ``const`` used so is
    as read-only as a const one (FlashInfer's ``T* __restrict__ input``)."""
    for n in walk(body):
        if n.type != "identifier" or text(module, n) != name:
            continue
        up: ts.Node | None = n.parent
        ok = False
        while up is not None and up.id != body.id:
            if up.type == "argument_list":
                call = up.parent
                fn = call.child_by_field_name("function") if call is not None else None
                field = (
                    fn.child_by_field_name("field")
                    if fn is not None and fn.type == "field_expression"
                    else None
                )
                ok = field is not None and text(module, field) == "load"
                break
            if up.type in ("assignment_expression", "update_expression", "declaration", "init_declarator"):
                break
            up = up.parent
        if not ok:
            return False
    return True


def _type_of(module: Module, body: ts.Node, name: str) -> str | None:
    for n in walk(body):
        if n.type != "declaration":
            continue
        t = n.child_by_field_name("type")
        for d in n.named_children:
            if d.type == "identifier" and text(module, d) == name and t is not None:
                return text(module, t)
    return None


def _prefetch(
    module: Module, a_body: ts.Node, rts: Mapping[str, Root], found: list[KeptLoad]
) -> tuple[KeptLoad, ...]:
    """The first loop's own loads a head may issue before its math (see ``RowKeep.prefetch``)."""
    loads = _loads_in(module, a_body)
    loaded = {(addr, guard) for _, guard, (_, addr, _) in loads}
    for w in memory_writes(module, a_body):
        t = w.child_by_field_name("left") or w.child_by_field_name("argument")
        if t is None or _may_reach_row(module, a_body, rts, t):
            return ()  # a store through a pointer that may reach a row, outside a pack store
    for _, guard, (_, addr, node) in _loads_in(module, a_body, "store"):
        names = {text(module, i) for i in identifiers(node)} & set(rts)
        if len(names) != 1:
            return ()
        if rts[next(iter(names))].space == "shared":
            continue
        if (addr, guard) not in loaded:
            return ()
    for n in walk(a_body):  # a call handed a row pointer may store through it
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            if f is not None and f.type == "field_expression":
                field = f.child_by_field_name("field")
                if field is not None and text(module, field) in ("load", "store"):
                    continue
            args = n.child_by_field_name("arguments")
            handed = {text(module, i) for i in identifiers(args)} & set(rts) if args is not None else set()
            if any(rts[h].space not in ("local", "shared") for h in handed):
                return ()
    taken = {ld.source.id for ld in found if ld.source is not None}
    out: list[KeptLoad] = []
    for st, guard, (v, _addr, node) in loads:
        if st.id in taken:
            continue
        names = {text(module, i) for i in identifiers(node)} & set(rts)
        vt = _type_of(module, a_body, v)
        if len(names) != 1 or not rts[next(iter(names))].restrict or vt is None:
            return ()
        out.append(KeptLoad("kept", st, v, vt, text(module, node), st, v, guard))
    return tuple(out)


def _may_reach_row(module: Module, body: ts.Node, rts: Mapping[str, Root], target: ts.Node) -> bool:
    """A write to ``target`` may reach global memory: it names a pointer whose root is not a
    local or shared array, or none, and its base is not a value the body declares
    (``res.v[j]``: a field of a local pack; ``x[j]``: a local array; a stash in shared memory)."""
    names = {text(module, i) for i in identifiers(target)} & set(rts)
    if names:
        return any(rts[n].space not in ("local", "shared") for n in names)
    base = next(iter(identifiers(target)), None)
    t = _type_of(module, body, text(module, base)) if base is not None else None
    return t is None or "*" in t


def _untouched(
    module: Module,
    address: ts.Node,
    between: list[ts.Node],
    rts: Mapping[str, Root],
    tail: tuple[str, str] | None = None,
) -> bool:
    """The address reads one pointer, and no statement between the loops writes through it or
    reassigns it (the reduction's ``smem[ty] = sum`` writes the base array, which the kernel's
    own layout keeps apart from its stash ``smem_x = smem + ...``). One write is let through:
    the scalar tail's ``p[i]`` in ``for (int i = BOUND * W + ...; ...; i += ...)``, whose
    elements start past the packs, when the caller proved the stash address is ``p + c * W + j``
    with ``c < BOUND`` the pack loop's counter and ``0 <= j < W`` (``tail = (BOUND, W)``)."""
    names = {text(module, i) for i in identifiers(address)} & set(rts)
    if len(names) != 1:
        return False
    (name,) = names
    for st in between:
        for n in walk(st):
            if n.type in ("assignment_expression", "update_expression"):
                t = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if t is None or name not in {text(module, i) for i in identifiers(t)} | {text(module, t)}:
                    continue
                if tail is None or not _past_packs(module, t, name, tail, n):
                    return False
    return True


def _past_packs(module: Module, target: ts.Node, name: str, tail: tuple[str, str], write: ts.Node) -> bool:
    """``target`` is ``name[c]`` inside ``for (T c = BOUND * W + e; ...; c += s)`` (the tail), ``e``
    a thread index (the tail's own premise: it starts at the first element past the packs)."""
    sub = _subscript(module, target)
    if sub is None or sub[0] != name:
        return False
    up = write.parent
    while up is not None and up.type != "for_statement":
        up = up.parent
    h = _header(module, up) if up is not None else None
    start = "".join(tail[0].split()) + "*" + "".join(tail[1].split())
    init = "".join(h[2].split()) if h is not None else ""
    return h is not None and sub[1] == h[1] and (init == start or init.startswith(start + "+"))


_WS = re.compile(r"\s+")
#: ``*reinterpret_cast<float4*>(A) = make_float4(x[j], x[j + 1], x[j + 2], x[j + 3]);``
_STASH_STORE = re.compile(r"^\*reinterpret_cast<(\w+)\*>\((.+)\)=make_\1\((.+)\);$")
#: ``const float4 s4 = *reinterpret_cast<const float4*>(A);``
_STASH_LOAD = re.compile(r"^(?:const )?(\w+) (\w+)=\*reinterpret_cast<const (\w+)\*>\((.+)\);$")
_LANES = ("x", "y", "z", "w")


def _squash(module: Module, node: ts.Node) -> str:
    """The node's text with spaces kept only between two word characters (``const float4 s``)."""
    t = _WS.sub(" ", text(module, node)).strip()
    return re.sub(r"(?<=\W) | (?=\W)", "", t)


def _lane(element: str, arr: str, var: str, m: int) -> bool:
    """``element`` is ``arr[var]`` (m = 0) or ``arr[var+m]``."""
    return element == (f"{arr}[{var}]" if m == 0 else f"{arr}[{var}+{m}]")


def _array_decl(module: Module, body: ts.Node, arr: str) -> tuple[ts.Node, str, str] | None:
    """``(declaration, element type, extent)`` of ``T arr[N];`` at the body's top level."""
    for st in body.named_children:
        if st.type != "declaration":
            continue
        t = st.child_by_field_name("type")
        for d in st.named_children:
            if d.type != "array_declarator" or t is None:
                continue
            name, size = d.child_by_field_name("declarator"), d.child_by_field_name("size")
            if name is not None and size is not None and text(module, name) == arr:
                return st, text(module, t), text(module, size)
    return None


def _stash_dead(
    module: Module, body: ts.Node, ld: KeptLoad, var: str, bound: str, rts: Mapping[str, Root]
) -> bool:
    """Whether an ``array`` stash's store may go from the iterations a head keeps in registers:
    its address is ``p + var * W + j`` (each iteration's own elements, this thread's: the rest
    loop's iterations and the other threads' are other elements), and ``p`` is used nowhere but
    in its declaration, the stash store itself (``ld.source``), the second loop's fill
    (``ld.statement``, which the head replaces with the kept values) and loops that start past
    the packs (``for (... = BOUND * W + ...)``, the scalar tails). Then nothing reads what a head
    iteration would have stashed (fused_add_rmsnorm: 8 ``st.shared.v4`` a thread at PACKS=2
    that no instruction reads)."""
    if ld.source is None:
        return False
    names = {text(module, i) for i in identifiers(ld.source)} & set(rts)
    p = next((n for n in sorted(names) if ld.address.startswith(f"{n}+{''.join(var.split())}*")), None)
    if p is None:
        return False
    start = "".join(bound.split()) + "*"
    allowed = [(ld.source.start_byte, ld.source.end_byte), (ld.statement.start_byte, ld.statement.end_byte)]
    for stmt in body.named_children:
        if stmt.type == "declaration" and p in declared_names(module, stmt):
            allowed.append((stmt.start_byte, stmt.end_byte))
    for n in walk(body):
        if n.type != "for_statement":
            continue
        init = n.child_by_field_name("initializer")
        value = None
        if init is not None:
            value = next(
                (d.child_by_field_name("value") for d in init.named_children if d.type == "init_declarator"),
                None,
            )
        if value is not None and "".join(text(module, value).split()).startswith(start):
            allowed.append((n.start_byte, n.end_byte))
    for ident in identifiers(body):
        if text(module, ident) == p and not any(a <= ident.start_byte < b for a, b in allowed):
            return False
    return True


def _array_stashes(
    module: Module,
    a_body: ts.Node,
    b_body: ts.Node,
    between: list[ts.Node],
    rts: Mapping[str, Root],
    var: str,
    bound: str,
) -> list[KeptLoad]:
    """``array`` stashes: the first loop writes a local array through vector casts to an address,
    an inner loop of the second loop with the same header fills an array of the same name, type
    and size from that address, lane for lane, before any other statement uses it."""
    stores: dict[tuple[str, str], tuple[ts.Node, str, str, str]] = {}
    for st in a_body.named_children:
        if st.type != "for_statement" or (inner := st.child_by_field_name("body")) is None:
            continue
        stmts = inner.named_children if inner.type == "compound_statement" else [inner]
        m = _STASH_STORE.match(_squash(module, stmts[0])) if len(stmts) == 1 else None
        h = _header(module, st)
        if m is None or h is None:
            continue
        lanes = m.group(3).split(",")
        arr = lanes[0].split("[")[0]
        if len(lanes) > 4 or not all(_lane(e, arr, h[1], k) for k, e in enumerate(lanes)):
            continue
        key = (" ".join(_WS.sub(" ", x) for x in h), m.group(2))
        stores[key] = (st, arr, m.group(1), str(len(lanes)))
    out: list[KeptLoad] = []
    for pos, st in enumerate(b_body.named_children):
        if st.type != "for_statement" or (inner := st.child_by_field_name("body")) is None:
            continue
        h = _header(module, st)
        stmts = inner.named_children if inner.type == "compound_statement" else [inner]
        m = _STASH_LOAD.match(_squash(module, stmts[0])) if stmts and h is not None else None
        if m is None or h is None or m.group(1) != m.group(3):
            continue
        hit = stores.get((" ".join(_WS.sub(" ", x) for x in h), m.group(4)))
        if hit is None or len(stmts) != 1 + int(hit[3]):
            continue
        src, arr, vec, lanes = hit
        ok = vec == m.group(1) and all(
            _lane(_squash(module, a).split("=")[0], arr, h[1], k)
            and _squash(module, a) == f"{_squash(module, a).split('=')[0]}={m.group(2)}.{_LANES[k]};"
            for k, a in enumerate(stmts[1:])
        )
        da, db = _array_decl(module, a_body, arr), _array_decl(module, b_body, arr)
        if not ok or da is None or db is None or da[1:] != db[1:]:
            continue
        # the fill comes first: nothing between the array's declaration and the fill reads it
        early_use = any(
            arr in {text(module, i) for i in identifiers(x)}
            for x in b_body.named_children[:pos]
            if x.start_byte > db[0].end_byte
        )
        # a scalar tail past the packs may write the stash between the loops when the address is
        # ``p + var * W + j`` with the inner loop's ``0 <= j < W``: its elements are another range
        names = {text(module, i) for i in identifiers(stmts[0])} & set(rts)
        w = "".join(h[3].split())
        packs_only = (
            len(names) == 1
            and "".join(h[2].split()) == "0"
            and h[4].isdigit()
            and m.group(4) == f"{next(iter(names))}+{var}*{w}+{h[1]}"
        )
        if early_use or not _untouched(module, stmts[0], between, rts, (bound, w) if packs_only else None):
            continue
        out.append(KeptLoad("array", st, arr, db[1], m.group(4), src, arr, "", db[2]))
    return out


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
            first_loads: dict[tuple[str, str], tuple[ts.Node, str]] = {}
            for s, guard, ld in _loads_in(module, a_body):
                first_loads[(ld[1], guard)] = (s, ld[0])
            first_stores = {(ld[1], guard): (s, ld[0]) for s, guard, ld in _loads_in(module, a_body, "store")}
            between = [n for n in body.named_children if first.end_byte <= n.start_byte < second.start_byte]
            found: list[KeptLoad] = list(_array_stashes(module, a_body, b_body, between, rts, ha[1], ha[3]))
            for s, guard, ld in _loads_in(module, b_body):
                v, addr, node = ld
                if (addr, guard) in first_stores:
                    src, u = first_stores[(addr, guard)]
                    vt = _type_of(module, b_body, v)
                    if (
                        vt is not None
                        and _type_of(module, a_body, u) == vt
                        and _untouched(module, node, between, rts)
                    ):
                        found.append(KeptLoad("stored", s, v, vt, text(module, node), src, u, guard))
                    continue
                names = {text(module, i) for i in identifiers(node)}
                pointers = [(n, rts[n]) for n in names if n in rts]
                if len(pointers) != 1 or not pointers[0][1].restrict:
                    continue
                if not (pointers[0][1].const or _read_only(module, body, pointers[0][0])):
                    continue
                vt = _type_of(module, b_body, v)
                if vt is None:
                    continue
                if (addr, guard) in first_loads:
                    src, u = first_loads[(addr, guard)]
                    if _type_of(module, a_body, u) != vt:
                        continue
                    found.append(KeptLoad("kept", s, v, vt, text(module, node), src, u, guard))
                else:
                    found.append(KeptLoad("early", s, v, vt, text(module, node), None, "", guard))
            if found:
                found = [
                    replace(ld, dead_stash=True)
                    if ld.kind == "array" and _stash_dead(module, body, ld, ha[1], ha[3], rts)
                    else ld
                    for ld in found
                ]
                pre = _prefetch(module, a_body, rts, found)
                return RowKeep(first, second, ha[1], ha[0], ha[2], ha[3], ha[4], tuple(found), pre)
    return (
        "no two row loops with the same header whose second loads packs (v.load(p)) from a "
        "const __restrict__ row or from what the first loop loaded"
    )


@dataclass(frozen=True)
class ScalarLoad:
    """An element ``p[e]`` later loops read that registers can serve."""

    kind: Literal["kept", "early"]
    element: str
    """As the later loops write it (``x[i]``); compact (no spaces) for matching."""
    pointer: str
    type: str
    """The pointee type the keep array holds (``float``, ``floatX``)."""
    reads: tuple[ts.Node, ...]
    """The subscripts of the later loops that read it (each becomes the keep slot in the head)."""


@dataclass(frozen=True)
class ScalarKeep:
    first: ts.Node
    seconds: tuple[ts.Node, ...]
    var: str
    var_type: str
    init: str
    bound: str
    step: str
    loads: tuple[ScalarLoad, ...]
    body_end: int = 0
    """The byte after the first loop's body (its closing brace is the byte before)."""
    first_statement: ts.Node | None = None
    """The first loop's first statement (its indentation is the body's)."""

    @property
    def line(self) -> int:
        return self.seconds[0].start_point[0] + 1


_LISTS = ("compound_statement", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif")
_MATH = re.compile(r"^(__)?(sqrt|rsqrt|exp|exp2|log|log2|pow|fabs|abs|fmax|fmin|max|min|tanh|erf|fma)f?$")


def _compact_text(module: Module, node: ts.Node) -> str:
    return "".join(text(module, node).split())


def _subscript(module: Module, node: ts.Node) -> tuple[str, str] | None:
    """``(pointer, index)`` compact texts of ``p[e]`` with ``p`` a name."""
    if node.type != "subscript_expression":
        return None
    arr = node.child_by_field_name("argument")
    idx = node.child_by_field_name("indices") or node.child_by_field_name("index")
    if arr is None or idx is None or arr.type != "identifier":
        return None
    return text(module, arr), _compact_text(module, idx).strip("[]")


def _counter_offset(index: str, var: str) -> bool:
    """``i``, ``e + i`` or ``i + e`` with ``e`` free of ``i``: one element per iteration."""
    word = re.compile(rf"\b{re.escape(var)}\b")
    if index == var:
        return True
    if index.endswith("+" + var):
        return not word.search(index[: -len(var) - 1])
    if index.startswith(var + "+"):
        return not word.search(index[len(var) + 1 :])
    return False


def _global_write(module: Module, rts: Mapping[str, Root] | None, target: ts.Node) -> bool:
    """Whether a write to ``target`` may reach global memory, where the kept rows live.

    A field or element of a local value (``mean_var.x += xi``, ``itemf[i][0] = f0``: ggml's
    norm_f32, exllamav2) is a register, and a ``__shared__`` array cannot alias a global row
    (the reduction between a norm's loops writes one: FlashInfer's RMSNorm). Anything reached
    through a pointer whose root is global or unknown is a store to memory."""
    if rts is None:
        return True
    base, through_pointer = target, False
    while base.type in ("subscript_expression", "field_expression", "pointer_expression",
                        "parenthesized_expression"):  # fmt: skip
        op = base.child_by_field_name("operator") if base.type == "field_expression" else None
        if base.type == "pointer_expression" or (op is not None and text(module, op) == "->"):
            through_pointer = True
        inner = base.child_by_field_name("argument")
        if inner is None:
            inner = base.named_children[0] if base.named_children else None
        if inner is None:
            return True
        base = inner
    if base.type != "identifier":
        return True
    root = rts.get(text(module, base))
    if root is None:
        return through_pointer
    return root.space != "shared"


def _stores(
    module: Module, node: ts.Node, rts: Mapping[str, Root] | None = None
) -> list[tuple[ts.Node, tuple[str, str] | None]]:
    """Stores under ``node`` that may reach global memory (all of them when ``rts`` is None),
    each with its ``(pointer, index)`` when it is ``p[e]``."""
    out: list[tuple[ts.Node, tuple[str, str] | None]] = []
    for w in memory_writes(module, node):
        t = w.child_by_field_name("left") or w.child_by_field_name("argument")
        if t is not None and not _global_write(module, rts, t):
            continue
        out.append((w, _subscript(module, t) if t is not None else None))
    return out


#: Calls that touch no global memory: warp shuffles and votes, barriers, casts.
_SYNC = re.compile(
    r"^(__)?(shfl(_xor|_up|_down)?_sync|syncthreads(_count|_and|_or)?|syncwarp|reduce_\w+_sync)$"
    # and function-style casts, float(d)
    r"|^(float|double|int|unsigned|half|bool|u?int(8|16|32|64)_t|size_t)$"
)


def _calls_only_math(module: Module, node: ts.Node) -> bool:
    for n in walk(node):
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            name = text(module, f) if f is not None else ""
            name = name.rsplit("::", 1)[-1]  # math::rsqrt, math::shfl_xor_sync (FlashInfer)
            if not (name.startswith("ktx_") or _MATH.match(name) or _SYNC.match(name)):
                return False
    return True


def _line(node: ts.Node) -> int:
    return node.start_point[0] + 1


def _scalar_keep(module: Module, fn: Function, loops: list[ts.Node], a: int) -> ScalarKeep | str | None:
    """The scalar rows of ``loops[a]`` and the later loops with its header; None when no later
    loop shares the header (no pair), else why the pair cannot keep its row (construct, line)."""
    first = loops[a]
    ha = _header(module, first)
    if ha is None:
        return None
    norm = [" ".join(x.split()) for x in ha]
    seconds = [
        b for b in loops[a + 1 :] if (hb := _header(module, b)) and [" ".join(x.split()) for x in hb] == norm
    ]
    var = ha[1]
    bodies = [x.child_by_field_name("body") for x in (first, *seconds)]
    if not seconds:
        return None
    pair = f"loops at line {_line(first)} and line {_line(seconds[0])}"
    if any(b is None or b.type != "compound_statement" for b in bodies):
        return f"{pair}: a body is not a braced block"
    for n in walk(first):
        if n.type in ("break_statement", "continue_statement", "return_statement", "goto_statement"):
            return f"{pair}: the first loop leaves early ({n.type.split('_')[0]} at line {_line(n)})"
    rts = roots(module, fn)
    first_stores = _stores(module, first, rts)
    for st, sub in first_stores:
        if sub is None or not _counter_offset(sub[1], var):
            return f"{pair}: the first loop stores off the counter's index (line {_line(st)})"
    # between the first loop and the last later loop: no store, no call but math and ktx_ helpers
    parent = first.parent
    assert parent is not None
    last = seconds[-1]
    second_ids = {b.id for b in seconds}
    for st in parent.named_children:
        if st.start_byte <= first.end_byte or st.start_byte >= last.start_byte or st.id in second_ids:
            continue
        if _stores(module, st, rts):
            return f"{pair}: a store between the loops (line {_line(st)})"
        if not _calls_only_math(module, st):
            return (
                f"{pair}: a call between the loops that is not math (line {_line(st)}: "
                f"{' '.join(text(module, st).split())[:60]}); its effects on memory are not known"
            )
    later_written: set[str] = set()
    for b in seconds:
        for st, sub in _stores(module, b, rts):
            if sub is None or not _counter_offset(sub[1], var):
                return f"{pair}: a later loop stores off the counter's index (line {_line(st)})"
            later_written.add(sub[0])
        for n in walk(b):
            if n.type in ("break_statement", "continue_statement", "return_statement", "goto_statement"):
                return f"{pair}: a later loop leaves early ({n.type.split('_')[0]} at line {_line(n)})"
    in_first = {f"{sub[0]}[{sub[1]}]" for n in walk(first) if (sub := _subscript(module, n)) is not None}
    body = module.node(fn.body)
    written_anywhere = {sub[0] for _, sub in _stores(module, body, rts) if sub is not None}
    declared_before = {p.name for p in fn.params} | {
        text(module, i)
        for d in walk(body)
        if d.type == "declaration" and d.end_byte <= first.start_byte
        for i in identifiers(d)
    }
    found: dict[str, tuple[str, str, str, str, list[ts.Node]]] = {}
    for b in seconds:
        for n in walk(b):
            sub = _subscript(module, n)
            if sub is None or sub[0] in later_written or not _counter_offset(sub[1], var):
                continue
            key = f"{sub[0]}[{sub[1]}]"
            root = rts.get(sub[0])
            if root is None or not root.element_type or root.space != "global":
                continue
            if key in in_first:
                kind = "kept"
            elif sub[0] not in written_anywhere and root.const and sub[0] in declared_before:
                kind = "early"
            else:
                continue
            if key not in found:
                found[key] = (kind, text(module, n), sub[0], root.element_type, [])
            found[key][4].append(n)
    if not any(v[0] == "kept" for v in found.values()):
        return (
            f"{pair}: no element the later loops read is one the first loop read from a global row "
            "they do not write (a row the loops write in place, or through pointers not known to "
            "be apart, is read again)"
        )
    loads = tuple(ScalarLoad(k, e, p, t, tuple(r)) for k, e, p, t, r in found.values())  # type: ignore[arg-type]
    fb = bodies[0]
    assert fb is not None
    stmts = [c for c in fb.named_children if c.type != "comment"]
    return ScalarKeep(
        first,
        tuple(seconds),
        var,
        ha[0],
        ha[2],
        ha[3],
        ha[4],
        loads,
        fb.end_byte,
        stmts[0] if stmts else None,
    )


def row_keeps(module: Module, fn: Function) -> tuple[RowKeep | ScalarKeep, ...] | str:
    """Every place a row's loads can stay in registers: the packed pair of :func:`row_keep`, or
    else the scalar rows of each statement list (one per branch of row-owner's ``#if``)."""
    keep = row_keep(module, fn)
    if isinstance(keep, RowKeep):
        return (keep,)
    found: list[RowKeep | ScalarKeep] = []
    refused: list[str] = []
    taken: set[int] = set()
    for node in walk(module.node(fn.body)):
        if node.type not in _LISTS:
            continue
        loops = [c for c in node.named_children if c.type == "for_statement"]
        for a in range(len(loops)):
            if loops[a].id in taken:
                continue
            sk = _scalar_keep(module, fn, loops, a)
            if isinstance(sk, ScalarKeep):
                found.append(sk)
                taken.update(x.id for x in (sk.first, *sk.seconds))
            elif sk is not None and sk not in refused:
                refused.append(sk)
    if found:
        return tuple(found)
    why = (
        "; ".join(refused[:3])
        if refused
        else f"no two loops over the row share a header ({_loops_seen(module, fn)})"
    )
    return (
        f"{keep}; nor scalar rows: a loop whose elements later loops with the same header read "
        f"again (none stored between, the later loops storing only at the counter's index): {why}"
    )


def _loops_seen(module: Module, fn: Function) -> str:
    """The kernel's ``for`` loops, each with its line, header and the line of the statement list
    holding it (loops of one header in two branches are not a pair), or the call that holds the
    loops when the kernel has none of its own (apex's cuApplyRMSNorm calls cuApplyLayerNorm_)."""
    body = module.node(fn.body)
    loops = [n for n in walk(body) if n.type == "for_statement"]
    if not loops:
        calls = [n for n in walk(body) if n.type == "call_expression"]
        f = calls[0].child_by_field_name("function") if calls else None
        if f is None:
            return "the kernel has no loop"
        name = text(module, f).split("<")[0]
        return (
            f"the kernel has no loop of its own: it calls {name} at line {_line(calls[0])}, "
            "which this pass does not enter"
        )
    seen = []
    for n in loops[:6]:
        head = " ".join(text(module, n)[: text(module, n).find(")") + 1].split())
        holder = n.parent
        seen.append(f"line {_line(n)} `{head}` in the block at line {_line(holder) if holder else 0}")
    more = f" and {len(loops) - 6} more" if len(loops) > 6 else ""
    return "its loops: " + "; ".join(seen) + more
