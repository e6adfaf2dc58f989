"""Reductions: which variables a loop folds values into, with which operator, and how.

Four passes used to recognise reductions each on its own (vectorize, row-owner, cluster-rows,
warp-reduce), and they disagreed: one accepted ``s += s * x`` as a sum, one accepted
``acc = fmaxf(x, y)`` (no ``acc`` in it) as a max, none knew an argmax. This module is the one
recogniser. It answers at two levels:

* :func:`update_of` -- is this one write a reduction *update* of ``name``? The forms, each
  with ``name`` absent from the folded value ``e``:

  - ``s += e``, ``s -= e``, ``s = s + e``, ``s = e + s``, ``s = s - e``, ``++s``, ``s--``: a sum;
  - ``s *= e``, ``s = s * e``: a product; ``|``, ``&``, ``^`` (compound or spelled out) likewise;
  - ``m = fmaxf(m, e)`` (``fmax``, ``max``, ``__hmax``, min alike, either argument order): a max
    or a min, with the function recorded (a pass that emits the combine reuses it);
  - ``if (e > m) m = e;`` (``<``, ``>=``, ``<=``, either side, braces allowed, no ``else``):
    a max or a min whose update is the whole ``if``;
  - ``if (v > best) { best = v; idx = i; }``: an argmax (``argmin`` for ``<``) over the group
    ``(best, idx)``; the companions' values may not read the group.

  Syntax alone: ``float d = x - s; s += d;`` passes here and is caught a level up.

* :func:`reductions` -- the loops of a function and the variables each one carries (written in
  the body, declared outside it, not the loop's own counter) that are reductions over that
  loop: every write of the variable is an update with one operator, and nothing in the loop
  reads the variable outside its updates (a running value read elsewhere would change under any
  reordering). Two groups span several variables: argmax (above) and Welford's online mean and
  variance (``n += 1; d = x - mean; mean += d / n; m2 += d * (x - mean);``). A variable whose
  update reads another carried one (the online softmax's rescaled sum reading its running max)
  is coupled and no reduction. A reduction whose values read the result of an earlier loop's
  reduction (``sum += expf(x[i] - maxval)`` after the loop that found ``maxval``) records it
  as :attr:`Reduction.depends_on`.

Results are cached per :class:`ktx.ir.Module` (a module is never edited in place: each pass
gets a fresh one, so the cache never goes stale).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import tree_sitter as ts
from ktx.ir.facts.assign import assigned, written_name
from ktx.ir.nodes import Function
from ktx.ir.source import Span
from ktx.ir.syntax import text, walk

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts

__all__ = [
    "MAX_CALLS",
    "MIN_CALLS",
    "ORDER_FREE",
    "Carried",
    "Operator",
    "Reduction",
    "TreeReduction",
    "Update",
    "coupled",
    "halving_variable",
    "loop_variable",
    "reads_outside",
    "reduction_of",
    "reductions",
    "synchronises",
    "tree_reduction",
    "tree_reductions",
    "unreorderable",
    "update_in",
    "update_of",
]

Operator = Literal["sum", "product", "max", "min", "or", "and", "xor", "argmax", "argmin", "welford"]

#: Two-argument calls that fold a maximum or a minimum.
MAX_CALLS = frozenset({"fmaxf", "fmax", "max", "__hmax", "std::max", "::max"})
MIN_CALLS = frozenset({"fminf", "fmin", "min", "__hmin", "std::min", "::min"})

_COMPOUND: dict[str, Operator] = {
    "+=": "sum",
    "-=": "sum",
    "*=": "product",
    "|=": "or",
    "&=": "and",
    "^=": "xor",
}
_BINARY: dict[str, Operator] = {"+": "sum", "-": "sum", "*": "product", "|": "or", "&": "and", "^": "xor"}
#: ``e OP m`` in a guard: which extremum assigning ``m = e`` under it keeps.
_GUARD_VALUE_LEFT: dict[str, Operator] = {">": "max", ">=": "max", "<": "min", "<=": "min"}
_GUARD_VALUE_RIGHT: dict[str, Operator] = {"<": "max", "<=": "max", ">": "min", ">=": "min"}
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


@dataclass(frozen=True)
class Update:
    """One write that folds a value into a carried variable.

    ``statement`` is what a pass treats as the update: the expression statement, or the whole
    ``if`` of a guarded extremum or argmax (its condition reads the running value, legitimately).
    """

    name: str
    op: Operator
    node: ts.Node
    """The ``assignment_expression`` or ``update_expression``."""
    statement: ts.Node
    operand: ts.Node | None
    """The folded value ``e``; None for ``++s``/``s--``."""
    call: str = ""
    """The function of ``m = fmaxf(m, e)`` (``fmaxf``); ``''`` for every other form."""
    negated: bool = False
    """``s -= e`` or ``s = s - e``: a sum of ``-e``. Fine for a loop over elements; not for a
    tree whose ``e`` is another partial (``a[t] -= a[t + s]`` is no reduction)."""
    group: tuple[str, ...] = ()
    """For an argmax: the variables the guarded block assigns, the compared value first."""

    @property
    def form(self) -> str:
        """The operator as written: ``+=``, ``=``, ``++``, ``if`` (guarded)."""
        if self.statement.type == "if_statement":
            return "if"
        if self.node.type == "update_expression":
            return "++" if "++" in _parsed_text(self.node) else "--"
        op = self.node.child_by_field_name("operator")
        return op.type if op is not None else "="

    @property
    def line(self) -> int:
        return self.node.start_point[0] + 1


@dataclass(frozen=True)
class Reduction:
    """Variables a loop folds values into, the operator, and where."""

    carried: tuple[str, ...]
    """``(s,)``; ``(best, idx)`` for an argmax; ``(mean, m2, count)`` for Welford."""
    op: Operator
    updates: tuple[Update, ...]
    """Every update of every carried variable, in source order."""
    loop: ts.Node
    """The loop statement the reduction runs over."""
    scope: Span
    """The loop's span (stable across parses of the same bytes; ``loop`` is this parse's node)."""
    call: str = ""
    """The max/min function all updates use, or ``''``."""
    depends_on: Reduction | None = None
    """An earlier loop's reduction whose result this one's values read (softmax's max, then
    the sum of ``exp(x - max)``)."""

    @property
    def name(self) -> str:
        return self.carried[0]

    @property
    def line(self) -> int:
        return min(u.line for u in self.updates)

    def describe(self) -> str:
        """One line for ``ktx inspect --facts`` and refusals."""
        d = self.depends_on
        dep = f" after {d.op} {d.name} (line {d.line})" if d is not None else ""
        return (
            f"{self.op} {', '.join(self.carried)} over the loop at line {self.loop.start_point[0] + 1}"
            f" (line {self.line}){dep}"
        )


# -- one update -------------------------------------------------------------------------------


def _parsed_text(node: ts.Node) -> str:
    """The parser's text of ``node`` (names and operators; enough for ``++``)."""
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def _compact(module: Module, node: ts.Node) -> str:
    return "".join(text(module, node).split())


def _strip(node: ts.Node) -> ts.Node:
    while node.type in ("parenthesized_expression", "condition_clause"):
        inner = [c for c in node.named_children if c.type != "comment"]
        if len(inner) != 1:
            break
        node = inner[0]
    return node


def _is(module: Module, node: ts.Node, name: str) -> bool:
    """Whether ``node`` is exactly ``name`` (an identifier or any lvalue, spacing aside)."""
    return _compact(module, _strip(node)) == "".join(name.split())


def _mentions(module: Module, node: ts.Node, name: str) -> bool:
    """Whether ``name`` (an identifier or an lvalue such as ``a[t]``) occurs under ``node``."""
    if name.isidentifier():
        return any(n.type == "identifier" and text(module, n) == name for n in walk(node))
    want = "".join(name.split())
    return any(_compact(module, n) == want for n in walk(node) if n.is_named)


def _target_text(module: Module, node: ts.Node) -> str | None:
    name = written_name(module, node)
    if name is not None:
        return name
    t = node.child_by_field_name("left") or node.child_by_field_name("argument")
    return _compact(module, _strip(t)) if t is not None else None


def update_of(module: Module, node: ts.Node, name: str | None = None) -> Update | None:
    """The reduction update that ``node`` (an assignment or ``++``/``--``) makes, or None.

    ``name`` is the carried variable (default: the one ``node`` writes); it may be an lvalue
    such as ``sdata[tid]`` for a tree reduction over shared memory. The value's result must not
    be used (the write is a statement of its own).

    >>> from ktx.ir import parse
    >>> m = parse("__global__ void k(float* x) { float s = 0, t = 0; s += x[0]; t += t * x[1]; }")
    >>> ws = [n for n in walk(m.tree.root_node) if n.type == "assignment_expression"]
    >>> [(u.op, u.form) if (u := update_of(m, w)) else None for w in ws]
    [('sum', '+='), None]
    """
    if node.type not in ("assignment_expression", "update_expression"):
        return None
    if name is None:
        name = _target_text(module, node)
        if name is None:
            return None
    target = node.child_by_field_name("left") or node.child_by_field_name("argument")
    stmt = node.parent
    if target is None or not _is(module, target, name) or stmt is None or stmt.type != "expression_statement":
        return None
    if node.type == "update_expression":
        return Update(name, "sum", node, stmt, None, negated="--" in _parsed_text(node))
    op = node.child_by_field_name("operator")
    right = node.child_by_field_name("right")
    if op is None or right is None:
        return None
    if op.type in _COMPOUND:
        if _mentions(module, right, name):
            return None
        return Update(name, _COMPOUND[op.type], node, stmt, right, negated=op.type == "-=")
    if op.type != "=":
        return None
    r = _strip(right)
    if r.type == "binary_expression":
        bop = r.child_by_field_name("operator")
        a, b = r.child_by_field_name("left"), r.child_by_field_name("right")
        if bop is not None and a is not None and b is not None and bop.type in _BINARY:
            pairs = ((a, b),) if bop.type == "-" else ((a, b), (b, a))
            for mine, other in pairs:
                if _is(module, mine, name) and not _mentions(module, other, name):
                    return Update(name, _BINARY[bop.type], node, stmt, other, negated=bop.type == "-")
    if r.type == "call_expression":
        fn = r.child_by_field_name("function")
        args = r.child_by_field_name("arguments")
        named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        fname = _compact(module, fn) if fn is not None else ""
        if (fname in MAX_CALLS or fname in MIN_CALLS) and len(named) == 2:
            kind: Operator = "max" if fname in MAX_CALLS else "min"
            for mine, other in ((named[0], named[1]), (named[1], named[0])):
                if _is(module, mine, name) and not _mentions(module, other, name):
                    return Update(name, kind, node, stmt, other, call=fname)
    return _guarded(module, node, stmt, right, name)


def update_in(module: Module, statement: ts.Node, name: str | None = None) -> Update | None:
    """The update that ``statement`` makes when it is one write (braces around it allowed).

    ``{ sdata[tid] += sdata[tid + s]; }`` gives the sum of ``sdata[tid]`` (``name`` defaults to
    what the write targets, spacing removed).
    """
    stmts = [statement]
    while len(stmts) == 1 and stmts[0].type == "compound_statement":
        stmts = [c for c in stmts[0].named_children if c.type != "comment"]
    if len(stmts) != 1 or stmts[0].type != "expression_statement" or stmts[0].named_child_count != 1:
        return None
    return update_of(module, stmts[0].named_children[0], name)


def _guarded(module: Module, node: ts.Node, stmt: ts.Node, right: ts.Node, name: str) -> Update | None:
    """``if (e > m) m = e;`` (a max or min) or ``if (v > best) { best = v; idx = i; }`` (argmax)."""
    holder = stmt.parent
    block: list[ts.Node] = [stmt]
    if holder is not None and holder.type == "compound_statement":
        block = [c for c in holder.named_children if c.type != "comment"]
        holder = holder.parent
    if holder is None or holder.type != "if_statement" or holder.child_by_field_name("alternative"):
        return None
    cond = holder.child_by_field_name("condition")
    c = _strip(cond) if cond is not None else None
    if c is None or c.type != "binary_expression":
        return None
    cop = c.child_by_field_name("operator")
    a, b = c.child_by_field_name("left"), c.child_by_field_name("right")
    if cop is None or a is None or b is None or cop.type not in _GUARD_VALUE_LEFT:
        return None
    # the block's writes: plain `x = e;` statements only
    writes: list[tuple[str, ts.Node, ts.Node]] = []
    for s in block:
        inner = s.named_children[0] if s.type == "expression_statement" and s.named_child_count == 1 else None
        if inner is None or inner.type != "assignment_expression":
            return None
        iop, ileft, iright = (inner.child_by_field_name(f) for f in ("operator", "left", "right"))
        if iop is None or iop.type != "=" or ileft is None or iright is None:
            return None
        writes.append((_compact(module, _strip(ileft)), inner, iright))
    # which write is the compared running value: `m = e` under `e > m` (or `m < e`)
    at, bt = _compact(module, a), _compact(module, b)
    kind: Operator | None = None
    value: tuple[str, ts.Node, ts.Node] | None = None
    for w in writes:
        wt, _, wr = w
        e = _compact(module, wr)
        if at == e and bt == wt:
            kind, value = _GUARD_VALUE_LEFT[cop.type], w
        elif at == wt and bt == e:
            kind, value = _GUARD_VALUE_RIGHT[cop.type], w
        if value is not None:
            break
    if kind is None or value is None:
        return None
    group = (value[0], *(w[0] for w in writes if w is not value))
    if len(set(group)) != len(group):
        return None
    # no value in the block may read the group (`if (x > m) m = m + x` is no extremum)
    for _, _, wr in writes:
        if any(_mentions(module, wr, g) for g in group):
            return None
    if len(writes) > 1:
        kind = "argmax" if kind == "max" else "argmin"
    return Update(name, kind, node, holder, right, group=group)


# -- a loop's reductions ---------------------------------------------------------------------


def reads_outside(module: Module, body: ts.Node, name: str, owned: list[ts.Node]) -> ts.Node | None:
    """The first read of ``name`` in ``body`` that no node of ``owned`` holds, or None.

    A reduction's running value may be read only by its own updates: under any reordering of
    the iterations (packs, lanes), a read elsewhere would see another partial value.
    """
    spans = [(o.start_byte, o.end_byte) for o in owned]
    for n in walk(body):
        if (
            n.type == "identifier"
            and text(module, n) == name
            and not any(a <= n.start_byte < b for a, b in spans)
        ):
            return n
    return None


#: Operators whose result does not depend on the order the elements arrive in (floating-point
#: rounding aside): a loop over them may be split across packs or lanes.
ORDER_FREE: frozenset[Operator] = frozenset({"sum", "product", "max", "min", "or", "and", "xor"})


@dataclass(frozen=True)
class Carried:
    """A variable that keeps a loop's iterations in order, and where."""

    name: str
    problem: Literal["not-a-reduction", "read-outside"]
    """``not-a-reduction``: a write that is no order-free update (``node`` is the write);
    ``read-outside``: a running reduction read outside its updates (``node`` is the read)."""
    node: ts.Node

    @property
    def line(self) -> int:
        return self.node.start_point[0] + 1


def unreorderable(module: Module, body: ts.Node, local: set[str], sequential: bool = False) -> Carried | None:
    """The first variable that stops ``body``'s iterations from being regrouped, or None.

    Every variable written in ``body`` and not in ``local`` (the names the loop declares) must
    be updated only by order-free reduction updates (:data:`ORDER_FREE`, an argmax's group only
    when ``sequential``: under packs, ties would pick another index). Unless the loop is one
    thread's own (``sequential``: packs keep its order), the running value may be read only by
    its updates (``o[i] = m`` after ``if (x[i] > m) m = x[i]`` would see other partial values).
    Variables are checked in the order of their first write; this is what ``vectorize`` asks
    before packing a loop.
    """
    ops = ORDER_FREE | ({"argmax", "argmin"} if sequential else set())
    for name, writes in assigned(module, body).items():
        if name in local:
            continue
        owned: list[ts.Node] = []
        for w in writes:
            update = update_of(module, w, name)
            if update is None or update.op not in ops:
                return Carried(name, "not-a-reduction", w)
            owned.append(update.statement)
        if sequential:
            continue
        read = reads_outside(module, body, name, owned)
        if read is not None:
            return Carried(name, "read-outside", read)
    return None


def coupled(
    module: Module, body: ts.Node, written: dict[str, list[ts.Node]], local: set[str]
) -> tuple[str, str, ts.Node] | None:
    """``(a, b, where)`` when the update of carried ``a`` reads carried ``b``, or None.

    Read directly, through a local of the body initialised from ``b`` (``float prev = m;``), or
    under a condition on ``b`` (``if (x > m) s = ...``). Carried: the names of ``written`` not
    in ``local``. Such a pair (the online softmax's running max and rescaled sum) is no pair of
    independent reductions.
    """
    carried = {n for n in written if n not in local}
    copies = {name: _names(module, value) & carried for name, value in _local_values(module, body)}
    for name in sorted(carried):
        for node in written[name]:
            seen = _names(module, node)
            holder = node.parent
            while holder is not None and holder.id != body.id:
                if holder.type == "if_statement":
                    cond = holder.child_by_field_name("condition")
                    if cond is not None:
                        seen |= _names(module, cond)
                holder = holder.parent
            reads = set(seen & carried)
            for n in seen & set(copies):
                reads |= copies[n]
            others = sorted(reads - {name})
            if others:
                return name, others[0], node
    return None


def _names(module: Module, node: ts.Node) -> set[str]:
    return {text(module, n) for n in walk(node) if n.type == "identifier"}


def _declarators(node: ts.Node) -> Iterator[tuple[ts.Node, ts.Node | None]]:
    """(identifier, initial value or None) of every local that ``node`` declares."""
    for n in walk(node):
        if n.type not in ("declaration", "for_range_loop"):
            continue
        for decl in n.children_by_field_name("declarator"):
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            ident: ts.Node | None = decl
            while ident is not None and ident.type != "identifier":
                ident = ident.child_by_field_name("declarator")
            if ident is not None:
                yield ident, value


def _declared(module: Module, node: ts.Node) -> set[str]:
    """Names declared under ``node`` (locals of a loop body, counters of nested loops)."""
    return {text(module, ident) for ident, _ in _declarators(node)}


def _local_values(module: Module, node: ts.Node) -> list[tuple[str, ts.Node]]:
    """``(name, initialiser)`` of the locals declared under ``node`` with ``T name = value``."""
    return [(text(module, ident), value) for ident, value in _declarators(node) if value is not None]


def _loop_body(loop: ts.Node) -> ts.Node | None:
    return loop.child_by_field_name("body")


def _loop_own(module: Module, loop: ts.Node) -> set[str]:
    """Names the loop header declares, steps or tests (its counters): never reductions over it.

    ``int i = 0; while (i < n) { ...; i++; }``: ``i`` is the counter, and an update that reads
    it (``s += x[i]``) reads the iteration, not another running value.
    """
    own: set[str] = set()
    cond = loop.child_by_field_name("condition")
    if cond is not None:
        own |= _names(module, cond)
    for field in ("initializer", "update", "left", "declarator"):
        part = loop.child_by_field_name(field)
        if part is None:
            continue
        own |= set(assigned(module, part))
        if part.type == "declaration":
            own |= _declared(module, part)
        elif part.type == "identifier":
            own.add(text(module, part))
    return own


def _loop_reductions(module: Module, loop: ts.Node) -> list[Reduction]:
    body = _loop_body(loop)
    if body is None:
        return []
    local = _declared(module, body) | _loop_own(module, loop)
    written = {k: v for k, v in assigned(module, body).items() if k not in local}
    if not written:
        return []
    updates: dict[str, list[Update]] = {}
    for name, nodes in written.items():
        maybe = [update_of(module, n, name) for n in nodes]
        sure = [u for u in maybe if u is not None]
        if len(sure) == len(maybe):
            updates[name] = sure
    scope = module.span(loop.start_byte, loop.end_byte)
    found: list[Reduction] = []
    taken: set[str] = set()
    welford = _welford(module, body, written, updates)
    if welford is not None:
        carried, folds = welford
        found.append(Reduction(carried, "welford", folds, loop, scope))
        taken |= set(carried)
    for name in sorted(updates, key=lambda k: written[k][0].start_byte):
        if name in taken:
            continue
        ups = updates[name]
        members: list[Update] = ups
        ops = {u.op for u in ups}
        if len(ops) != 1:
            continue
        op = ops.pop()
        group = ups[0].group or (name,)
        if op in ("argmax", "argmin"):
            if group[0] != name or any(u.group != group for u in ups):
                continue
            members = [u for g in group for u in updates.get(g, [])]
            if any(g not in updates or any(u.group != group for u in updates[g]) for g in group):
                continue
        statements = [u.statement for u in members]
        if any(reads_outside(module, body, g, statements) is not None for g in group):
            continue
        if _reads_carried(module, body, members, set(written) - set(group)):
            continue
        calls = {u.call for u in members if u.op in ("max", "min")}
        order = tuple(sorted(members, key=lambda u: u.node.start_byte))
        found.append(
            Reduction(group, op, order, loop, scope, call=calls.pop() if len(calls) == 1 else "")
        )
        taken |= set(group)
    return found


def _reads_carried(module: Module, body: ts.Node, members: list[Update], others: set[str]) -> bool:
    """Whether the updates read another variable the loop carries (a coupled pair).

    Read in the update, under a condition around it, or through a local of the body initialised
    from it (``float prev = m;``).
    """
    copies = {name: _names(module, value) for name, value in _local_values(module, body)}
    for u in members:
        seen = _names(module, u.statement)
        holder = u.statement.parent
        while holder is not None and holder.id != body.id:
            if holder.type == "if_statement":
                cond = holder.child_by_field_name("condition")
                if cond is not None:
                    seen |= _names(module, cond)
            holder = holder.parent
        for n in seen & set(copies):
            seen |= copies[n]
        if seen & others:
            return True
    return False


def _welford(
    module: Module,
    body: ts.Node,
    written: dict[str, list[ts.Node]],
    updates: dict[str, list[Update]],
) -> tuple[tuple[str, str, str], tuple[Update, ...]] | None:
    """``(mean, m2, count)`` and their updates, when the loop is Welford's online variance.

    ``count`` grows by one (``++n``, ``n += 1``); ``mean`` gains a quotient by ``count`` that
    reads ``mean`` (directly or through a local: ``d = x - mean; mean += d / n``); ``m2`` gains
    a product that reads ``mean``. Each is updated once, ``count`` first, then ``mean``, then
    ``m2``; nothing else reads them.
    """
    singles = {k: v[0] for k, v in updates.items() if len(v) == 1 and v[0].op == "sum" and not v[0].negated}
    feeds = {n: _names(module, value) for n, value in _local_values(module, body)}

    def reads(node: ts.Node) -> set[str]:
        names = _names(module, node)
        for n in list(names):
            names |= feeds.get(n, set())
        return names

    counts = [
        k
        for k, u in singles.items()
        if u.operand is None or _compact(module, u.operand) in ("1", "1.f", "1.0f", "1.0", "1u")
    ]
    for count in counts:
        for mean, mu in singles.items():
            if mean == count or mu.operand is None:
                continue
            q = _strip(mu.operand)
            qop = q.child_by_field_name("operator") if q.type == "binary_expression" else None
            den = q.child_by_field_name("right") if qop is not None and qop.type == "/" else None
            if den is None or count not in _names(module, den) or mean not in reads(q):
                continue
            for m2, vu in singles.items():
                if m2 in (count, mean) or vu.operand is None:
                    continue
                p = _strip(vu.operand)
                pop = p.child_by_field_name("operator") if p.type == "binary_expression" else None
                if pop is None or pop.type != "*" or mean not in reads(p):
                    continue
                c, mn, v2 = singles[count], mu, vu
                if not (c.node.start_byte < mn.node.start_byte < v2.node.start_byte):
                    continue
                group = {count, mean, m2}
                if set(written) - group - set(updates):
                    return None  # another carried value the loop does not fold: no clean group
                if _welford_reads_ok(module, body, (c, mn, v2), {n for n, _ in _local_values(module, body)}):
                    return (mean, m2, count), (c, mn, v2)
    return None


def _welford_reads_ok(
    module: Module, body: ts.Node, ups: tuple[Update, Update, Update], locals_: set[str]
) -> bool:
    """The group's variables are read only by its updates and by the locals that feed them."""
    c, mn, v2 = ups
    owned = [c.statement, mn.statement, v2.statement]
    owned += [
        d for d in walk(body) if d.type == "declaration" and _names(module, d) & locals_
    ]
    return all(reads_outside(module, body, u.name, owned) is None for u in ups)


# -- per function, cached --------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[Module, dict[tuple[str, int], tuple[Reduction, ...]]] = (
    weakref.WeakKeyDictionary()
)


def _loops(node: ts.Node) -> Iterator[ts.Node]:
    for n in walk(node):
        if n.type in _LOOPS:
            yield n


def _function_reductions(module: Module, fn: Function) -> tuple[Reduction, ...]:
    body = module.node(fn.body)
    found: list[Reduction] = []
    for loop in _loops(body):
        found.extend(_loop_reductions(module, loop))
    # dependent pairs: a reduction whose values read an earlier loop's result
    out: list[Reduction] = []
    for r in found:
        dep: Reduction | None = None
        reads: set[str] = set()
        for u in r.updates:
            if u.operand is not None:
                reads |= _names(module, u.operand)
        loop_body = _loop_body(r.loop)
        if loop_body is not None:
            for n, value in _local_values(module, loop_body):
                if n in reads:
                    reads |= _names(module, value)
        for earlier in out:
            before = earlier.loop.end_byte <= r.loop.start_byte
            if before and set(earlier.carried) & reads:
                dep = earlier
        out.append(r if dep is None else _with_dependency(r, dep))
    return tuple(out)


def _with_dependency(r: Reduction, dep: Reduction) -> Reduction:
    return Reduction(r.carried, r.op, r.updates, r.loop, r.scope, r.call, dep)


def reductions(
    module: Module, fn: Function | str, scope: ts.Node | Span | None = None
) -> tuple[Reduction, ...]:
    """The reductions of ``fn``'s loops, in source order; with ``scope``, those under it (their
    loop inside it, or ``scope`` the loop's body).

    >>> from ktx.ir import parse
    >>> m = parse('''__global__ void k(const float* x, float* o, int n) {
    ...   float mx = -1e30f, s = 0.f;
    ...   for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    ...   for (int i = 0; i < n; i++) s += expf(x[i] - mx);
    ...   o[0] = s;
    ... }''')
    >>> for r in reductions(m, "k"):
    ...     print(r.describe())
    max mx over the loop at line 3 (line 3)
    sum s over the loop at line 4 (line 4) after max mx (line 3)
    """
    function = fn if isinstance(fn, Function) else _function(module, fn)
    per = _CACHE.setdefault(module, {})
    key = (function.name, function.body.start)
    if key not in per:
        per[key] = _function_reductions(module, function)
    found = per[key]
    if scope is None:
        return found
    a, b = (scope.start, scope.end) if isinstance(scope, Span) else (scope.start_byte, scope.end_byte)
    return tuple(r for r in found if _under(r, a, b))


def _under(r: Reduction, a: int, b: int) -> bool:
    """Whether ``r`` runs under the byte range ``[a, b)``: its loop lies inside it, or the range
    is exactly the loop's body (a pass holding the body asks about its loop)."""
    if a <= r.loop.start_byte and r.loop.end_byte <= b:
        return True
    body = _loop_body(r.loop)
    return body is not None and body.start_byte == a and body.end_byte == b


def reduction_of(module: Module, fn: Function | str, loop: ts.Node | Span, name: str) -> Reduction | None:
    """The reduction over exactly ``loop`` that carries ``name``, or None."""
    a, b = (loop.start, loop.end) if isinstance(loop, Span) else (loop.start_byte, loop.end_byte)
    for r in reductions(module, fn, loop):
        if r.loop.start_byte == a and r.loop.end_byte == b and name in r.carried:
            return r
    return None


def _function(module: Module, name: str) -> Function:
    for f in module.functions:
        if f.name == name:
            return f
    names = ", ".join(f.name for f in module.functions) or "none"
    raise KeyError(f"no function {name!r} in {module.path or 'the module'} (its functions: {names})")


# -- shared-memory tree reductions ---------------------------------------------------------------


@dataclass(frozen=True)
class TreeReduction:
    """A loop that reduces a ``__shared__`` array in place, the block synchronised every step::

        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
          if (tid < s) buf[tid] += buf[tid + s];
          __syncthreads();
        }

    Not a :class:`Reduction`: nothing is carried in a variable; the array is the accumulator
    and each step combines two of its elements. ``var`` is the stride when it halves each step
    (``s >>= 1``, ``s /= 2``, ``s = s >> 1``, ``s = s / 2``) and None otherwise (interleaved
    addressing, ``s *= 2``): a tree all the same, but not the textbook form that
    ``warp-reduce`` rewrites. Whether the rewrite applies is that pass's finer question.
    """

    loop: ts.Node
    arrays: tuple[str, ...]
    """The shared arrays combined (written by an assignment that subscripts them)."""
    var: str | None

    @property
    def halving(self) -> bool:
        return self.var is not None


def loop_variable(module: Module, loop: ts.Node) -> str | None:
    """The one variable a ``for`` loop declares in its initialiser (``for (int s = ...; ...)``)."""
    init = loop.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return None
    decls = init.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    ident = decls[0].child_by_field_name("declarator")
    return text(module, ident) if ident is not None and ident.type == "identifier" else None


def halving_variable(module: Module, loop: ts.Node) -> str | None:
    """The loop variable of ``loop`` when its update halves it, else None."""
    var = loop_variable(module, loop)
    update = loop.child_by_field_name("update")
    if var is None or update is None:
        return None
    step = "".join(text(module, update).split())
    return var if step in (f"{var}>>=1", f"{var}/=2", f"{var}={var}>>1", f"{var}={var}/2") else None


def synchronises(module: Module, node: ts.Node) -> bool:
    """Whether ``node`` calls ``__syncthreads()``."""
    for n in walk(node):
        if n.type == "call_expression":
            callee = n.child_by_field_name("function")
            if callee is not None and text(module, callee) == "__syncthreads":
                return True
    return False


def tree_reduction(module: Module, loop: ts.Node, shared: frozenset[str]) -> TreeReduction | None:
    """``loop`` as a shared-memory tree reduction over one of the arrays ``shared``, or None.

    A ``for`` loop whose body calls ``__syncthreads()`` and assigns to an element of a shared
    array a value that reads another element of it (``buf[t] += buf[t + s]``, ``buf[t] =
    fmaxf(buf[t], buf[t + s])``): two elements combined, the result kept in the array.
    """
    body = loop.child_by_field_name("body")
    if loop.type != "for_statement" or body is None or not synchronises(module, body):
        return None
    combined: list[str] = []
    for n in walk(body):
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if n.type != "assignment_expression" or left is None or right is None:
            continue
        array = left.child_by_field_name("argument") if left.type == "subscript_expression" else None
        name = text(module, array) if array is not None else ""
        reads = (s.child_by_field_name("argument") for s in walk(right) if s.type == "subscript_expression")
        if name in shared and any(r is not None and text(module, r) == name for r in reads):
            combined.append(name)
    if not combined:
        return None
    return TreeReduction(loop, tuple(dict.fromkeys(combined)), halving_variable(module, loop))


def tree_reductions(module: Module, fn: Function) -> tuple[TreeReduction, ...]:
    """The shared-memory tree reductions among ``fn``'s loops, in source order."""
    shared = frozenset(a.name for a in module.shared_arrays if a.function in (None, fn.name))
    body = module.node(fn.body)
    found = (tree_reduction(module, n, shared) for n in walk(body) if n.type == "for_statement")
    return tuple(t for t in found if t is not None)
