"""Online pairs: a row max followed by a sum of ``exp(x - max)`` that one pass over the row can fuse.

The softmax's first two passes read the row twice: a loop finds the running max ``m``, a second
loop sums ``exp(x - m)``. The sum reads the max only through ``exp(x - m)``, and
``exp(x - m') = exp(x - m) * exp(m - m')``, so one loop can keep the pair ``(m, s)`` and rescale
``s`` whenever ``m`` moves (Milakov & Gimelshein 2018). :mod:`ktx.ir.facts.reductions` records the
sum's :attr:`~ktx.ir.facts.reductions.Reduction.depends_on` the max; this module decides whether
the pair is one the rewrite may fuse, and gathers what the rewrite needs:

* the max loop ``A`` and the sum loop ``B`` walk the same range with the same counter (their
  headers are the same text), so each element ``x`` the sum reads is one the max read;
* the sum's value is ``EXP(x - m)`` with ``x`` the max's element text (``expf``, ``__expf`` or
  ``exp``), written directly, through a local (``float e = expf(...); s += e;``) or through the
  element just stored (``o[j] = expf(...); s += o[j];``, llm.c's v1);
* ``m`` starts at minus infinity (or a literal at most -1e30) and ``s`` at zero, and nothing
  between the loops but ``s``'s declaration and row-owner's cross-lane reduction of ``m``;
* what else the sum loop does (the stores of ``exp(x - m)``) keeps its place after the fused
  loop, and a following loop with the same header that only rewrites those elements in place
  (``o[j] /= s``) may join it: every subscript in both is the counter itself, so iteration ``j``
  reads only what iteration ``j`` wrote.

:func:`online_pairs` answers per kernel with the pairs and, for every dependent max/sum it could
not take, the reason (the planner and the pass's remarks quote it).

The same machinery covers the layernorm pair, a sum ``m`` (the mean, once divided) followed by a
sum of squared deviations ``v += (x - c) * (x - c)`` with ``c`` computed from ``m`` between the
loops (:class:`VariancePair`). The first loop stays as it is (``m`` keeps its exact value and
order of summation); it also keeps Welford's running count, mean and sum of squared deviations of
the element the second loop reads, and ``v`` follows from them for any centre ``c``:
``sum (x - c)^2 = M2 + n * (mean - c)^2``. That needs only that iteration ``j`` of the first loop
leaves the element the second loop reads at ``j`` final: the first loop writes memory at the
counter's index only (fused_residual stores the row it sums, the variance loop reads it back),
and the second loop does nothing but fold (its locals and the one update).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.facts.reductions import Reduction, reductions
from ktx.ir.nodes import Function
from ktx.ir.syntax import declared_names, memory_writes, text, walk

if TYPE_CHECKING:
    from ktx.ir.module import Module

__all__ = ["EXP_CALLS", "OnlinePair", "VariancePair", "online_pairs"]

#: The exponentials whose rescaling the fused loop reproduces.
EXP_CALLS = frozenset({"expf", "__expf", "exp"})

_ROW_REDUCE = re.compile(r"^(\w+)=ktx_row_reduce<(.+)>\((\w+),ktx_row_(max|sum)\(\)\);$")
_MATH = frozenset({"sqrt", "rsqrt", "log", "exp", "fdivide", "max", "min", "fmax", "fmin"})
_MINUS_INF = frozenset({"-INFINITY", "-CUDART_INF_F", "-CUDART_INF", "-FLT_MAX", "-DBL_MAX"})


@dataclass(frozen=True)
class OnlinePair:
    """A max loop and the dependent sum-of-exp loop one pass may compute together."""

    maximum: Reduction
    total: Reduction
    m: str
    s: str
    m_type: str
    """The declared type of ``m`` (the fused loop's element and exponent type)."""
    element: str
    """The element both loops read, as the max loop writes it (``inp_row[j]``)."""
    exp: str
    """The sum's exponential (``expf``), reused for the rescale."""
    header: str
    """The loops' common header text, ``for (...)`` without the body."""
    between: tuple[ts.Node, ...]
    """Statements between the two loops (``s``'s declaration, row-owner's reduce of ``m``)."""
    group: str
    """Threads per row of row-owner's cross-lane reduces around the pair (``''``: none)."""
    after: ts.Node | None
    """Row-owner's reduce of ``s`` right after the sum loop, or None."""
    rest: tuple[ts.Node, ...]
    """The sum loop's other statements (the stores of ``exp(x - m)``), in order."""
    fused: ts.Node | None
    """A following loop, same header, in-place element-wise, that joins ``rest``; or None."""
    pre: tuple[ts.Node, ...] = ()
    """Declarations between the sum loop and ``fused`` that read no memory (``inv = 1.f / s``):
    they go before the joined loop."""

    @property
    def first(self) -> ts.Node:
        return self.maximum.loop

    @property
    def last(self) -> ts.Node:
        if self.fused is not None:
            return self.fused
        return self.after if self.after is not None else self.total.loop

    @property
    def line(self) -> int:
        return self.maximum.loop.start_point[0] + 1


def _compact(module: Module, node: ts.Node) -> str:
    return "".join(text(module, node).split())


def _header(module: Module, loop: ts.Node) -> str | None:
    body = loop.child_by_field_name("body")
    if loop.type != "for_statement" or body is None:
        return None
    return module.source[loop.start_byte : body.start_byte].decode().rstrip()


def _same_header(a: str | None, b: str | None) -> bool:
    """Whether two loop headers are the same text, spacing aside and ``++j`` read as ``j++``."""
    if a is None or b is None:
        return False

    def norm(h: str) -> str:
        return re.sub(r"\+\+(\w+)", r"\1++", "".join(h.split()))

    return norm(a) == norm(b)


def _statements(loop: ts.Node) -> list[ts.Node]:
    body = loop.child_by_field_name("body")
    if body is None:
        return []
    if body.type == "compound_statement":
        return [c for c in body.named_children if c.type != "comment"]
    return [body]


def _counter(loop: ts.Node, module: Module) -> str | None:
    init = loop.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return None
    for d in init.named_children:
        if d.type == "init_declarator":
            name = d.child_by_field_name("declarator")
            return text(module, name) if name is not None else None
    return None


def _declaration(module: Module, fn_body: ts.Node, name: str, before: int) -> tuple[ts.Node, str, str] | None:
    """``(declaration, type, initial value)`` of local ``name`` declared before byte ``before``."""
    found: tuple[ts.Node, str, str] | None = None
    for n in walk(fn_body):
        if n.type != "declaration" or n.start_byte >= before:
            continue
        t = n.child_by_field_name("type")
        for d in n.named_children:
            if d.type != "init_declarator":
                continue
            dn, dv = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if dn is not None and dv is not None and text(module, dn) == name and t is not None:
                found = (n, text(module, t), _compact(module, dv))
    return found


def _is_zero(value: str) -> bool:
    try:
        return float(value.rstrip("fFlL")) == 0.0
    except ValueError:
        return False


def _is_minus_inf(value: str) -> bool:
    if value in _MINUS_INF:
        return True
    try:
        return float(value.rstrip("fFlL")) <= -1e30
    except ValueError:
        return False


def _exp_of(module: Module, node: ts.Node, m: str) -> tuple[str, str] | None:
    """``(exp, x)`` when ``node`` is ``EXP(x - m)``."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type != "call_expression":
        return None
    fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
    named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    if fn is None or text(module, fn) not in EXP_CALLS or len(named) != 1:
        return None
    arg = named[0]
    while arg.type == "parenthesized_expression" and arg.named_child_count == 1:
        arg = arg.named_children[0]
    op = arg.child_by_field_name("operator")
    left, right = arg.child_by_field_name("left"), arg.child_by_field_name("right")
    if arg.type != "binary_expression" or op is None or op.type != "-" or left is None or right is None:
        return None
    if _compact(module, right) != m:
        return None
    return text(module, fn), _compact(module, left)


def _value_of(module: Module, stmts: list[ts.Node], update: ts.Node, operand: ts.Node) -> ts.Node | None:
    """What the sum folds: the operand, or the value a local or an element stored before it holds."""
    want = _compact(module, operand)
    value: ts.Node | None = operand
    for s in stmts:
        if s.start_byte >= update.start_byte:
            break
        if s.type == "declaration":
            for d in s.named_children:
                dn, dv = d.child_by_field_name("declarator"), d.child_by_field_name("value")
                if d.type != "init_declarator" or dn is None or dv is None:
                    continue
                if text(module, dn) == want:
                    value = dv
        elif s.type == "expression_statement" and s.named_child_count == 1:
            a = s.named_children[0]
            left, right, op = (a.child_by_field_name(f) for f in ("left", "right", "operator"))
            if a.type != "assignment_expression" or op is None or left is None or right is None:
                continue
            if _compact(module, left) == want:
                value = right if op.type == "=" else None
    return value


def _only_counter_subscripts(module: Module, nodes: list[ts.Node], var: str) -> bool:
    for s in nodes:
        for n in walk(s):
            if n.type in ("for_statement", "while_statement", "do_statement", "call_expression"):
                fn = n.child_by_field_name("function")
                if n.type != "call_expression" or fn is None or text(module, fn) not in EXP_CALLS:
                    return False
            if n.type == "subscript_expression":
                idx = n.child_by_field_name("indices") or n.child_by_field_name("index")
                inner = "".join(text(module, idx).strip("[]").split()) if idx is not None else ""
                if inner != var:
                    return False
    return True


def _plain_value(module: Module, decl: ts.Node) -> bool:
    """A declaration whose values read no memory and call nothing but math (``1.f / s``)."""
    for n in walk(decl):
        if n.type in ("subscript_expression", "pointer_expression", "field_expression"):
            return False
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is None or text(module, fn).rstrip("f").lstrip("_") not in _MATH:
                return False
    return True


def _writes(module: Module, nodes: list[ts.Node], names: set[str]) -> bool:
    for s in nodes:
        for n in walk(s):
            if n.type in ("assignment_expression", "update_expression"):
                t = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if t is not None and _compact(module, t) in names:
                    return True
    return False


def _next_statement(node: ts.Node) -> ts.Node | None:
    n = node.next_named_sibling
    while n is not None and n.type == "comment":
        n = n.next_named_sibling
    return n


def _pair(module: Module, fn: Function, a: Reduction | None, b: Reduction) -> OnlinePair | str | None:
    if a is None or a.op not in ("max",) or b.op != "sum" or len(a.carried) != 1 or len(b.carried) != 1:
        return None
    m, s = a.name, b.name
    where = f"line {b.line}: the sum {s} after the max {m} (line {a.line})"
    ha, hb = _header(module, a.loop), _header(module, b.loop)
    if ha is None or hb is None or "".join(ha.split()) != "".join(hb.split()):
        return f"{where}: the two loops are not for loops over the same range (headers differ)"
    var = _counter(a.loop, module)
    if var is None:
        return f"{where}: the max loop declares no counter"
    ua, ub = a.updates, b.updates
    if len(ua) != 1 or len(ub) != 1 or ua[0].operand is None or ub[0].operand is None or ub[0].negated:
        return f"{where}: each loop must make one update (a max, then a sum)"
    if ua[0].statement.parent is None or ub[0].statement.parent is None:
        return None
    element = _compact(module, ua[0].operand)
    stmts_b = _statements(b.loop)
    top_b = ub[0].statement
    ids = {x.id for x in stmts_b}
    while top_b.parent is not None and top_b.id not in ids and top_b.parent.id != b.loop.id:
        top_b = top_b.parent
    if top_b.id not in ids:
        return f"{where}: the sum's update is nested in the loop's body"
    value = _value_of(module, stmts_b, top_b, ub[0].operand)
    exp = _exp_of(module, value, m) if value is not None else None
    if exp is None:
        return f"{where}: the sum's value is not exp(x - {m}) with x an element (expf, __expf, exp)"
    if exp[1] != element:
        return f"{where}: the sum reads {exp[1]}, the max read {element}; they must be the same element"
    fn_body = module.node(fn.body)
    dm = _declaration(module, fn_body, m, a.loop.start_byte)
    ds = _declaration(module, fn_body, s, b.loop.start_byte)
    if dm is None or not _is_minus_inf(dm[2]):
        return f"{where}: {m} must be declared starting at -INFINITY (or -FLT_MAX)"
    if ds is None or not _is_zero(ds[2]):
        return f"{where}: {s} must be declared starting at zero"
    # between the loops: s's declaration and row-owner's reduce of m only
    between: list[ts.Node] = []
    group = ""
    n = _next_statement(a.loop)
    while n is not None and n.id != b.loop.id:
        c = _ROW_REDUCE.match(_compact(module, n))
        if c is not None and c.group(1) == m == c.group(3) and c.group(4) == "max":
            group = c.group(2)
        elif n.id != ds[0].id:
            return f"line {n.start_point[0] + 1}: a statement between the max and the sum loops"
        between.append(n)
        n = _next_statement(n)
    if n is None:
        return None
    in_between = ds[0].id in {x.id for x in between}
    if ds[0].start_byte > a.loop.start_byte and not in_between:
        return f"{where}: {s} is declared inside the max loop"
    if in_between and len([d for d in ds[0].named_children if d.type == "init_declarator"]) != 1:
        return f"line {ds[0].start_point[0] + 1}: {s}'s declaration declares other names"
    after = _next_statement(b.loop)
    if after is not None:
        c = _ROW_REDUCE.match(_compact(module, after))
        if c is not None and c.group(1) == s == c.group(3) and c.group(4) == "sum" and c.group(2) == group:
            pass
        else:
            after = None
    if bool(group) != (after is not None):
        return f"{where}: only one of the two reductions is reduced across lanes"
    rest = [x for x in stmts_b if x.id != top_b.id]
    if _writes(module, rest, {m, s}):
        return f"{where}: the sum loop writes {m} or {s} outside the update"
    # declarations of values of m and s (``const float inv = 1.f / s;``) may sit before the loop
    pre: list[ts.Node] = []
    fused = _next_statement(after if after is not None else b.loop)
    while fused is not None and fused.type == "declaration" and _plain_value(module, fused):
        pre.append(fused)
        fused = _next_statement(fused)
    if fused is None or fused.type != "for_statement":
        fused = None
    else:
        hc = _header(module, fused)
        body_c = _statements(fused)
        if (
            hc is None
            or "".join(hc.split()) != "".join(ha.split())
            or reductions(module, fn, fused)
            or not _only_counter_subscripts(module, rest + body_c, var)
            or _writes(module, body_c, {m, s, var})
        ):
            fused = None
    if fused is None:
        pre = []
    return OnlinePair(
        a,
        b,
        m,
        s,
        dm[1].replace("const", "").strip(),
        element,
        exp[0],
        ha.strip(),
        tuple(between),
        group,
        after,
        tuple(rest),
        fused,
        tuple(pre),
    )


@dataclass(frozen=True)
class VariancePair:
    """A sum and the dependent sum of squared deviations one pass may compute (Welford)."""

    lead: Reduction
    """The sum (``m``) whose loop the fused pass runs, unchanged."""
    squares: Reduction
    """The sum of ``(x - c) * (x - c)`` (``v``) that the first loop's Welford triple replaces."""
    m: str
    v: str
    v_type: str
    """The declared type of ``v`` (the Welford triple's type)."""
    element: str
    """The element the second loop reads (``(float)x[i]``, as written), read again in the fused loop."""
    center: str
    """``c`` as written, the second loop's loop-invariant centre (``m`` after ``m = m / C``)."""
    header: str
    between: tuple[ts.Node, ...]
    """Statements between the loops, in order (``m``'s reduce and division, ``v``'s declaration)."""
    declaration: ts.Node | None
    """``v``'s declaration when it sits between the loops (it moves above the fused loop)."""
    group: str
    """Threads per row of row-owner's reduces around the pair (``''``: none)."""
    after: ts.Node | None
    """Row-owner's reduce of ``v`` right after the second loop, or None."""
    body: tuple[ts.Node, ...] = ()
    """The first loop's body, statement by statement (comments too): what the fused loop keeps."""

    @property
    def maximum(self) -> Reduction:  # the first loop's reduction, as OnlinePair names it
        return self.lead

    @property
    def total(self) -> Reduction:
        return self.squares

    @property
    def first(self) -> ts.Node:
        return self.lead.loop

    @property
    def line(self) -> int:
        return self.lead.loop.start_point[0] + 1

    @property
    def last(self) -> ts.Node:
        return self.after if self.after is not None else self.squares.loop


def _square_of(
    module: Module, stmts: list[ts.Node], update: ts.Node, operand: ts.Node
) -> tuple[str, str] | None:
    """``(x, c)`` when the folded value is ``(x - c) * (x - c)``, each factor written out or a local
    of the loop's body (``float xshift = x - c; v += xshift * xshift;``)."""
    node = operand
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if node.type != "binary_expression" or op is None or op.type != "*" or left is None or right is None:
        return None
    diffs: list[str] = []
    raw: tuple[str, str] | None = None
    for f in (left, right):
        v = _value_of(module, stmts, update, f) if f.type == "identifier" else f
        while v is not None and v.type == "parenthesized_expression" and v.named_child_count == 1:
            v = v.named_children[0]
        if v is None or v.type != "binary_expression":
            return None
        o, a, b = (v.child_by_field_name(k) for k in ("operator", "left", "right"))
        if o is None or o.type != "-" or a is None or b is None:
            return None
        diffs.append(f"{_compact(module, a)}\0{_compact(module, b)}")
        raw = raw or (text(module, a), text(module, b))
    if diffs[0] != diffs[1]:
        return None
    return raw


def _index(module: Module, sub: ts.Node) -> str | None:
    """The compact index text of a subscript, or None for anything else."""
    if sub.type != "subscript_expression":
        return None
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    return _compact(module, idx).strip("[]") if idx is not None else None


def _counter_offset(index: str, var: str) -> bool:
    """``j``, ``e + j`` or ``j + e`` with ``e`` free of ``j``: distinct iterations, distinct elements."""
    if index == var:
        return True
    for rest in (index[: -len(var) - 1] if index.endswith("+" + var) else None,
                 index[len(var) + 1 :] if index.startswith(var + "+") else None):  # fmt: skip
        if rest and not _mentions_any(rest, {var}):
            return True
    return False


def _mentions_any(expr: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", expr) for n in names)


def _variance_pair(module: Module, fn: Function, a: Reduction, b: Reduction) -> VariancePair | str | None:
    if a.op != "sum" or b.op != "sum" or len(a.carried) != 1 or len(b.carried) != 1:
        return None
    m, v = a.name, b.name
    where = f"line {b.line}: the sum of squares {v} after the sum {m} (line {a.line})"
    ha, hb = _header(module, a.loop), _header(module, b.loop)
    if ha is None or hb is None or not _same_header(ha, hb):
        return f"{where}: the two loops are not for loops over the same range (headers differ)"
    var = _counter(a.loop, module)
    if var is None:
        return f"{where}: the first loop declares no counter"
    ub = b.updates
    if len(ub) != 1 or ub[0].operand is None or ub[0].negated or ub[0].form not in ("+=", "="):
        return f"{where}: the second loop must make one update, v += (x - c) * (x - c)"
    stmts_b = _statements(b.loop)
    if ub[0].statement.parent is None or ub[0].statement.id not in {x.id for x in stmts_b}:
        return f"{where}: the update is nested in the loop's body"
    sq = _square_of(module, stmts_b, ub[0].statement, ub[0].operand)
    if sq is None:
        return f"{where}: the folded value is not (x - c) * (x - c) (through a local or written out)"
    element, center = sq
    others = [x for x in stmts_b if x.id != ub[0].statement.id]
    if any(x.type != "declaration" for x in others) or memory_writes(module, b.loop):
        return f"{where}: the second loop does more than fold (only its locals and the update may stay)"
    local = declared_names(module, b.loop)
    if _mentions_any(element, local - {var}) or _mentions_any(center, local | {var}):
        return f"{where}: x or c reads a local of the second loop, or c reads the counter"
    if _mentions_any(element, declared_names(module, a.loop) - {var}):
        return f"{where}: the first loop declares a name x reads ({element})"
    for node in walk(a.loop):
        if node.type in ("break_statement", "continue_statement", "return_statement", "goto_statement"):
            return f"line {node.start_point[0] + 1}: the first loop can leave an iteration early"
    written: dict[str, str] = {}
    for w in memory_writes(module, a.loop):
        t = w.child_by_field_name("left") or w.child_by_field_name("argument")
        arr = t.child_by_field_name("argument") if t is not None else None
        at = _index(module, t) if t is not None else None
        if (
            arr is None
            or at is None
            or not _counter_offset(at, var)
            or written.get(_compact(module, arr), at) != at
        ):
            return (
                f"line {w.start_point[0] + 1}: the first loop writes memory at an index other than {var}"
                " plus a value fixed over the loop (the second loop's reads may not be final)"
            )
        written[_compact(module, arr)] = at
    for node in walk(b.loop):
        if node.type == "subscript_expression":
            arr = node.child_by_field_name("argument")
            name = _compact(module, arr) if arr is not None else ""
            if name in written and _index(module, node) != written[name]:
                return (
                    f"line {node.start_point[0] + 1}: the second loop reads {name} at another index than"
                    f" the first loop writes it ({written[name]})"
                )
    fn_body = module.node(fn.body)
    dv = _declaration(module, fn_body, v, b.loop.start_byte)
    if dv is None or not _is_zero(dv[2]):
        return f"{where}: {v} must be declared starting at zero"
    between: list[ts.Node] = []
    group = ""
    n = _next_statement(a.loop)
    while n is not None and n.id != b.loop.id:
        c = _ROW_REDUCE.match(_compact(module, n))
        if c is not None and c.group(1) == m == c.group(3) and c.group(4) == "sum":
            group = c.group(2)
        elif n.id == dv[0].id:
            if len([d for d in n.named_children if d.type == "init_declarator"]) != 1:
                return f"line {n.start_point[0] + 1}: {v}'s declaration declares other names"
        elif n.type not in ("declaration", "expression_statement") or not _plain_value(module, n):
            return f"line {n.start_point[0] + 1}: a statement between the loops reads memory or calls"
        elif _writes(module, [n], {v}):
            return f"line {n.start_point[0] + 1}: {v} is written between the loops"
        between.append(n)
        n = _next_statement(n)
    if n is None:
        return None
    # the centre must come from the sum: m itself or a value the statements between compute from it
    derived = {m}
    for st in between:
        for node in walk(st):
            if node.type == "init_declarator" or node.type == "assignment_expression":
                left = node.child_by_field_name("declarator") or node.child_by_field_name("left")
                right = node.child_by_field_name("value") or node.child_by_field_name("right")
                if left is not None and right is not None and _mentions_any(text(module, right), derived):
                    derived.add(_compact(module, left))
    if not _mentions_any(center, derived):
        return f"{where}: the centre {center} is not computed from {m}"
    declaration = dv[0] if dv[0].id in {x.id for x in between} else None
    if dv[0].start_byte > a.loop.start_byte and declaration is None:
        return f"{where}: {v} is declared inside the first loop"
    after = _next_statement(b.loop)
    if after is not None:
        c = _ROW_REDUCE.match(_compact(module, after))
        if c is None or c.group(1) != v or c.group(3) != v or c.group(4) != "sum" or c.group(2) != group:
            after = None
    if bool(group) != (after is not None):
        return f"{where}: only one of the two sums is reduced across lanes"
    return VariancePair(
        a,
        b,
        m,
        v,
        dv[1].replace("const", "").strip(),
        element,
        center,
        ha.strip(),
        tuple(between),
        declaration,
        group,
        after,
        tuple(_body(a.loop)),
    )


def _body(loop: ts.Node) -> list[ts.Node]:
    """A loop's body statements, comments included (a body that is one statement: itself)."""
    body = loop.child_by_field_name("body")
    if body is None:
        return []
    return list(body.named_children) if body.type == "compound_statement" else [body]


def online_pairs(
    module: Module, fn: Function
) -> tuple[tuple[OnlinePair | VariancePair, ...], tuple[str, ...]]:
    """The fusable (max, sum-of-exp) and (sum, sum of squared deviations) pairs of ``fn``, and
    why each other dependent pair is not."""
    pairs: list[OnlinePair | VariancePair] = []
    why: list[str] = []
    found = reductions(module, fn)
    for r in found:
        if r.op == "sum" and r.depends_on is not None and r.depends_on.op == "sum":
            q = _variance_pair(module, fn, r.depends_on, r)
            if isinstance(q, VariancePair):
                pairs.append(q)
            elif isinstance(q, str):
                why.append(q)
            continue
        if r.op == "sum" and r.depends_on is None:
            # a centre computed between the loops (``const float mu = m / C;``) hides the
            # dependence from the recogniser: the nearest earlier sum stands in, and only a pair
            # whose centre reads it counts (a refusal here would be about independent sums)
            sums = [e for e in found if e.op == "sum" and e.loop.end_byte <= r.loop.start_byte]
            q = _variance_pair(module, fn, sums[-1], r) if sums else None
            if isinstance(q, VariancePair):
                pairs.append(q)
                continue
        # the recogniser sees the dependence through locals; a value stored and read back
        # (``o[j] = expf(x[j] - m); s += o[j];``) hides it, so the nearest earlier max stands in
        earlier = [e for e in found if e.op == "max" and e.loop.end_byte <= r.loop.start_byte]
        a = r.depends_on or (earlier[-1] if earlier and r.op == "sum" else None)
        p = _pair(module, fn, a, r)
        if isinstance(p, OnlinePair):
            pairs.append(p)
        elif isinstance(p, str):
            why.append(p)
    return tuple(pairs), tuple(why)
