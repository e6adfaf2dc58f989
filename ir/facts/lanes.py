"""Exact evaluation of a kernel's integer expressions on many threads at once.

A witness search (:mod:`ktx.ir.facts.witness`) runs an index on every thread of a block, a few
blocks and a few iterations of each loop: tens of thousands of concrete cases per access and
shape point. Each case is a *lane*; a symbol's value is a numpy array with one entry per lane
(or one integer for all), so one pass over the expression evaluates them all. The rules are
those of :class:`~ktx.ir.facts.intervals.Intervals` (C's truncating ``/`` and ``%``, ``min``,
casts read through), with nothing widened: what the analysis cannot evaluate exactly (a load,
a variable the kernel writes in ways it does not follow) raises
:class:`~ktx.ir.facts.intervals.Unknown`. A lane dividing by zero is dropped (``valid``), and so
is one where ``/``, ``%``, ``>>`` or an ordering comparison sees a negative operand: C gives
those another answer on unsigned values, and signedness is not tracked.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Union

import numpy as np
import numpy.typing as npt
import tree_sitter as ts
from ktx.ir.affine import Affine, KernelIndex, LoopShape
from ktx.ir.consteval import SIZEOF, int_literal
from ktx.ir.facts.intervals import Unknown, enclosing_loop, expression
from ktx.ir.syntax import text as node_text
from ktx.ir.syntax import walk

Ints = npt.NDArray[np.int64]
Val = Union[int, Ints]  # noqa: UP007 (a runtime alias: Python 3.10's | does not take np types here)
_MINMAX = ("min", "max", "fminf", "fmaxf", "umin", "umax", "fmin", "fmax")
_SIGN_SENSITIVE = frozenset({"/", "%", ">>", "<", "<=", ">", ">="})
_PASS = ("static_cast", "int", "unsigned", "size_t", "int64_t", "long")


class Lanes:
    """The values of ``size`` lanes: builtins and loop variables per lane, the rest shared."""

    def __init__(
        self,
        ix: KernelIndex,
        size: int,
        builtins: Mapping[str, Val],
        values: Mapping[str, int],
        loops: Mapping[int, Val],
    ) -> None:
        self.ix = ix
        self.size = size
        self.builtins = dict(builtins)
        self.values = dict(values)
        self.loops = dict(loops)
        """A loop node's id -> its variable's value at the top of the iteration, per lane."""
        self.valid: npt.NDArray[np.bool_] = np.ones(size, dtype=bool)
        self._locals: dict[str, Val] = {}

    # symbols

    def symbol(self, name: str, at: ts.Node) -> Val:
        loop = enclosing_loop(self.ix, name, at)
        if loop is not None:
            return self._loop_value(loop, at)
        if name in self.builtins:
            return self.builtins[name]
        if name in self.ix.variables or name in _address_taken(self.ix):
            # A parameter the kernel reassigns (n -= k) no longer has the spec's value, and a
            # local whose address is taken may be written through it.
            raise Unknown(f"{name} (a variable the kernel sets in ways ktx does not follow)")
        if name in self.values:
            return self.values[name]
        if name in self.ix.env:
            return self.ix.env[name]
        if name == "warpSize":
            return 32
        local = self.ix.locals.get(name)
        if local is not None and local.value is not None:
            if name not in self._locals:
                self._locals[name] = self.node(local.value, at)
            return self._locals[name]
        raise Unknown(f"{name} (a variable the kernel sets in ways ktx does not follow)")

    def _loop_value(self, shape: LoopShape, at: ts.Node) -> Val:
        if shape.node.id not in self.loops:
            raise Unknown(f"{shape.var} (a loop the witness does not step)")
        value = self.loops[shape.node.id]
        step = shape.step_node
        after = step is not None and at.start_byte > step.start_byte and at.end_byte <= shape.node.end_byte
        if shape.node.type != "for_statement" and shape.step is not None and after:
            value = value + self.affine(shape.step, shape.node)
        return value

    def affine(self, a: Affine, at: ts.Node) -> Val:
        atoms = dict(a.atoms)
        total: Val = 0
        for monomial, coef in a.terms:
            part: Val = coef
            for s in monomial:
                part = part * (self._atom(s, at) if s in atoms else self.symbol(s, at))
            total = total + part
        return total

    def _atom(self, text: str, at: ts.Node) -> Val:
        node = expression(text)
        if node is None:
            raise Unknown(text)
        return self.node(node, at, own=False)

    # nodes

    def node(self, n: ts.Node, at: ts.Node, own: bool = True) -> Val:
        """The value of a C integer expression on every lane."""
        src: Callable[[ts.Node], str] = (
            (lambda x: node_text(self.ix.module, x))
            if own
            else (lambda x: x.text.decode("utf-8", "replace") if x.text is not None else "")
        )
        while n.type == "parenthesized_expression" and n.named_child_count == 1:
            n = n.named_children[0]
        kind = n.type
        if kind == "number_literal":
            v = int_literal(src(n))
            if v is None:
                raise Unknown(src(n))
            return v
        if kind == "identifier":
            return self.symbol(src(n), at)
        if kind == "field_expression":
            name = "".join(src(n).split())
            if name in self.builtins:
                return self.builtins[name]
            if name in self.values:
                return self.values[name]
            raise Unknown(src(n))
        if kind == "cast_expression" and n.child_by_field_name("value") is not None:
            return self.node(n.child_by_field_name("value"), at, own)  # type: ignore[arg-type]
        if kind == "conditional_expression":
            c = n.child_by_field_name("condition")
            a, b = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if c is not None and a is not None and b is not None:
                return _where(self.node(c, at, own), self.node(a, at, own), self.node(b, at, own))
        if kind == "unary_expression":
            op, arg = n.child_by_field_name("operator"), n.child_by_field_name("argument")
            if op is not None and arg is not None and op.type in ("-", "+", "!", "~"):
                inner = self.node(arg, at, own)
                if op.type == "-":
                    return -inner
                if op.type == "!":
                    return _int(np.equal(inner, 0))
                return ~inner if op.type == "~" else inner
        if kind == "binary_expression":
            return self._binary(n, at, own, src)
        if kind == "sizeof_expression":
            target = n.child_by_field_name("type") or n.child_by_field_name("value")
            name = " ".join(src(target).strip("() ").split()) if target is not None else ""
            if name in SIZEOF:
                return SIZEOF[name]
        if kind == "call_expression":
            return self._call(n, at, own, src)
        raise Unknown(" ".join(src(n).split()))

    def _binary(self, n: ts.Node, at: ts.Node, own: bool, src: Callable[[ts.Node], str]) -> Val:
        op = n.child_by_field_name("operator")
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op is None or left is None or right is None:
            raise Unknown(src(n))
        a, b = self.node(left, at, own), self.node(right, at, own)
        kind = op.type
        if kind in _SIGN_SENSITIVE:
            # C computes these differently on unsigned values (threadIdx.x - 1 at thread 0 is
            # 4294967295, not -1); signedness is not tracked, so a lane with a negative operand
            # is dropped rather than trusted.
            negative = np.logical_or(np.less(a, 0), np.less(b, 0))
            self.valid &= ~np.broadcast_to(negative, self.valid.shape)
        simple: dict[str, Callable[[Val, Val], Val]] = {
            "+": lambda x, y: x + y,
            "-": lambda x, y: x - y,
            "*": lambda x, y: x * y,
            "&": lambda x, y: x & y,
            "|": lambda x, y: x | y,
            "^": lambda x, y: x ^ y,
            "<": lambda x, y: _int(np.less(x, y)),
            "<=": lambda x, y: _int(np.less_equal(x, y)),
            ">": lambda x, y: _int(np.greater(x, y)),
            ">=": lambda x, y: _int(np.greater_equal(x, y)),
            "==": lambda x, y: _int(np.equal(x, y)),
            "!=": lambda x, y: _int(np.not_equal(x, y)),
            "&&": lambda x, y: _int(np.logical_and(np.not_equal(x, 0), np.not_equal(y, 0))),
            "||": lambda x, y: _int(np.logical_or(np.not_equal(x, 0), np.not_equal(y, 0))),
        }
        if kind in simple:
            return simple[kind](a, b)
        if kind in ("/", "%"):
            zero = np.equal(b, 0)
            self.valid &= ~np.broadcast_to(zero, self.valid.shape)
            safe = np.where(zero, 1, b)
            q = _int(np.abs(a) // np.abs(safe)) * _int(
                np.where(np.equal(np.less(a, 0), np.less(safe, 0)), 1, -1)
            )
            return q if kind == "/" else a - q * safe
        if kind in ("<<", ">>") and bool(np.all(np.greater_equal(b, 0))) and bool(np.all(np.less(b, 63))):
            return a << b if kind == "<<" else a >> b
        raise Unknown(" ".join(src(n).split()))

    def _call(self, n: ts.Node, at: ts.Node, own: bool, src: Callable[[ts.Node], str]) -> Val:
        fn, arguments = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        args = [c for c in arguments.named_children if c.type != "comment"] if arguments is not None else []
        callee = src(fn) if fn is not None else ""
        if fn is not None and fn.type == "template_function":
            name = fn.child_by_field_name("name")
            callee = src(name) if name is not None else callee
        callee = callee.split("::")[-1]
        if callee in _MINMAX and len(args) == 2:
            a, b = self.node(args[0], at, own), self.node(args[1], at, own)
            return _int(np.minimum(a, b)) if "min" in callee else _int(np.maximum(a, b))
        if callee in _PASS and len(args) == 1:
            return self.node(args[0], at, own)
        raise Unknown(" ".join(src(n).split()))

    def truth(self, cond: ts.Node, at: ts.Node | None = None) -> npt.NDArray[np.bool_]:
        """Per lane, whether ``cond`` holds (read as at ``at``, by default where it stands)."""
        n = cond
        while n.type in ("condition_clause", "parenthesized_expression") and n.named_child_count == 1:
            n = n.named_children[0]
        v = self.node(n, at if at is not None else n)
        return np.broadcast_to(np.not_equal(v, 0), (self.size,))


def _address_taken(ix: KernelIndex) -> frozenset[str]:
    """Names the kernel takes the address of (``&k``), kept per kernel."""
    if ix not in _ADDRESSED:
        names = set()
        for n in walk(ix.body):
            op = n.child_by_field_name("operator") if n.type == "pointer_expression" else None
            arg = n.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None and arg.type == "identifier":
                names.add(node_text(ix.module, arg))
        _ADDRESSED[ix] = frozenset(names)
    return _ADDRESSED[ix]


_ADDRESSED: weakref.WeakKeyDictionary[KernelIndex, frozenset[str]] = weakref.WeakKeyDictionary()


def _int(v: object) -> Val:
    """Booleans and numpy scalars as the lanes' integers."""
    arr = np.asarray(v)
    if arr.ndim == 0:
        return int(arr)
    return arr.astype(np.int64)


def _where(c: Val, a: Val, b: Val) -> Val:
    return _int(np.where(np.not_equal(c, 0), a, b))
