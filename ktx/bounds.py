"""Static bounds: which elements a kernel's accesses can reach, against the spec's extents.

Verification compares outputs; a spec whose extent is too small (a grid-stride loop walking
4096 tokens into a buffer of 256 rows) makes the original kernel write past its buffers, and
nothing compares what lies beyond. This module reads, for every shape point, the range of root
elements each access can touch under the launch mapping, and says where a range leaves its
buffer (an error naming the access's ``file:line``, the buffer and the point), which accesses
it could not bound (data-dependent or opaque indices: not proven, never "fine"), and where the
launch itself is invalid (no blocks, over 1024 threads, more dynamic shared memory than a
launch gets) or the buffers of a point take over a quarter of the device's memory.

How a range is found (all sound over-approximations; what cannot be bounded is ``unknown``):

* an access's index is an :class:`~ktx.ir.affine.Affine` (``accesses()``); each symbol takes
  an interval at the point: ``threadIdx.x`` in ``[0, block.x - 1]``, ``blockIdx.x`` in
  ``[0, grid.x - 1]``, ``blockDim``/``gridDim`` the launch's values, scalar parameters the
  spec's values, template value parameters the spec's ``template_args``, and a loop variable
  the range of the innermost enclosing loop that steps it (``[start, bound - 1]`` for an
  ascending loop, whatever its stride: a grid-stride loop over tokens reaches every token);
* opaque parts (``i / half``, ``i % half``, ``min(a, b)``) are evaluated on their C text with
  interval division and modulo;
* guards tighten the range: inside ``if (i < n)`` (or after ``if (i >= n) return;``), an index
  ``c * i + rest`` reaches at most ``c * (n - 1) + max(rest)``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import tree_sitter as ts
from ktx.ir import Function, Module, parse_file
from ktx.ir.affine import Affine, KernelIndex, LoopShape, MemRef, _index_node, kernel_index
from ktx.ir.consteval import SIZEOF, int_literal
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.language import parse_tree
from ktx.ir.syntax import text as node_text
from ktx.ir.syntax import walk

from ktx.errors import KtxError, Location
from ktx.expr import Value
from ktx.spec import ShapePoint, Spec, expand

#: Shared memory a block gets without opting in, and on sm_90 with it
#: (``cudaFuncAttributeMaxDynamicSharedMemorySize``, which ktx's harness sets when needed).
SHARED_DEFAULT = 48 * 1024
SHARED_OPT_IN_SM90 = 227 * 1024
#: Device memory assumed when the device is not known (an 80 GB H100), and the fraction of it
#: one shape point's buffers may take (verification keeps several copies of the outputs).
DEVICE_MEMORY = 80 * 10**9
MEMORY_FRACTION = 4
_LOOPS = ("for_statement", "while_statement", "do_statement")
_EXITS = ("return_statement", "continue_statement", "break_statement")

Kind = Literal["out_of_bounds", "launch", "memory", "unproven"]
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


@dataclass(frozen=True)
class Finding:
    """One thing ``--check`` reports: an error (``out_of_bounds``, ``launch``, ``memory``) or
    an access it could not bound (``unproven``)."""

    kind: Kind
    message: str
    location: Location | None = None
    buffer: str = ""
    point: str = ""

    @property
    def is_error(self) -> bool:
        return self.kind != "unproven"

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location is not None else ""
        return where + self.message


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int


# -- one kernel at one point -----------------------------------------------------------------


@dataclass
class _Point:
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
        loop = _enclosing_loop(self.ix, name, at)
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
        after_step = shape.step_node is not None and at.start_byte > shape.step_node.start_byte
        if (
            shape.node.type != "for_statement"
            and shape.step is not None
            and after_step
            and _inside(at, shape.node)
        ):
            result = Range(result.lo, result.hi + self.affine(shape.step, shape.node).hi)
        return result

    def _loop_range(self, shape: LoopShape) -> Range:
        if shape.start is None or shape.bound is None or shape.step is None or shape.var is None:
            raise Unknown(f"the loop at line {shape.line} (no readable start, bound or step)")
        body = shape.node.child_by_field_name("body")
        step_id = shape.step_node.id if shape.step_node is not None else -1
        if body is not None and any(w.id != step_id for w in _writes(self.ix, body, shape.var)):
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
        node = _expression(text)
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
            a, b = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            if a is not None and b is not None:
                return self.node(a, at, own).hull(self.node(b, at, own))
        if kind == "unary_expression":
            op, arg = n.child_by_field_name("operator"), n.child_by_field_name("argument")
            if op is not None and arg is not None and op.type in ("-", "+"):
                inner = self.node(arg, at, own)
                return -inner if op.type == "-" else inner
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
        a, b = self.node(left, at, own), self.node(right, at, own)
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
            for c, rest in _splits(ref.index, lhs):
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
def _expression(text: str) -> ts.Node | None:
    """An atom's C text, parsed on its own (atoms keep their text, not their node)."""
    tree = parse_tree(f"void __ktx_atom() {{ long __ktx_v = {text}; }}\n".encode())
    for n in walk(tree.root_node):
        if n.type == "init_declarator":
            return n.child_by_field_name("value")
    return None


def _inside(node: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _writes(ix: KernelIndex, scope: ts.Node, var: str) -> Iterator[ts.Node]:
    for n in walk(scope):
        target: ts.Node | None = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier" and node_text(ix.module, target) == var:
            yield n


def _enclosing_loop(ix: KernelIndex, name: str, at: ts.Node) -> LoopShape | None:
    """The innermost loop around ``at`` (its body, not its header) that steps ``name``."""
    node: ts.Node | None = at
    while node is not None and node.id != ix.body.id:
        parent = node.parent
        if parent is not None and parent.type in _LOOPS and node == parent.child_by_field_name("body"):
            shape = _shape_of(ix, parent)
            if shape is not None and shape.var == name:
                return shape
        node = parent
    return None


def _shape_of(ix: KernelIndex, node: ts.Node) -> LoopShape | None:
    for loop in ix.module.loops_in(ix.fn):
        n = ix.module.node(loop.span)
        if n.start_byte == node.start_byte and n.end_byte == node.end_byte:
            return ix.loop_shape(loop)
    return None


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
    if node.type in _EXITS:
        return True
    named = [c for c in node.named_children if c.type != "comment"]
    return node.type == "compound_statement" and len(named) == 1 and named[0].type in _EXITS


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


def _splits(index: Affine, part: Affine) -> Iterator[tuple[Affine, Affine]]:
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


# -- the spec at every point -------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """What the bounds check found over the points it looked at."""

    findings: tuple[Finding, ...]
    points: int

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.is_error)

    @property
    def unproven(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.is_error)


def launch_at(spec: Spec, env: Mapping[str, Value]) -> Launch:
    grid = tuple(e.evaluate_int(env) for e in spec.launch.grid)
    block = tuple(e.evaluate_int(env) for e in spec.launch.block)
    return Launch(grid, block, spec.launch.shared.evaluate_int(env))


def launch_problems(launch: Launch, static_shared: int = 0, opt_in: bool = True) -> list[str]:
    """Why a launch is invalid on sm_90: no blocks, no threads, over 1024 threads a block, a
    grid dimension past its limit, more shared memory than a launch gets."""
    out: list[str] = []
    if any(g <= 0 for g in launch.grid):
        out.append(f"grid {launch.grid} has no blocks")
    if any(g > 65535 for g in launch.grid[1:]) or (launch.grid and launch.grid[0] > 2**31 - 1):
        out.append(f"grid {launch.grid} is past the limits (x < 2^31, y and z <= 65535)")
    if any(b <= 0 for b in launch.block):
        out.append(f"block {launch.block} has no threads")
    threads = 1
    for b in launch.block:
        threads *= max(b, 0)
    if threads > 1024:
        out.append(f"block {launch.block} is {threads:,} threads (at most 1024)")
    if len(launch.block) == 3 and launch.block[2] > 64:
        out.append(f"block z = {launch.block[2]} (at most 64)")
    limit = SHARED_OPT_IN_SM90 if opt_in else SHARED_DEFAULT
    total = launch.shared + static_shared
    if launch.shared < 0:
        out.append(f"dynamic shared memory is {launch.shared} bytes")
    elif total > limit:
        what = f"{launch.shared:,} bytes of dynamic shared memory" + (
            f" and {static_shared:,} static" if static_shared else ""
        )
        opt = (
            " on sm_90 (opted in)"
            if opt_in
            else f" without opting in (sm_90 allows {SHARED_OPT_IN_SM90 // 1024} KiB)"
        )
        out.append(f"{what}: over the {limit // 1024} KiB a block gets{opt}")
    return out


def check_spec(
    spec: Spec,
    points: Sequence[ShapePoint] | None = None,
    device_memory: int = DEVICE_MEMORY,
    opt_in: bool = True,
) -> Report:
    """Check every point of every shape set (or ``points``): accesses within their buffers,
    the launch valid, the buffers within a quarter of ``device_memory``."""
    if points is None:
        seen: dict[str, ShapePoint] = {}
        for shape_set in spec.shapes:
            for p in shape_set.points:
                seen.setdefault(p.name, p)
        points = list(seen.values())
    module = parse_file(spec.folder / spec.source)
    fn = next((k for k in module.kernels if k.name == spec.kernel), None)
    if fn is None:
        raise KtxError(f"no kernel {spec.kernel!r} in {spec.source}", Location(str(spec.path)))
    ix = kernel_index(module, fn)
    refs = (*ix.accesses(), *_shared_refs(ix))
    source = os.path.normpath(spec.folder / spec.source)
    findings: list[Finding] = []
    said: set[tuple[str, int, str]] = set()
    for point in points:
        findings += _check_point(spec, module, fn, ix, refs, point, source, device_memory, opt_in, said)
    findings += _escapes(module, fn, ix, source)
    return Report(tuple(findings), len(points))


_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast"})


def _escapes(module: Module, fn: Function, ix: KernelIndex, source: str) -> list[Finding]:
    """A buffer handed to a call as a pointer (``load_global<16>(data, vals + offset + i)``,
    DeepSpeed's fake quantizer) is read or written by code the analysis does not follow: not
    proven. Without this, such a kernel's only accesses are invisible and ``--check`` would say
    every access is in bounds while 16-byte loads run past a group of one element."""
    buffers = {p.name for p in fn.params if p.is_pointer}
    out: list[Finding] = []
    for n in walk(ix.body):
        if n.type != "call_expression":
            continue
        callee = n.child_by_field_name("function")
        arguments = n.child_by_field_name("arguments")
        if callee is None or arguments is None:
            continue
        name_node = callee.child_by_field_name("name") if callee.type == "template_function" else callee
        name = node_text(module, name_node) if name_node is not None else ""
        if name in _CASTS:
            continue
        for arg in arguments.named_children:
            root = _pointer_root(module, arg)
            if root in buffers:
                text = " ".join(node_text(module, arg).split())
                where = Location(source, arg.start_point[0] + 1, arg.start_point[1] + 1)
                why = f"{text}: cannot bound what {name} does through {root} (a call ktx does not read)"
                out.append(Finding("unproven", why, where, root, ""))
    return out


def _pointer_root(module: Module, node: ts.Node) -> str | None:
    """``p``, ``p + off``, ``(T*)(p + off)``, ``reinterpret_cast<T*>(p) + off``: ``p``."""
    while True:
        if node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[0]
        elif node.type == "cast_expression" and node.child_by_field_name("value") is not None:
            node = node.child_by_field_name("value")  # type: ignore[assignment]
        elif node.type == "binary_expression" and node.child_by_field_name("left") is not None:
            op = node.child_by_field_name("operator")
            if op is None or op.type not in ("+", "-"):
                return None
            node = node.child_by_field_name("left")  # type: ignore[assignment]
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function")
            inner = (
                callee.child_by_field_name("name")
                if callee is not None and callee.type == "template_function"
                else None
            )
            arguments = node.child_by_field_name("arguments")
            if inner is None or node_text(module, inner) not in _CASTS or arguments is None:
                return None
            if not arguments.named_children:
                return None
            node = arguments.named_children[0]
        elif node.type == "identifier":
            return node_text(module, node)
        else:
            return None


def _check_point(
    spec: Spec,
    module: Module,
    fn: Function,
    ix: KernelIndex,
    refs: Sequence[MemRef],
    point: ShapePoint,
    source: str,
    device_memory: int,
    opt_in: bool,
    said: set[tuple[str, int, str]],
) -> list[Finding]:
    out: list[Finding] = []
    env = spec.env(point)
    try:
        launch = launch_at(spec, env)
    except KtxError as exc:
        why = f"at {point.name}: the launch does not evaluate: {exc.message}"
        return [Finding("launch", why, Location(str(spec.path)), "", point.name)]
    static = _static_shared(module, fn, ix)
    problems = launch_problems(launch, static, opt_in)
    for why in problems:
        out.append(Finding("launch", f"at {point.name}: {why}", Location(str(spec.path)), "", point.name))
    if any("no blocks" in p or "no threads" in p for p in problems):
        return out  # nothing runs at this point
    extents: dict[str, int] = {}
    total = 0
    for arg in spec.args:
        if arg.is_array:
            count = 1
            for d in arg.dims(env):
                count *= d
            extents[arg.name] = count
            total += count * arg.dtype.itemsize
    if total * MEMORY_FRACTION > device_memory:
        out.append(
            Finding(
                "memory",
                f"at {point.name}: the buffers take {total / 1e9:.1f} GB, over a quarter of the "
                f"device's {device_memory / 1e9:.0f} GB (verification keeps several copies)",
                Location(str(spec.path)),
                "",
                point.name,
            )
        )
    for name, shared in ix.shared.items():
        if shared.extern:
            width = SIZEOF.get(shared.type.replace("const", "").strip())
            if width:
                extents.setdefault(name, launch.shared // width)
        else:
            size = _static_count(ix, shared.dims)
            if size is not None:
                extents.setdefault(name, size)
    state = _Point(ix, _values(spec, fn, env, launch))
    moved = _moved_pointers(ix)
    for ref in refs:
        if ref.root and ref.root in ix.locals and ref.root not in ix.shared:
            continue  # a local array: registers
        if not ref.root and _in_registers(ix, ref.pointer):
            continue  # a field of a local struct (a Pack's ``v[]``): registers
        if ref.root and ref.root not in extents:
            continue  # a buffer the spec does not size (a static shared array of unknown size)
        where = Location(source, ref.line, ref.node.start_point[1] + 1)
        text = " ".join(node_text(module, ref.node).split())
        try:
            if ref.root in moved:
                raise Unknown(f"{ref.root} (the kernel moves the pointer at line {moved[ref.root]})")
            reach = state.reach(ref)
        except Unknown as exc:
            key = ("unproven", ref.line, text)
            if key not in said:
                said.add(key)
                out.append(Finding("unproven", f"{text}: cannot bound {exc}", where, ref.root, point.name))
            continue
        count = extents[ref.root]
        if reach.hi >= count or reach.lo < 0:
            key = ("oob", ref.line, ref.root)
            if key in said:
                continue
            said.add(key)
            past = (
                f"element {reach.hi:,} but {ref.root} has {count:,} elements"
                if reach.hi >= count
                else f"element {reach.lo:,} (before its start)"
            )
            shape = _shape_text(spec, ref.root)
            out.append(
                Finding(
                    "out_of_bounds",
                    f"{ref.kind} {text} can reach {past}{shape} at {point.name}",
                    where,
                    ref.root,
                    point.name,
                )
            )
    return out


def _moved_pointers(ix: KernelIndex) -> dict[str, int]:
    """Pointer parameters the kernel reassigns (``x += row * d``), with the first line: an
    index through them is relative to where they point then, which the analysis does not follow."""
    moved: dict[str, int] = {}
    for n in walk(ix.body):
        target: ts.Node | None = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is None or target.type != "identifier":
            continue
        name = node_text(ix.module, target)
        param = ix.params.get(name)
        if param is not None and param.is_pointer and name not in moved:
            moved[name] = n.start_point[0] + 1
    return moved


def _shared_refs(ix: KernelIndex) -> list[MemRef]:
    """Subscripts of the ``__shared__`` arrays the kernel declares in its body, which
    :meth:`KernelIndex.accesses` leaves out with the local arrays."""
    out: list[MemRef] = []
    for n in walk(ix.body):
        if n.type != "subscript_expression":
            continue
        base = n.child_by_field_name("argument")
        if base is None or base.type != "identifier":
            continue
        name = node_text(ix.module, base)
        if name not in ix.shared or name not in ix.locals:
            continue
        index = _index_node(n)
        out.append(
            MemRef(_kind(n), "subscript", name, name, ix.affine(index), "", 1, n, n.start_point[0] + 1)
        )
    return out


def _in_registers(ix: KernelIndex, pointer: str) -> bool:
    """``in.v`` where ``in`` is a local that is neither a pointer nor a reference."""
    m = re.match(r"\s*(\w+)\s*\.", pointer)
    if m is None:
        return False
    local = ix.locals.get(m.group(1))
    return local is not None and not local.pointer and "&" not in local.type


def _shape_text(spec: Spec, name: str) -> str:
    arg = next((a for a in spec.args if a.name == name), None)
    if arg is None:
        return " (its shared memory)"
    return " (shape [" + ", ".join(e.text.strip() for e in arg.shape) + "])"


def _values(spec: Spec, fn: Function, env: Mapping[str, Value], launch: Launch) -> dict[str, Range]:
    values: dict[str, Range] = {}
    for axis, i in (("x", 0), ("y", 1), ("z", 2)):
        g = launch.grid[i] if i < len(launch.grid) else 1
        b = launch.block[i] if i < len(launch.block) else 1
        values[f"threadIdx.{axis}"] = Range(0, max(b - 1, 0))
        values[f"blockIdx.{axis}"] = Range(0, max(g - 1, 0))
        values[f"blockDim.{axis}"] = Range.point(b)
        values[f"gridDim.{axis}"] = Range.point(g)
    for arg in spec.args:
        if not arg.is_array and arg.value is not None:
            v = arg.value.evaluate(env)
            if isinstance(v, int) and not isinstance(v, bool):
                values[arg.name] = Range.point(v)
    for tp, text in zip(fn.template_params, spec.template_args, strict=False):
        if tp.kind != "value":
            continue
        literal = int_literal(expand(text, env).strip())
        if literal is not None:
            values[tp.name] = Range.point(literal)
    return values


def _static_shared(module: Module, fn: Function, ix: KernelIndex) -> int:
    total = 0
    for shared in ix.shared.values():
        if shared.extern:
            continue
        count = _static_count(ix, shared.dims)
        width = SIZEOF.get(shared.type.replace("const", "").strip())
        if count is not None and width:
            total += count * width
    return total


def _static_count(ix: KernelIndex, dims: Sequence[str]) -> int | None:
    count = 1
    for d in dims:
        node = _expression(d)
        if node is None:
            return None
        try:
            r = _Point(ix, {n: Range.point(v) for n, v in ix.template_values.items()}).node(node, ix.body)
        except Unknown:
            return None
        if r.lo != r.hi:
            return None
        count *= r.lo
    return count


def check_folder(folder: str | Path) -> Report:
    from ktx.spec import load_spec

    return check_spec(load_spec(folder))


def refuse_out_of_bounds(spec: Spec) -> None:
    """At spec load: an access that can reach past its buffer at a shape point is an error.

    Only that: launch limits depend on the device and are reported by ``ktx init --check`` and
    at launch; accesses that cannot be bounded are left to verification's guard zones. A
    kernel the analysis cannot find or read (defined in a header, a parse it does not follow)
    is not checked here.
    """
    try:
        text = (spec.folder / spec.source).read_text(errors="replace")
    except OSError:
        return
    found = _first_out_of_bounds(spec, text)
    if found is not None:
        raise KtxError(found.message, found.location, found.hint)


@dataclass(frozen=True)
class _Refusal:
    message: str
    location: Location | None
    hint: str


@functools.lru_cache(maxsize=64)
def _first_out_of_bounds(spec: Spec, source_text: str) -> _Refusal | None:
    if not any(k.name == spec.kernel for k in parse_file(spec.folder / spec.source).kernels):
        return None
    report = check_spec(spec)
    for f in report.errors:
        if f.kind == "out_of_bounds":
            arg = next((a for a in spec.args if a.name == f.buffer), None)
            where = arg.shape[0].where if arg is not None and arg.shape else None
            return _Refusal(
                f"{f.location}: {f.message}" if where is not None else f.message,
                where if where is not None else f.location,
                f"make {f.buffer}'s shape cover what the kernel reaches, or change the shape point "
                "(ktx init --check lists every such access)",
            )
    return None
