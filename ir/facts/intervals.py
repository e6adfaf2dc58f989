"""Interval and exact evaluation of a kernel's integer expressions at one launch.

The bounds check (:mod:`ktx.ir.facts.extents`) first asks what range an index can take:
intervals, sound over-approximations; what cannot be bounded raises :class:`Unknown`. An index
whose range leaves its buffer is then run on concrete threads (:mod:`ktx.ir.facts.lanes`, the
same rules with nothing widened) to look for a witness: a bound alone is not an error.

How a range is found:

* an access's index is an :class:`~ktx.ir.affine.Affine`; each symbol takes an interval:
  ``threadIdx.x`` in ``[0, block.x - 1]``, ``blockIdx.x`` in ``[0, grid.x - 1]``,
  ``blockDim``/``gridDim`` the launch's values, scalar parameters and template value
  parameters their values, and a loop variable the range of the innermost enclosing loop that
  steps it (``[start, bound - 1]`` for an ascending loop, whatever its stride);
* opaque parts (``i / half``, ``i % half``, ``min(a, b)``) are evaluated on their C text with
  interval division and modulo;
* guards tighten the range: inside ``if (i < n)`` (or after ``if (i >= n) return;``), an index
  ``c * i + rest`` reaches at most ``c * (n - 1) + max(rest)``.
* comparisons, ``&&``/``||``/``!`` give 0, 1 or either; a decided ``?:`` takes its branch.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import tree_sitter as ts
from ktx.ir.affine import Affine, KernelIndex, LoopShape, MemRef
from ktx.ir.consteval import SIZEOF, int_literal
from ktx.ir.language import parse_tree
from ktx.ir.module import Module
from ktx.ir.syntax import text as node_text
from ktx.ir.syntax import walk

LOOPS = ("for_statement", "while_statement", "do_statement")
EXITS = ("return_statement", "continue_statement", "break_statement")
_Src = Callable[[ts.Node | None], str]


@dataclass(frozen=True)
class Range:
    """An integer interval ``[lo, hi]`` (inclusive)."""

    lo: int
    hi: int

    @staticmethod
    def point(v: int) -> Range:
        return Range(v, v)

    def __add__(self, other: Range) -> Range:
        return Range(self.lo + other.lo, self.hi + other.hi)

    def __neg__(self) -> Range:
        return Range(-self.hi, -self.lo)

    def __sub__(self, other: Range) -> Range:
        return self + (-other)

    def __mul__(self, other: Range) -> Range:
        corners = (self.lo * other.lo, self.lo * other.hi, self.hi * other.lo, self.hi * other.hi)
        return Range(min(corners), max(corners))

    def hull(self, other: Range) -> Range:
        return Range(min(self.lo, other.lo), max(self.hi, other.hi))

    def div(self, other: Range) -> Range | None:
        """C division (truncating) by a divisor that does not contain 0."""
        if other.lo <= 0 <= other.hi:
            return None
        corners = [_cdiv(a, b) for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Range(min(corners), max(corners))

    def mod(self, other: Range) -> Range | None:
        """C remainder by a positive divisor (sign follows the dividend)."""
        if other.lo <= 0:
            return None
        top = other.hi - 1
        if self.lo >= 0:
            return Range(0, min(self.hi, top)) if self.hi < other.lo else Range(0, top)
        return Range(-top, max(self.hi, 0) if self.hi < top else top)


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


class Unknown(Exception):
    """A value the analysis cannot bound; the message says what (``x[j]``: data)."""


@dataclass
class Intervals:
    """The intervals of one shape point: builtins, scalars, template values."""

    ix: KernelIndex
    values: dict[str, Range]
    memo: dict[tuple[int, int], Range] = field(default_factory=dict)
    facts: tuple[tuple[Affine, Affine], ...] = ()
    """``lhs < bound`` facts at the access being bounded (its guards), applied to each local
    and loop variable whose value is a fact's ``lhs`` (``b = i / T`` under ``if (i < B * T)``)."""
    busy: set[str] = field(default_factory=set)

    # symbols and nodes

    def symbol(self, name: str, at: ts.Node) -> Range:
        found = self._symbol(name, at)
        if not self.facts or name in self.busy:
            return found
        local = self.ix.locals.get(name)
        value = (
            self.ix.affine(local.value)
            if local is not None and local.value is not None and name not in self.ix.variables
            else Affine.sym(name)
        )
        if value is None:
            return found
        self.busy.add(name)
        try:
            for lhs, upper in self.facts:
                if lhs.equals(value):
                    with contextlib.suppress(Unknown):
                        top = self.affine(upper, at).hi - 1
                        if top >= found.lo:
                            found = Range(found.lo, min(found.hi, top))
        finally:
            self.busy.discard(name)
        return found

    def _symbol(self, name: str, at: ts.Node) -> Range:
        loop = enclosing_loop(self.ix, name, at)
        if loop is not None:
            return self.loop_range(loop, at)
        if name in self.values:
            return self.values[name]
        if name in self.ix.env:
            return Range.point(self.ix.env[name])
        if name == "warpSize":
            return Range.point(32)
        local = self.ix.locals.get(name)
        if local is not None and local.value is not None and name not in self.ix.variables:
            return self.node(local.value, at)
        raise Unknown(f"{name} (a variable the kernel sets in ways ktx does not follow)")

    def loop_range(self, shape: LoopShape, at: ts.Node) -> Range:
        key = (shape.node.id, 0)
        if key not in self.memo:
            self.memo[key] = self._loop_range(shape)
        result = self.memo[key]
        # while (t < n) { t += s; ... x[t] }: after the step, t may be past n.
        if shape.node.type != "for_statement" and shape.step is not None and _after_step(shape, at):
            result = Range(result.lo, result.hi + self.affine(shape.step, shape.node).hi)
        return result

    def _loop_range(self, shape: LoopShape) -> Range:
        if shape.start is None or shape.bound is None or shape.step is None or shape.var is None:
            raise Unknown(f"the loop at line {shape.line} (no readable start, bound or step)")
        if written_inside(self.ix, shape):
            raise Unknown(f"{shape.var} (written inside its loop at line {shape.line})")
        start = self.affine(shape.start, shape.node)
        bound = self.affine(shape.bound, shape.node)
        step = self.affine(shape.step, shape.node)
        if step.lo > 0 and shape.cmp in ("<", "<="):
            hi = bound.hi - (1 if shape.cmp == "<" else 0)
            return Range(start.lo, max(hi, start.lo))
        if step.hi < 0 and shape.cmp in (">", ">="):
            lo = bound.lo + (1 if shape.cmp == ">" else 0)
            return Range(min(lo, start.hi), start.hi)
        raise Unknown(f"the loop over {shape.var} at line {shape.line} (not a counted loop)")

    def affine(self, a: Affine, at: ts.Node) -> Range:
        atoms = dict(a.atoms)
        total = Range.point(0)
        for monomial, coef in a.terms:
            part = Range.point(coef)
            for s in monomial:
                part = part * (self.atom(s, at) if s in atoms else self.symbol(s, at))
            total = total + part
        return total

    def atom(self, text: str, at: ts.Node) -> Range:
        node = expression(text)
        if node is None:
            raise Unknown(text)
        return self.node(node, at, own=False)

    def node(self, n: ts.Node, at: ts.Node, own: bool = True) -> Range:
        """The range of a C integer expression: the kernel's own node, or (``own`` False) one
        parsed from an atom's text."""
        src = functools.partial(_text, self.ix.module if own else None)
        while n.type == "parenthesized_expression" and n.named_child_count == 1:
            n = n.named_children[0]
        kind = n.type
        if kind == "number_literal":
            v = int_literal(src(n))
            if v is None:
                raise Unknown(src(n))
            return Range.point(v)
        if kind == "identifier":
            return self.symbol(src(n), at)
        if kind == "field_expression":
            arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
            name = f"{src(arg).strip()}.{src(fld).strip()}" if arg is not None and fld is not None else ""
            if name in self.values:
                return self.values[name]
            raise Unknown(src(n))
        if kind == "cast_expression":
            value = n.child_by_field_name("value")
            if value is not None:
                return self.node(value, at, own)
        if kind == "conditional_expression":
            c = n.child_by_field_name("condition")
            a, b = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if a is not None and b is not None:
                with contextlib.suppress(Unknown):
                    decided = self.node(c, at, own) if c is not None else Range(0, 1)
                    if decided.lo == decided.hi:
                        return self.node(a if decided.lo else b, at, own)
                return self.node(a, at, own).hull(self.node(b, at, own))
        if kind == "unary_expression":
            op, arg = n.child_by_field_name("operator"), n.child_by_field_name("argument")
            if op is not None and arg is not None and op.type in ("-", "+"):
                inner = self.node(arg, at, own)
                return -inner if op.type == "-" else inner
            if op is not None and arg is not None and op.type == "!":
                inner = self.node(arg, at, own)
                return _truth(not inner.lo and not inner.hi, inner.lo > 0 or inner.hi < 0)
        if kind == "binary_expression":
            return self._binary(n, at, src, own)
        if kind == "sizeof_expression":
            target = n.child_by_field_name("type") or n.child_by_field_name("value")
            name = " ".join(src(target).strip("() ").split()) if target is not None else ""
            if name in SIZEOF:
                return Range.point(SIZEOF[name])
        if kind == "call_expression":
            return self._call(n, at, src, own)
        raise Unknown(" ".join(src(n).split()))

    def _binary(self, n: ts.Node, at: ts.Node, src: _Src, own: bool) -> Range:
        op = n.child_by_field_name("operator")
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op is None or left is None or right is None:
            raise Unknown(src(n))
        a = self.node(left, at, own)
        if op.type in ("&&", "||"):
            return self._logical(op.type, a, right, at, own)
        b = self.node(right, at, own)
        if op.type in _COMPARE:
            return _compare(op.type, a, b)
        if a.lo == a.hi and b.lo == b.hi:
            exact = _exact(op.type, a.lo, b.lo)
            if exact is not None:
                return Range.point(exact)
        found: Range | None = None
        if op.type == "+":
            found = a + b
        elif op.type == "-":
            found = a - b
        elif op.type == "*":
            found = a * b
        elif op.type == "/":
            found = a.div(b)
        elif op.type == "%":
            found = a.mod(b)
        elif op.type == "<<" and b.lo >= 0 and b.hi < 63:
            found = a * Range(1 << b.lo, 1 << b.hi)
        elif op.type == ">>" and b.lo >= 0 and b.hi < 63:
            found = a.div(Range(1 << b.lo, 1 << b.hi))
        elif op.type == "&" and a.lo >= 0 and b.lo >= 0:
            found = Range(0, min(a.hi, b.hi))
        if found is None:
            raise Unknown(" ".join(src(n).split()))
        return found

    def _logical(self, op: str, a: Range, right: ts.Node, at: ts.Node, own: bool) -> Range:
        """``&&``/``||`` short-circuit: a decided left side need not read the right."""
        a_true, a_false = a.lo > 0 or a.hi < 0, a.lo == 0 == a.hi
        if op == "&&" and a_false:
            return Range.point(0)
        if op == "||" and a_true:
            return Range.point(1)
        b = self.node(right, at, own)
        b_true, b_false = b.lo > 0 or b.hi < 0, b.lo == 0 == b.hi
        if op == "&&":
            return _truth(a_true and b_true, b_false)
        return _truth(a_true or b_true, a_false and b_false)

    def _call(self, n: ts.Node, at: ts.Node, src: _Src, own: bool) -> Range:
        fn, arguments = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        args = [c for c in arguments.named_children if c.type != "comment"] if arguments is not None else []
        callee = src(fn) if fn is not None else ""
        if fn is not None and fn.type == "template_function":
            name = fn.child_by_field_name("name")
            callee = src(name) if name is not None else callee
        callee = callee.split("::")[-1]
        if callee in ("min", "max", "fminf", "fmaxf", "umin", "umax") and len(args) == 2:
            a, b = self.node(args[0], at, own), self.node(args[1], at, own)
            if callee in ("min", "umin", "fminf"):
                return Range(min(a.lo, b.lo), min(a.hi, b.hi))
            return Range(max(a.lo, b.lo), max(a.hi, b.hi))
        if callee in ("static_cast", "int", "unsigned", "size_t", "int64_t") and len(args) == 1:
            return self.node(args[0], at, own)
        raise Unknown(" ".join(src(n).split()))

    # accesses

    def reach(self, ref: MemRef) -> Range:
        """The root elements ``ref`` can touch: its index range, widened by its width."""
        if not ref.root:
            raise Unknown(f"{ref.pointer} (a pointer ktx cannot follow to a parameter)")
        if ref.index is None or ref.width is None:
            raise Unknown(f"the index of {ref.pointer}[...] (not an integer expression ktx reads)")
        at = ref.node
        self.facts = tuple(_facts(self.ix, at))
        self.memo = {}  # loop ranges may use this access's facts
        plain = self.affine(ref.index, at)
        lo, hi = plain.lo, plain.hi
        for lhs, upper in self.facts:
            for c, rest in splits(ref.index, lhs):
                try:
                    limit = self.affine(lhs, at)
                    top = min(limit.hi, self.affine(upper, at).hi - 1)
                    if top < limit.lo:
                        continue
                    guarded = self.affine(c, at) * Range(limit.lo, top) + self.affine(rest, at)
                except Unknown:
                    continue
                hi = min(hi, guarded.hi)
        return Range(lo, hi + ref.width - 1)


def _text(module: Module | None, node: ts.Node | None) -> str:
    if node is None:
        return ""
    if module is not None:
        return node_text(module, node)
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


@functools.lru_cache(maxsize=4096)
def expression(text: str) -> ts.Node | None:
    """An atom's C text, parsed on its own (atoms keep their text, not their node)."""
    tree = parse_tree(f"void __ktx_atom() {{ long __ktx_v = {text}; }}\n".encode())
    for n in walk(tree.root_node):
        if n.type == "init_declarator":
            return n.child_by_field_name("value")
    return None


def _inside(node: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _after_step(shape: LoopShape, at: ts.Node) -> bool:
    """``at`` lies in the loop past the statement that steps its variable (a ``while`` body)."""
    step = shape.step_node
    return step is not None and at.start_byte > step.start_byte and _inside(at, shape.node)


_COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})


def _truth(true: bool, false: bool) -> Range:
    """A C truth value: 1, 0, or either."""
    return Range.point(1) if true else Range.point(0) if false else Range(0, 1)


def _compare(op: str, a: Range, b: Range) -> Range:
    if op in (">", ">="):
        return _compare("<" if op == ">" else "<=", b, a)
    if op == "<":
        return _truth(a.hi < b.lo, a.lo >= b.hi)
    if op == "<=":
        return _truth(a.hi <= b.lo, a.lo > b.hi)
    equal = a.lo == a.hi == b.lo == b.hi
    apart = a.hi < b.lo or b.hi < a.lo
    return _truth(equal, apart) if op == "==" else _truth(apart, equal)


def _exact(op: str, a: int, b: int) -> int | None:
    """C's value of ``a OP b`` on two known integers (None: not an operator read here, or UB)."""
    if op == "%" and b != 0:
        return a - _cdiv(a, b) * b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    return None


def writes(ix: KernelIndex, scope: ts.Node, var: str) -> Iterator[ts.Node]:
    for n in walk(scope):
        target: ts.Node | None = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier" and node_text(ix.module, target) == var:
            yield n


def written_inside(ix: KernelIndex, shape: LoopShape) -> bool:
    """The loop's variable is written in its body other than by its step (kept per loop)."""
    known = _WRITTEN.setdefault(ix, {})
    if shape.node.id not in known:
        body = shape.node.child_by_field_name("body")
        step_id = shape.step_node.id if shape.step_node is not None else -1
        var = shape.var or ""
        known[shape.node.id] = body is not None and any(w.id != step_id for w in writes(ix, body, var))
    return known[shape.node.id]


_WRITTEN: weakref.WeakKeyDictionary[KernelIndex, dict[int, bool]] = weakref.WeakKeyDictionary()


def enclosing_loop(ix: KernelIndex, name: str, at: ts.Node) -> LoopShape | None:
    """The innermost loop around ``at`` (its body, not its header) that steps ``name``."""
    node: ts.Node | None = at
    while node is not None and node.id != ix.body.id:
        parent = node.parent
        if parent is not None and parent.type in LOOPS and node == parent.child_by_field_name("body"):
            shape = shape_of(ix, parent)
            if shape is not None and shape.var == name:
                return shape
        node = parent
    return None


def shape_of(ix: KernelIndex, node: ts.Node) -> LoopShape | None:
    """The loop statement ``node`` as a :class:`LoopShape` (kept per kernel: a witness search
    asks for the same loops thousands of times)."""
    shapes = _SHAPES.setdefault(ix, {})
    key = (node.start_byte, node.end_byte)
    if key not in shapes:
        shapes[key] = None
        for loop in ix.module.loops_in(ix.fn):
            n = ix.module.node(loop.span)
            if (n.start_byte, n.end_byte) == key:
                shapes[key] = ix.loop_shape(loop)
                break
    return shapes[key]


_SHAPES: weakref.WeakKeyDictionary[KernelIndex, dict[tuple[int, int], LoopShape | None]] = (
    weakref.WeakKeyDictionary()
)


def _facts(ix: KernelIndex, at: ts.Node) -> Iterator[tuple[Affine, Affine]]:
    """``(lhs, bound)`` with ``lhs < bound`` holding at ``at``: from the ``if`` conditions it is
    under and the ``if (...) return/continue/break;`` statements before it in its blocks."""
    node = at
    while node.parent is not None and node.id != ix.body.id:
        parent = node.parent
        if parent.type in ("if_statement", "conditional_expression"):
            cond = parent.child_by_field_name("condition")
            if cond is not None and node == parent.child_by_field_name("consequence"):
                yield from _comparisons(ix, cond, negate=False)
            elif cond is not None and node == parent.child_by_field_name("alternative"):
                yield from _comparisons(ix, cond, negate=True)
        if parent.type == "binary_expression" and node == parent.child_by_field_name("right"):
            op, left = parent.child_by_field_name("operator"), parent.child_by_field_name("left")
            if op is not None and left is not None and op.type in ("&&", "||"):
                yield from _comparisons(ix, left, negate=op.type == "||")
        if parent.type == "compound_statement":
            for stmt in parent.named_children:
                if stmt.start_byte >= node.start_byte:
                    break
                if stmt.type == "if_statement" and stmt.child_by_field_name("alternative") is None:
                    cons = stmt.child_by_field_name("consequence")
                    cond = stmt.child_by_field_name("condition")
                    if cons is not None and cond is not None and _exits(cons):
                        yield from _comparisons(ix, cond, negate=True)
        node = parent


def _exits(node: ts.Node) -> bool:
    if node.type in EXITS:
        return True
    named = [c for c in node.named_children if c.type != "comment"]
    return node.type == "compound_statement" and len(named) == 1 and named[0].type in EXITS


def _comparisons(ix: KernelIndex, cond: ts.Node, negate: bool) -> Iterator[tuple[Affine, Affine]]:
    """``a < b`` facts of a condition (its ``&&`` conjuncts; an ``||`` when negated)."""
    n = cond
    while n.type in ("condition_clause", "parenthesized_expression") and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type != "binary_expression":
        return
    op = n.child_by_field_name("operator")
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if op is None or left is None or right is None:
        return
    if op.type == ("||" if negate else "&&"):
        yield from _comparisons(ix, left, negate)
        yield from _comparisons(ix, right, negate)
        return
    kind = {"<": "<", "<=": "<=", ">": ">", ">=": ">="}.get(op.type)
    if kind is None:
        return
    if negate:
        kind = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[kind]
    a, b = ix.affine(left), ix.affine(right)
    if a is None or b is None:
        return
    one = Affine.of(1)
    if kind == "<":
        yield a, b
    elif kind == "<=":
        yield a, b + one
    elif kind == ">":
        yield b, a
    else:
        yield b, a + one


def splits(index: Affine, part: Affine) -> Iterator[tuple[Affine, Affine]]:
    """Ways to write ``index = c * part + rest`` (``c`` a term: ``C`` in ``C*i + j``), each
    found from a term of ``index`` that is a multiple of ``part``'s first variable term."""
    terms = [(m, c) for m, c in part.terms if m]
    if not terms:
        return
    monomial, coef = terms[0]
    for have, k in index.terms:
        rest = list(have)
        try:
            for s in monomial:
                rest.remove(s)
        except ValueError:
            continue
        if k % coef:
            continue
        q = tuple(sorted(rest))
        c = Affine(((q, k // coef),), tuple((a, d) for a, d in index.atoms if a in q))
        yield c, index - part * c
