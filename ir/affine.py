"""The index analysis every pass consults: what each index *is*, not how it is written.

Real code states one fact many ways: ``i = blockIdx.x * blockDim.x + threadIdx.x`` or
``idx = threadIdx.x + blockDim.x * blockIdx.x``; a block size read from ``blockDim.x`` or
written as ``#define BLOCK_SIZE 128`` that the launch also uses; ``x[i]`` or ``__ldg(&x[i])``
or ``reinterpret_cast<const float4*>(x)[i]`` or, through a row pointer, ``row[i]`` with
``const float* row = x + r * C``. Passes that matched text each learned a few of these ways.
This module reads them all once, into facts:

* :class:`Affine`: an index as a sum of integer-weighted products of *symbols*
  (``threadIdx.x``, ``blockIdx.x``, ``blockDim.x``, ``gridDim.x``, parameters, loop variables,
  template parameters) plus a constant. ``#define``/``constexpr`` integers are folded, locals
  defined once are substituted, ``warpSize`` is 32, and a macro, ``constexpr`` or template
  parameter that every launch of the kernel passes as its block size *is* ``blockDim.x``
  (:attr:`KernelIndex.block_aliases`). What is not a polynomial (``i / C``, ``min(a, b)``,
  ``x[j]``) becomes an opaque *atom*, which remembers the symbols it depends on, so that
  ``coeff`` can say "not linear" rather than guess.
* :class:`ThreadIndex`: the variable holding the global thread index and its declared type
  (``int``, ``unsigned``, 64-bit), with the :class:`Guard` that bounds it (``if (i < N) {...}``
  or ``if (i >= N) return;``).
* :class:`LoopShape`: ``for`` and ``while`` loops as start, step and bound, classified as
  block-stride, grid-stride, grid-of-blocks (``row += gridDim.x``), warp-stride or sequential.
* :class:`MemRef`: every load and store, whatever its spelling: subscripts, ``*p``,
  ``__ldg/__ldcs/__ldcg/__ldca/__ldlu/__ldcv`` and ``__stcs/__stcg/__stwb/__stwt`` (the address
  they take is a load or a store, not an escape), vector casts (``float4`` over a ``float``
  root is 4 root elements per access), and local pointers, each resolved to the root it
  reaches with the index as an :class:`Affine` in root elements.

Entry point: :func:`kernel_index` (cached per module and kernel), a :class:`KernelIndex` with

* ``affine(node)``: any integer expression as an :class:`Affine` (None if unreadable);
* ``thread_index(axis="x")``: the :class:`ThreadIndex` (variable, form, type, :class:`Guard`);
* ``guard_of(var)``: the top-level ``if (var < N) {...}`` / ``if (var >= N) return;``;
* ``loop_shape(loop)``: the :class:`LoopShape` of a ``for``/``while``/``do`` loop;
* ``accesses(node=None)`` / ``loop_accesses(loop)``: the :class:`MemRef` s under a node, the
  kernel body by default, or under a loop's body;
* ``pointer(name)``: what a local pointer reaches (:class:`PointerDef`);
* ``block_aliases``: the names that are ``blockDim.x`` (:class:`BlockAlias`), and
  ``template_values``: template parameters folded to integers.

The module-level :func:`thread_index`, :func:`guard_of`, :func:`loop_shape`, :func:`accesses`
and :func:`affine_of` are shortcuts; :func:`intrinsic_kind` tells whether ``&p[i]`` is the
address a load or store intrinsic accesses. Everything is syntactic and conservative: unknown
is ``None`` and callers refuse.

>>> from ktx.ir import parse
>>> m = parse('''#define BLOCK 128
... __global__ void k(float* out, const float* __restrict__ in, int n) {
...   int i = blockIdx.x * BLOCK + threadIdx.x;
...   if (i < n) out[i] = 2.f * __ldg(&in[i]);
... }
... void go(float* o, const float* x, int n) { k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(o, x, n); }''')
>>> ix = kernel_index(m, m.kernel())
>>> t = ix.thread_index()
>>> (t.var, str(t.form), t.guard.kind, t.guard.bound_text)
('i', 'blockDim.x*blockIdx.x + threadIdx.x', 'if', 'n')
>>> [(r.kind, r.via, r.root, str(r.index)) for r in ix.accesses()]  # doctest: +NORMALIZE_WHITESPACE
[('store', 'subscript', 'out', 'blockDim.x*blockIdx.x + threadIdx.x'),
 ('load', '__ldg', 'in', 'blockDim.x*blockIdx.x + threadIdx.x')]
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir.consteval import SIZEOF, const_eval, int_literal
from ktx.ir.facts.kinds import LOAD_INTRINSICS, STORE_INTRINSICS, AccessKind, intrinsic_kind
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.index import eval_int_text
from ktx.ir.launchmap import dim3_field_assignments
from ktx.ir.module import Module
from ktx.ir.nodes import Function, Loop
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

# -- symbols -------------------------------------------------------------------------------------

TID_X, TID_Y, TID_Z = "threadIdx.x", "threadIdx.y", "threadIdx.z"
BID_X, BID_Y, BID_Z = "blockIdx.x", "blockIdx.y", "blockIdx.z"
BDIM_X, BDIM_Y, BDIM_Z = "blockDim.x", "blockDim.y", "blockDim.z"
GDIM_X, GDIM_Y, GDIM_Z = "gridDim.x", "gridDim.y", "gridDim.z"
BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
#: Builtins that differ between the threads of one launch.
THREAD_VARYING = frozenset({TID_X, TID_Y, TID_Z, BID_X, BID_Y, BID_Z})

_WIDE = frozenset(
    {"size_t", "int64_t", "uint64_t", "long", "long long", "unsigned long", "unsigned long long", "ptrdiff_t"}
)
_UNSIGNED = frozenset({"unsigned", "unsigned int", "uint32_t", "size_t", "uint64_t", "unsigned long"})

Monomial = tuple[str, ...]
_OPAQUE = frozenset(
    {"conditional_expression", "subscript_expression", "template_function", "qualified_identifier"}
)
_LOOP_NODES = ("for_statement", "while_statement", "do_statement")


@dataclass(frozen=True)
class Affine:
    """``sum(coef * product(symbols)) + const``: an index over symbols, with integer weights.

    Strictly a polynomial (``blockIdx.x * blockDim.x`` is a product of two symbols); it is
    *affine in* a symbol when that symbol appears at most to the first power and never inside
    an atom, and then :meth:`coeff` gives its (possibly symbolic) coefficient. Atoms are
    opaque sub-expressions (``(i / C)``), named by their text, with the symbols they depend on
    in ``atoms``.

    >>> a = Affine.sym("blockIdx.x") * Affine.sym("blockDim.x") + Affine.sym("threadIdx.x")
    >>> str(a), str(a.coeff("blockIdx.x")), a.coeff("threadIdx.x").const
    ('blockDim.x*blockIdx.x + threadIdx.x', 'blockDim.x', 1)
    >>> (a * Affine.of(4)).coeff("threadIdx.x").const, (a * a).coeff("threadIdx.x") is None
    (4, True)
    """

    terms: tuple[tuple[Monomial, int], ...] = ()
    atoms: tuple[tuple[str, frozenset[str]], ...] = ()

    # construction
    @staticmethod
    def of(value: int) -> Affine:
        return Affine((((), value),) if value else ())

    @staticmethod
    def sym(name: str) -> Affine:
        return Affine((((name,), 1),))

    @staticmethod
    def atom(name: str, deps: Iterable[str]) -> Affine:
        return Affine((((name,), 1),), ((name, frozenset(deps)),))

    @staticmethod
    def _make(terms: Mapping[Monomial, int], atoms: Mapping[str, frozenset[str]]) -> Affine:
        kept = tuple(sorted((m, c) for m, c in terms.items() if c))
        used = {s for m, _ in kept for s in m}
        return Affine(kept, tuple(sorted((a, d) for a, d in atoms.items() if a in used)))

    def _dicts(self) -> tuple[dict[Monomial, int], dict[str, frozenset[str]]]:
        return dict(self.terms), dict(self.atoms)

    # arithmetic
    def __add__(self, other: Affine) -> Affine:
        terms, atoms = self._dicts()
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        atoms.update(other.atoms)
        return Affine._make(terms, atoms)

    def __neg__(self) -> Affine:
        return Affine(tuple((m, -c) for m, c in self.terms), self.atoms)

    def __sub__(self, other: Affine) -> Affine:
        return self + (-other)

    def __mul__(self, other: Affine) -> Affine:
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        atoms = dict(self.atoms)
        atoms.update(other.atoms)
        return Affine._make(terms, atoms)

    # questions
    @property
    def const(self) -> int:
        """The constant term."""
        return dict(self.terms).get((), 0)

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def symbols(self) -> frozenset[str]:
        """Symbols named at the top level (atoms count as their own names)."""
        return frozenset(s for m, _ in self.terms for s in m)

    @property
    def free(self) -> frozenset[str]:
        """Every symbol the value depends on, atoms opened."""
        deps = dict(self.atoms)
        out: set[str] = set()
        for s in self.symbols:
            out |= deps.get(s, frozenset({s}))
        return frozenset(out)

    def depends_on(self, names: Iterable[str]) -> bool:
        return bool(self.free & frozenset(names))

    def coeff(self, name: str) -> Affine | None:
        """The coefficient of ``name`` when the value is affine in it, else None (0 when absent)."""
        if any(name in deps for _, deps in self.atoms):
            return None
        terms: dict[Monomial, int] = {}
        for m, c in self.terms:
            k = m.count(name)
            if k > 1:
                return None
            if k == 1:
                rest = list(m)
                rest.remove(name)
                terms[tuple(rest)] = terms.get(tuple(rest), 0) + c
        return Affine._make(terms, dict(self.atoms))

    def without(self, *names: str) -> Affine:
        """The terms that mention none of ``names`` (the offset once their part is removed)."""
        terms = {m: c for m, c in self.terms if not set(m) & set(names)}
        return Affine._make(terms, dict(self.atoms))

    def substitute(self, name: str, value: Affine) -> Affine:
        out = Affine()
        for m, c in self.terms:
            part = Affine.of(c)
            for s in m:
                part = part * (value if s == name else Affine((((s,), 1),), self.atoms))
            out = out + part
        return out

    def equals(self, other: Affine) -> bool:
        return self.terms == other.terms

    def is_sym(self, name: str) -> bool:
        """Whether the value is exactly ``name``."""
        return self.terms == (((name,), 1),)

    def __str__(self) -> str:
        """C-like text (symbols and atoms as written); ``0`` for zero."""
        parts: list[str] = []
        for m, c in self.terms:
            body = "*".join(m)
            if not m:
                word = str(abs(c))
            elif abs(c) == 1:
                word = body
            else:
                word = f"{abs(c)}*{body}"
            if not parts:
                parts.append(word if c > 0 else f"-{word}")
            else:
                parts.append(f"+ {word}" if c > 0 else f"- {word}")
        return " ".join(parts) if parts else "0"


ZERO = Affine()


# -- facts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockAlias:
    """A name the kernel reads that every launch passes as its block size: it *is* blockDim."""

    name: str
    axis: str
    """``x``, ``y`` or ``z``."""
    value: int | None
    kind: Literal["define", "constexpr", "template", "param", "value"]
    """How the launch names it: the ``#define``/``constexpr``/template parameter/parameter
    itself, or ``value``: a constant the kernel reads that equals the block every launch passes
    (``<<<g, 256>>>`` and ``#define TPB 256``)."""


@dataclass(frozen=True)
class Guard:
    """The bound of a thread's index: ``if (i < N) {...}`` or ``if (i >= N) return;``."""

    kind: Literal["if", "return"]
    var: str
    bound: Affine | None
    bound_text: str
    inclusive: bool
    """``i <= N``: the last valid index is N (rare; callers usually refuse)."""
    node: ts.Node
    """The ``if`` statement."""
    body: ts.Node | None
    """The guarded statement (``if``); None for a ``return`` guard (the rest of the kernel)."""
    line: int


@dataclass(frozen=True)
class ThreadIndex:
    """The variable that holds a thread's global index along an axis, and its guard."""

    var: str
    axis: str
    form: Affine
    type: str
    """The declared type (``int``, ``const unsigned``, ``size_t``...)."""
    decl: ts.Node
    guard: Guard | None
    line: int

    @property
    def wide(self) -> bool:
        """Whether the index is 64-bit (``size_t``, ``int64_t``, ``long``...)."""
        return _is_wide(self.type)

    def overflow_note(self, factor: str) -> str | None:
        """Why multiplying this index by ``factor`` may overflow, or None when it is 64-bit."""
        if self.wide:
            return None
        return (
            f"{self.var} is {self.type.strip() or 'int'} (line {self.line}): {self.var} * {factor} "
            f"overflows 32 bits when N * {factor} >= 2^31; compute it in 64 bits"
        )


StrideKind = Literal["block", "grid", "grid-blocks", "warp", "unit", "constant", "other"]


@dataclass(frozen=True)
class LoopShape:
    """A ``for``/``while``/``do`` loop as ``for (v = start; v < bound; v += step)``.

    ``stride`` classifies the step: ``block`` (``blockDim.x``: the threads of a block walk
    the range together), ``grid`` (``blockDim.x * gridDim.x``), ``grid-blocks``
    (``gridDim.x``: blocks walk rows), ``warp`` (32), ``unit`` (1: one thread walks it all),
    ``constant`` (another literal), ``other``. ``step_node`` is the statement or expression
    that advances ``var`` (the header's update, or the ``row += gridDim.x;`` of a while body).
    """

    loop: Loop
    node: ts.Node
    var: str | None
    start: Affine | None
    step: Affine | None
    bound: Affine | None
    cmp: str
    stride: StrideKind
    step_node: ts.Node | None
    line: int

    @property
    def partitions(self) -> bool:
        """Whether start and step split the range among threads with no overlap.

        True for ``threadIdx.x + c`` stepping ``blockDim.x``, ``blockIdx.x*blockDim.x +
        threadIdx.x + c`` stepping ``blockDim.x*gridDim.x``, and ``blockIdx.x + c`` stepping
        ``gridDim.x`` (with ``c`` free of the thread's builtins).
        """
        if self.start is None or self.step is None:
            return False
        rest = self.start.without(TID_X, BID_X)
        if rest.depends_on(THREAD_VARYING):
            return False
        tid = self.start.coeff(TID_X)
        bid = self.start.coeff(BID_X)
        if tid is None or bid is None:
            return False
        if self.stride == "block":
            return tid.equals(Affine.of(1)) and bid.equals(ZERO)
        if self.stride == "grid":
            return tid.equals(Affine.of(1)) and bid.equals(Affine.sym(BDIM_X))
        if self.stride == "grid-blocks":
            return tid.equals(ZERO) and bid.equals(Affine.of(1))
        return False


@dataclass(frozen=True)
class MemRef:
    """One memory access, whatever its spelling, resolved to the memory it reaches.

    ``root`` is a kernel parameter, ``__shared__`` array or local array (``""`` when the
    pointer's origin is unknown). ``index`` is the first root element the access touches: for
    ``x[i]`` on a ``float*`` root it is ``i``; for ``reinterpret_cast<float4*>(x)[i]`` it is
    ``4*i``, with ``unit_type`` ``float4`` and ``width`` 4 (root elements per access; None
    when a size is not known, and then ``index`` is None too). Through a local pointer
    (``row = x + r * C; row[i]``) the index includes the pointer's offset: ``C*r + i``.
    """

    kind: AccessKind
    via: str
    """``subscript``, ``deref`` or the intrinsic's name (``__ldg``, ``__stcs``...)."""
    pointer: str
    """The pointer as written (``row``, ``reinterpret_cast<const float4*>(x)``)."""
    root: str
    index: Affine | None
    unit_type: str
    width: int | None
    node: ts.Node
    """The subscript, dereference or intrinsic call."""
    line: int

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "update", "address")

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "update", "address")


@dataclass(frozen=True)
class PointerDef:
    """A local pointer: the root it reaches and its offset in root elements."""

    name: str
    root: str
    offset: Affine | None
    element_type: str
    line: int


# -- the analysis --------------------------------------------------------------------------------


@dataclass
class _Local:
    node: ts.Node
    value: ts.Node | None
    type: str
    pointer: bool
    array: bool


class KernelIndex:
    """Index facts of one kernel, computed on demand and kept (see :func:`kernel_index`)."""

    def __init__(self, module: Module, fn: Function) -> None:
        self.module = module
        self.fn = fn
        self.body = _function_body(module, fn)
        self.env: dict[str, int] = {m.name: m.int_value for m in module.macros if m.int_value is not None}
        for c in module.constants:
            if c.int_value is not None and c.function in (None, fn.name):
                self.env[c.name] = c.int_value
        self.block_aliases: dict[str, BlockAlias] = _block_aliases(module, fn, self.env)
        self.template_values: dict[str, int] = _template_values(module, fn, self.env)
        """Value template parameters every launch (or the default) gives one integer: folded."""
        self.params = {p.name: p for p in fn.params}
        self.shared = {a.name: a for a in module.shared_arrays if a.function in (fn.name, None)}
        self.locals: dict[str, _Local] = {}
        self.variables: set[str] = set()
        """Locals written after their declaration, or declared twice: symbols, never substituted."""
        self._collect_locals()
        self._memo: dict[int, Affine | None] = {}
        self._busy: set[str] = set()
        self._pointers: dict[str, PointerDef | None] = {}

    # -- locals --------------------------------------------------------------------------------

    def _collect_locals(self) -> None:
        counts: dict[str, int] = {}
        for n in _walk(self.body):
            if n.type != "declaration":
                continue
            type_node = n.child_by_field_name("type")
            base = _text(self.module, type_node) if type_node is not None else ""
            quals = " ".join(_text(self.module, c) for c in n.children if c.type == "type_qualifier")
            for decl in n.children_by_field_name("declarator"):
                value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                ident, depth, array = _declared(target)
                if ident is None:
                    continue
                name = _text(self.module, ident)
                counts[name] = counts.get(name, 0) + 1
                if value is not None and value.type in ("initializer_list", "argument_list"):
                    inner = [c for c in value.named_children if c.type != "comment"]
                    value = inner[0] if len(inner) == 1 else None
                self.locals[name] = _Local(n, value, f"{quals} {base}".strip(), depth > 0, array)
        for n in _walk(self.body):
            written: ts.Node | None = None
            if n.type == "assignment_expression":
                written = n.child_by_field_name("left")
            elif n.type == "update_expression":
                written = n.child_by_field_name("argument")
            if written is not None and _strip(written).type == "identifier":
                self.variables.add(_text(self.module, _strip(written)))
        self.variables |= {n for n, k in counts.items() if k > 1}
        for name, local in self.locals.items():
            if local.value is None and not local.array:
                self.variables.add(name)

    def local_type(self, name: str) -> str | None:
        """The declared type of a local or parameter (qualifiers kept), or None."""
        if name in self.locals:
            return self.locals[name].type
        p = self.params.get(name)
        return p.type if p is not None else None

    # -- expressions ---------------------------------------------------------------------------

    def affine(self, node: ts.Node | None) -> Affine | None:
        """The value of an integer expression as an :class:`Affine`, or None if not readable."""
        if node is None:
            return None
        key = node.id
        if key not in self._memo:
            self._memo[key] = self._eval(node)
        return self._memo[key]

    def _name(self, name: str) -> Affine:
        alias = self.block_aliases.get(name)
        if alias is not None and name not in self.locals and name not in self.variables:
            return Affine.sym(f"blockDim.{alias.axis}")
        if name in self.locals and name not in self.variables:
            local = self.locals[name]
            if local.pointer or local.array or name in self._busy:
                return Affine.sym(name)
            self._busy.add(name)
            try:
                value = self.affine(local.value)
            finally:
                self._busy.discard(name)
            return value if value is not None else Affine.atom(name, self._free_names(local.value))
        if name not in self.locals:
            if name in self.template_values and name not in self.block_aliases:
                return Affine.of(self.template_values[name])
            if name in self.env:
                return Affine.of(self.env[name])
            if name == "warpSize":
                return Affine.of(32)
        return Affine.sym(name)

    def _free_names(self, node: ts.Node | None) -> set[str]:
        """The symbols an unreadable expression depends on (locals opened, constants dropped)."""
        out: set[str] = set()
        if node is None:
            return out
        for n in _walk(node):
            if n.type == "field_expression":
                b = _builtin(self.module, n)
                if b is not None:
                    out.add(b)
            elif n.type == "identifier":
                parent = n.parent
                if parent is not None and parent.type == "field_expression" and parent.child_by_field_name(
                    "field"
                ) == n:
                    continue
                if parent is not None and parent.type == "call_expression" and parent.child_by_field_name(
                    "function"
                ) == n:
                    continue
                out |= self._name(_text(self.module, n)).free
        return out

    def _opaque(self, node: ts.Node) -> Affine:
        return Affine.atom("(" + " ".join(_text(self.module, node).split()) + ")", self._free_names(node))

    def _eval(self, node: ts.Node) -> Affine | None:
        n = _strip(node)
        kind = n.type
        if kind == "number_literal":
            v = int_literal(_text(self.module, n))
            return Affine.of(v) if v is not None else None
        if kind == "identifier":
            return self._name(_text(self.module, n))
        if kind == "field_expression":
            builtin = _builtin(self.module, n)
            return Affine.sym(builtin) if builtin is not None else self._opaque(n)
        if kind == "cast_expression":
            return self.affine(n.child_by_field_name("value"))
        if kind == "call_expression":
            fn = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if fn is not None and fn.type == "template_function" and len(named) == 1:
                name = _text(self.module, fn.child_by_field_name("name") or fn)
                if name in ("static_cast", "int", "unsigned", "size_t"):
                    return self.affine(named[0])
            return self._opaque(n)
        if kind == "unary_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            inner = self.affine(arg) if arg is not None else None
            if op is None or inner is None:
                return None
            if op.type == "-":
                return -inner
            if op.type == "+":
                return inner
            return self._opaque(n)
        if kind == "binary_expression":
            op = n.child_by_field_name("operator")
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op is None or left is None or right is None:
                return None
            a, b = self.affine(left), self.affine(right)
            if a is None or b is None:
                return self._opaque(n)
            if op.type == "+":
                return a + b
            if op.type == "-":
                return a - b
            if op.type == "*":
                return a * b
            if op.type == "<<" and b.is_const and 0 <= b.const < 63:
                return a * Affine.of(1 << b.const)
            if a.is_const and b.is_const:
                folded = _fold(op.type, a.const, b.const)
                return Affine.of(folded) if folded is not None else None
            return self._opaque(n)
        if kind == "sizeof_expression":
            v = const_eval(n, self.env)
            return Affine.of(v) if v is not None else self._opaque(n)
        if kind in _OPAQUE:
            return self._opaque(n)
        return None

    # -- thread index and guards ---------------------------------------------------------------

    def global_form(self, axis: str = "x") -> Affine:
        """``blockIdx.a * blockDim.a + threadIdx.a``."""
        block = Affine.sym(f"blockIdx.{axis}") * Affine.sym(f"blockDim.{axis}")
        return block + Affine.sym(f"threadIdx.{axis}")

    def thread_index(self, axis: str = "x") -> ThreadIndex | None:
        """The first local defined as the global thread index along ``axis`` (casts allowed)."""
        want = self.global_form(axis)
        for name, local in self.locals.items():
            if name in self.variables or local.pointer or local.array or local.value is None:
                continue
            value = self.affine(local.value)
            if value is not None and value.equals(want):
                return ThreadIndex(
                    name,
                    axis,
                    value,
                    local.type,
                    local.node,
                    self.guard_of(name),
                    local.node.start_point[0] + 1,
                )
        return None

    def guard_of(self, var: str) -> Guard | None:
        """The guard on ``var`` among the kernel's top-level statements, or None.

        ``if (var < N) {...}`` (no ``else``) or ``if (var >= N) return;`` (and the mirrored
        comparisons); ``N`` must not depend on the thread's builtins.
        """
        for stmt in self.body.named_children:
            if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
                continue
            cond = stmt.child_by_field_name("condition")
            cons = stmt.child_by_field_name("consequence")
            if cond is None or cons is None:
                continue
            cmp = _comparison(self.module, cond, var)
            if cmp is None:
                continue
            op, bound_node = cmp
            bound = self.affine(bound_node)
            if bound is not None and bound.depends_on(THREAD_VARYING):
                continue
            line = stmt.start_point[0] + 1
            text = " ".join(_text(self.module, bound_node).split())
            if op in ("<", "<=") and not _only_return(cons):
                return Guard("if", var, bound, text, op == "<=", stmt, cons, line)
            if op in (">=", ">") and _only_return(cons):
                return Guard("return", var, bound, text, op == ">", stmt, None, line)
        return None

    # -- loops ---------------------------------------------------------------------------------

    def loop_shape(self, loop: Loop) -> LoopShape | None:
        """``loop`` as start/step/bound, or None when it has no single induction variable."""
        node = self.module.node(loop.span)
        while node.type not in _LOOP_NODES and node.parent is not None:
            node = node.parent
        if node.type not in _LOOP_NODES:
            return None
        line = node.start_point[0] + 1
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        var = loop.var
        cmp_op, bound_node = "", None
        if cond is not None:
            c = _strip(_condition(cond))
            if var is None and c.type == "binary_expression":
                left = _strip(c.child_by_field_name("left") or c)
                if left.type == "identifier":
                    var = _text(self.module, left)
            if var is not None:
                found = _comparison(self.module, c, var)
                if found is not None:
                    cmp_op, bound_node = found
        if var is None:
            return None
        step_node: ts.Node | None = None
        step: Affine | None = None
        start: Affine | None = None
        if node.type == "for_statement":
            update = node.child_by_field_name("update")
            if update is not None:
                step_node = update
                step = self._step(update, var)
            init = node.child_by_field_name("initializer")
            start = self._init_value(init, var) if init is not None else self._value_before(var, node)
        else:
            if body is not None:
                writes = [w for w in _assignments(self.module, body, var)]
                if len(writes) == 1 and _top_level_in(writes[0], body):
                    step_node = writes[0]
                    step = self._step(writes[0], var)
            start = self._value_before(var, node)
        bound = self.affine(bound_node) if bound_node is not None else None
        return LoopShape(loop, node, var, start, step, bound, cmp_op, _classify(step), step_node, line)

    def _step(self, node: ts.Node, var: str) -> Affine | None:
        n = _strip(node)
        if n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            op = n.child_by_field_name("operator")
            if arg is not None and _text(self.module, _strip(arg)) == var and op is not None:
                return Affine.of(1 if op.type == "++" else -1)
            return None
        if n.type == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op = n.child_by_field_name("operator")
            if left is None or right is None or op is None or _text(self.module, _strip(left)) != var:
                return None
            value = self.affine(right)
            if value is None:
                return None
            if op.type == "+=":
                return value
            if op.type == "-=":
                return -value
            if op.type == "=":
                coeff = value.coeff(var)
                if coeff is not None and coeff.equals(Affine.of(1)):
                    return value.without(var)
            return None
        if n.type == "expression_statement" and n.named_children:
            return self._step(n.named_children[0], var)
        if n.type == "comma_expression":
            return None
        return None

    def _init_value(self, init: ts.Node, var: str) -> Affine | None:
        if init.type == "declaration":
            for decl in init.children_by_field_name("declarator"):
                if decl.type == "init_declarator":
                    ident, _, _ = _declared(decl.child_by_field_name("declarator"))
                    if ident is not None and _text(self.module, ident) == var:
                        return self.affine(decl.child_by_field_name("value"))
            return None
        n = _strip(init)
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and _text(self.module, _strip(left)) == var:
                return self.affine(n.child_by_field_name("right"))
        return None

    def _value_before(self, var: str, loop: ts.Node) -> Affine | None:
        """``var``'s value entering ``loop``: its initialiser, when nothing else writes it first."""
        local = self.locals.get(var)
        if local is None or local.value is None or local.node.start_byte > loop.start_byte:
            return None
        for w in _assignments(self.module, self.body, var):
            if w.start_byte < loop.start_byte or w.start_byte >= loop.end_byte:
                return None
        saved = var in self.variables
        self.variables.discard(var)
        try:
            return self._eval(local.value)
        finally:
            if saved:
                self.variables.add(var)

    # -- memory --------------------------------------------------------------------------------

    def pointer(self, name: str) -> PointerDef | None:
        """What a local pointer reaches (``row = x + r * C`` reaches ``x`` at ``r*C``), or None."""
        if name in self._pointers:
            return self._pointers[name]
        self._pointers[name] = None
        local = self.locals.get(name)
        result: PointerDef | None = None
        if local is not None and local.pointer and local.value is not None and name not in self.variables:
            base = self._pointer_expr(local.value)
            if base is not None:
                root, offset, unit = base
                etype = _element(local.type) or unit
                line = local.node.start_point[0] + 1
                result = PointerDef(name, root, offset, etype, line)
        self._pointers[name] = result
        return result

    def root_type(self, root: str) -> str:
        p = self.params.get(root)
        if p is not None:
            return _element(p.base_type)
        if root in self.shared:
            return _element(self.shared[root].type)
        local = self.locals.get(root)
        return _element(local.type) if local is not None else ""

    def _width(self, root: str, unit: str) -> int | None:
        """Root elements per ``unit`` (``float4`` over ``float``: 4), or None when not known."""
        rtype = self.root_type(root)
        if unit == rtype:
            return 1
        u, r = _size(unit), _size(rtype)
        return u // r if u is not None and r and u % r == 0 else None

    def _scaled(self, root: str, unit: str, count: Affine | None) -> Affine | None:
        """``count`` units of ``unit`` in root elements."""
        width = self._width(root, unit)
        if count is None or width is None:
            return None
        return count if width == 1 else count * Affine.of(width)

    def _pointer_expr(self, node: ts.Node) -> tuple[str, Affine | None, str] | None:
        """``(root, offset in root elements, unit type)`` of a pointer-valued expression, or None."""
        n = _strip(node)
        if n.type == "identifier":
            name = _text(self.module, n)
            if name in self.params and self.params[name].pointer_depth == 1:
                return name, ZERO, self.root_type(name)
            if name in self.shared or (name in self.locals and self.locals[name].array):
                return name, ZERO, self.root_type(name)
            d = self.pointer(name)
            if d is not None:
                return d.root, d.offset, d.element_type
            return None
        if n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op is None or left is None or right is None or op.type not in ("+", "-"):
                return None
            base = self._pointer_expr(left)
            other = right
            if base is None and op.type == "+":
                base, other = self._pointer_expr(right), left
            if base is None:
                return None
            root, off, unit = base
            delta = self._scaled(root, unit, self.affine(other))
            if off is None or delta is None:
                return root, None, unit
            return root, off + (delta if op.type == "+" else -delta), unit
        if n.type == "pointer_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None:
                sub = _strip(arg)
                if sub.type == "subscript_expression":
                    ref = self._subscript(sub)
                    if ref is not None:
                        return ref[0], ref[1], ref[2]
            return None
        cast = _cast_parts(self.module, n)
        if cast is not None:
            target, value = cast
            base = self._pointer_expr(value)
            if base is None:
                return None
            root, off, _ = base
            return root, off, target
        return None

    def _subscript(self, sub: ts.Node) -> tuple[str, Affine | None, str, str] | None:
        """``(root, index in root elements, unit type, pointer text)`` of ``p[i]``."""
        base = sub.child_by_field_name("argument")
        idx = _index_node(sub)
        if base is None or idx is None:
            return None
        ptr = self._pointer_expr(base)
        if ptr is None:
            return None
        root, off, unit = ptr
        value = self._scaled(root, unit, self.affine(idx))
        index = off + value if off is not None and value is not None else None
        return root, index, unit, " ".join(_text(self.module, _strip(base)).split())

    def accesses(self, node: ts.Node | None = None) -> tuple[MemRef, ...]:
        """Every memory access under ``node`` (the kernel body by default), in source order."""
        scope = node if node is not None else self.body
        found: list[MemRef] = []
        consumed: set[int] = set()
        for n in _walk(scope):
            if n.id in consumed:
                continue
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                name = _text(self.module, fn) if fn is not None else ""
                if name in LOAD_INTRINSICS or name in STORE_INTRINSICS:
                    args = n.child_by_field_name("arguments")
                    named = [c for c in args.named_children if c.type != "comment"] if args else []
                    if not named:
                        continue
                    addr = _strip(named[0])
                    kind: AccessKind = "load" if name in LOAD_INTRINSICS else "store"
                    ref = self._address(addr)
                    if addr.type == "pointer_expression":
                        inner = addr.child_by_field_name("argument")
                        if inner is not None:
                            consumed.add(_strip(inner).id)
                    if ref is None:
                        ref = ("", None, "", _text(self.module, addr))
                    root, index, unit, text = ref
                    found.append(self._ref(kind, name, text, root, index, unit, n))
                continue
            if n.type == "subscript_expression":
                ref4 = self._subscript(n)
                if ref4 is None:
                    base = n.child_by_field_name("argument")
                    if base is not None and _strip(base).type == "identifier":
                        name = _text(self.module, _strip(base))
                        local = self.locals.get(name)
                        if local is not None and (local.array or not local.pointer):
                            continue  # a local array or a packed value (x128): registers, not memory
                    text = _text(self.module, base) if base is not None else ""
                    found.append(self._ref(_kind(n), "subscript", text, "", None, "", n))
                    continue
                root, index, unit, text = ref4
                if root in self.locals and self.locals[root].array:
                    continue
                found.append(self._ref(_kind(n), "subscript", text, root, index, unit, n))
                continue
            if n.type == "pointer_expression":
                op = n.child_by_field_name("operator")
                arg = n.child_by_field_name("argument")
                if op is None or arg is None or op.type != "*":
                    continue
                ptr = self._pointer_expr(arg)
                if ptr is None:
                    continue
                root, off, unit = ptr
                text = " ".join(_text(self.module, arg).split())
                found.append(self._ref(_kind(n), "deref", text, root, off, unit, n))
        return tuple(found)

    def loop_accesses(self, loop: Loop) -> tuple[MemRef, ...]:
        """The accesses in ``loop``'s body (its header is not memory traffic)."""
        node = self.module.node(loop.span)
        while node.type not in _LOOP_NODES and node.parent is not None:
            node = node.parent
        body = node.child_by_field_name("body")
        return self.accesses(body) if body is not None else ()

    def _address(self, addr: ts.Node) -> tuple[str, Affine | None, str, str] | None:
        if addr.type == "pointer_expression":
            op = addr.child_by_field_name("operator")
            arg = addr.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None:
                sub = _strip(arg)
                if sub.type == "subscript_expression":
                    return self._subscript(sub)
        ptr = self._pointer_expr(addr)
        if ptr is None:
            return None
        return ptr[0], ptr[1], ptr[2], " ".join(_text(self.module, addr).split())

    def _ref(
        self, kind: AccessKind, via: str, text: str, root: str, index: Affine | None, unit: str, node: ts.Node
    ) -> MemRef:
        width = self._width(root, unit) if root else None
        return MemRef(kind, via, text, root, index, unit, width, node, node.start_point[0] + 1)


# -- helpers -------------------------------------------------------------------------------------


def _fold(op: str, a: int, b: int) -> int | None:
    if op == "/" and b:
        return int(a / b)
    if op == "%" and b:
        return a - b * int(a / b)
    if op == ">>" and 0 <= b < 64:
        return a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    return None


def _strip(node: ts.Node) -> ts.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _builtin(module: Module, node: ts.Node) -> str | None:
    arg = node.child_by_field_name("argument")
    fld = node.child_by_field_name("field")
    if arg is None or fld is None:
        return None
    base, f = _text(module, arg).strip(), _text(module, fld).strip()
    if f not in ("x", "y", "z"):
        return None
    if base in BUILTINS:
        return f"{base}.{f}"
    group = _block_group_builtin(module, _strip(arg))
    return f"{group}.{f}" if group is not None else None


#: What a cooperative-groups ``thread_block`` method returns, as the builtin it equals: CUDA
#: defines ``thread_block::thread_index()`` as ``threadIdx`` and ``group_index()`` as ``blockIdx``
#: (``dim_threads()``, formerly ``group_dim()``, as ``blockDim``). Only a ``thread_block``:
#: ``grid_group::thread_index()`` is a global index, so the receiver's declaration must say
#: ``thread_block``.
_BLOCK_METHODS = {
    "thread_index": "threadIdx",
    "group_index": "blockIdx",
    "dim_threads": "blockDim",
    "group_dim": "blockDim",
}
_THREAD_BLOCK_TYPE = re.compile(r"^(?:const\s+)?(?:(?:cooperative_groups|cg)\s*::\s*)?thread_block$")
_THIS_THREAD_BLOCK = re.compile(r"^(?:(?:cooperative_groups|cg)\s*::\s*)?this_thread_block\s*\(\s*\)$")


def _block_group_builtin(module: Module, call: ts.Node) -> str | None:
    """``tb.thread_index()`` -> ``threadIdx`` where ``tb`` is declared in the enclosing function
    as ``cg::thread_block tb = cg::this_thread_block();`` (or ``auto tb = ...``); else None."""
    if call.type != "call_expression":
        return None
    fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    if fn is None or fn.type != "field_expression" or args is None or args.named_child_count:
        return None
    receiver, method = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if receiver is None or method is None or receiver.type != "identifier":
        return None
    builtin = _BLOCK_METHODS.get(_text(module, method).strip())
    if builtin is None or _text(module, fn).count(".") != 1:
        return None
    scope = call.parent
    while scope is not None and scope.type != "function_definition":
        scope = scope.parent
    if scope is None:
        return None
    name = _text(module, receiver).strip()
    for decl in _walk(scope):
        if decl.type != "declaration":
            continue
        kind = decl.child_by_field_name("type")
        type_text = " ".join(_text(module, kind).split()) if kind is not None else ""
        qualifiers = " ".join(_text(module, c) for c in decl.children if c.type == "type_qualifier")
        for init in decl.children_by_field_name("declarator"):
            ident = init.child_by_field_name("declarator") if init.type == "init_declarator" else None
            if ident is None or ident.type != "identifier" or _text(module, ident).strip() != name:
                continue
            value = init.child_by_field_name("value")
            if value is None or not _THIS_THREAD_BLOCK.match(" ".join(_text(module, value).split())):
                return None
            if type_text == "auto" or _THREAD_BLOCK_TYPE.match(f"{qualifiers} {type_text}".strip()):
                return builtin
            return None
    return None


def _declared(node: ts.Node | None) -> tuple[ts.Node | None, int, bool]:
    depth, array = 0, False
    while node is not None and node.type != "identifier":
        if node.type == "pointer_declarator":
            depth += 1
        elif node.type == "array_declarator":
            array = True
        elif node.type not in (
            "init_declarator",
            "parenthesized_declarator",
            "reference_declarator",
            "attributed_declarator",
        ):
            return None, depth, array
        inner = node.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in node.named_children if c.type != "type_qualifier"), None)
        node = inner
    return node, depth, array


def _element(declared: str) -> str:
    words = declared.replace("*", " ").replace("&", " ").split()
    skip = {"const", "volatile", "__restrict__", "__restrict", "restrict", "static", "__shared__", "extern"}
    return " ".join(w for w in words if w not in skip)


def _size(type_text: str) -> int | None:
    return SIZEOF.get(" ".join(type_text.split()))


def _is_wide(type_text: str) -> bool:
    return _element(type_text) in _WIDE


def _cast_parts(module: Module, n: ts.Node) -> tuple[str, ts.Node] | None:
    """``(target element type, value)`` of ``(T*)p`` or ``reinterpret_cast<T*>(p)``."""
    if n.type == "cast_expression":
        t = n.child_by_field_name("type")
        v = n.child_by_field_name("value")
        if t is not None and v is not None and "*" in _text(module, t):
            return _element(_text(module, t)), v
        return None
    if n.type == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        if fn is None or args is None or fn.type != "template_function":
            return None
        name = _text(module, fn.child_by_field_name("name") or fn)
        targs = fn.child_by_field_name("arguments")
        named = [c for c in args.named_children if c.type != "comment"]
        casts = ("reinterpret_cast", "static_cast", "const_cast")
        if name in casts and targs is not None and len(named) == 1:
            target = _text(module, targs).strip("<> \n")
            if "*" in target:
                return _element(target), named[0]
    return None


def _index_node(sub: ts.Node) -> ts.Node | None:
    indices = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if indices is None:
        return None
    if indices.type == "subscript_argument_list":
        named = [c for c in indices.named_children if c.type != "comment"]
        return named[0] if len(named) == 1 else None
    return indices


def _comparison(module: Module, cond: ts.Node, var: str) -> tuple[str, ts.Node] | None:
    """``(op, bound)`` with ``var`` on the left of ``var OP bound`` (mirrored when written right)."""
    c = _strip(_condition(cond))
    if c.type != "binary_expression":
        return None
    op = c.child_by_field_name("operator")
    left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
    if op is None or left is None or right is None:
        return None
    mirror = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!=", "==": "=="}
    if op.type not in mirror:
        return None
    if _is_name(module, left, var):
        return op.type, right
    if _is_name(module, right, var):
        return mirror[op.type], left
    return None


def _condition(cond: ts.Node) -> ts.Node:
    """The expression inside a ``condition_clause`` (``while (c)``), or ``cond`` itself."""
    if cond.type == "condition_clause" and cond.named_children:
        return cond.named_children[0]
    return cond


def _is_name(module: Module, node: ts.Node, var: str) -> bool:
    n = _strip(node)
    while n.type == "cast_expression":
        inner = n.child_by_field_name("value")
        if inner is None:
            break
        n = _strip(inner)
    return n.type == "identifier" and _text(module, n) == var


def _only_return(node: ts.Node) -> bool:
    if node.type == "return_statement":
        return True
    if node.type == "compound_statement":
        named = [c for c in node.named_children if c.type != "comment"]
        return len(named) == 1 and named[0].type == "return_statement"
    return False


def _assignments(module: Module, scope: ts.Node, var: str) -> Iterator[ts.Node]:
    """The writes of ``var`` under ``scope``: :func:`ktx.ir.facts.assign.assignments`, the one
    walker (imported here when called: the facts package imports this module)."""
    from ktx.ir.facts.assign import assignments

    return assignments(module, scope, var)


def _top_level_in(node: ts.Node, body: ts.Node) -> bool:
    """Whether ``node`` runs on every iteration: an expression statement directly in ``body``."""
    stmt = node.parent
    return stmt is not None and stmt.type == "expression_statement" and stmt.parent is not None and (
        stmt.parent.id == body.id
    )


def _classify(step: Affine | None) -> StrideKind:
    if step is None:
        return "other"
    if step.is_sym(BDIM_X):
        return "block"
    if step.equals(Affine.sym(BDIM_X) * Affine.sym(GDIM_X)):
        return "grid"
    if step.is_sym(GDIM_X):
        return "grid-blocks"
    if step.is_const:
        if step.const == 1:
            return "unit"
        if step.const == 32:
            return "warp"
        return "constant"
    return "other"


def _function_body(module: Module, fn: Function) -> ts.Node:
    node = module.node(fn.body)
    while node.type != "compound_statement" and node.parent is not None:
        node = node.parent
    return node


def _block_aliases(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, BlockAlias]:
    """Names that every launch of ``fn`` passes as its block size (they *are* ``blockDim``).

    A launch ``k<<<grid, BLOCK>>>`` (or ``dim3 block(BLOCK)``; ``k<BS><<<grid, BS>>>`` for a
    template parameter) makes ``BLOCK`` the block's x size; when every launch in the file
    agrees, the kernel's ``BLOCK`` means ``blockDim.x``.
    """
    launches = module.launches_of(fn.name)
    if not launches:
        return {}
    constexprs = {c.name for c in module.constants}
    names: set[str] | None = None
    tparams: set[str] | None = None
    values: set[int | None] = set()
    for site in launches:
        block = " ".join(module.text(site.block).split())
        word = _block_word(module, site.function, block, site.span.start)
        if word is None:
            return {}
        # REACH (launch layer): ``dim3 block(ns::threads)`` names the file's constexpr ``threads``.
        last = "".join(word.split()).rsplit("::", 1)[-1]
        if "::" in word and last in constexprs:
            word = last
        values.add(eval_int_text(word, dict(env)))
        mine_names = {word} if word.isidentifier() else set()
        names = mine_names if names is None else names & mine_names
        mine = {
            tp.name
            for tp, arg in zip(fn.template_params, site.template_args, strict=False)
            if tp.kind == "value" and " ".join(arg.split()) == word
        }
        tparams = mine if tparams is None else tparams & mine
    found: dict[str, BlockAlias] = {}
    for name in names or set():
        macro = next((m for m in module.macros if m.name == name and m.params is None), None)
        if macro is not None:
            found[name] = BlockAlias(name, "x", macro.int_value, "define")
        elif name in constexprs:
            found[name] = BlockAlias(name, "x", env.get(name), "constexpr")
    for name in tparams or set():
        found[name] = BlockAlias(name, "x", None, "template")
    for i, param in enumerate(fn.params):
        if param.pointer_depth or param.name in found:
            continue
        passed = {" ".join(s.args[i].split()) if i < len(s.args) else None for s in launches}
        if len(passed) == 1 and passed <= (names or set()):
            # ``k<<<grid, block_size>>>(..., block_size)``: the parameter carries the block size.
            found[param.name] = BlockAlias(param.name, "x", None, "param")
    (value,) = values if len(values) == 1 else (None,)
    if value is not None:
        # ``#define TPB 256`` read by the kernel while every launch passes 256: numerically
        # blockDim.x for this file's launches (a knob on the launch alone would break it).
        read = {_text(module, n) for n in _walk(module.node(fn.body)) if n.type == "identifier"}
        for m in module.macros:
            if m.params is None and m.int_value == value and m.name in read and m.name not in found:
                found[m.name] = BlockAlias(m.name, "x", value, "value")
        for c in module.constants:
            local = c.function in (None, fn.name)
            if c.int_value == value and local and c.name in read and c.name not in found:
                found[c.name] = BlockAlias(c.name, "x", value, "value")
    return found


def _template_values(module: Module, fn: Function, env: Mapping[str, int]) -> dict[str, int]:
    """``{name: value}`` for value template parameters that are one integer wherever launched.

    ``k<4><<<...>>>`` at every launch (or a default ``int VEC = 4`` and no launch that says
    otherwise) makes ``VEC`` the constant 4 for the analysis. Launches that disagree (a dispatch
    over ``VEC``) leave it a symbol.
    """
    found: dict[str, int] = {}
    launches = module.launches_of(fn.name)
    for i, tp in enumerate(fn.template_params):
        if tp.kind != "value" or tp.variadic:
            continue
        values: set[int | None] = set()
        for site in launches:
            text = site.template_args[i] if i < len(site.template_args) else tp.default
            values.add(eval_int_text(text, dict(env)) if text else None)
        if not launches and tp.default:
            values.add(eval_int_text(tp.default, dict(env)))
        if len(values) == 1:
            (value,) = values
            if value is not None:
                found[tp.name] = value
    return found


def _block_word(module: Module, host: str | None, block: str, at: int) -> str | None:
    """The expression a launch's block argument stands for (through ``dim3 b(EXPR)`` locals);
    None for a block of several dimensions."""
    if block.isidentifier():
        fn = next((f for f in module.functions if f.name == host and f.body.start <= at < f.body.end), None)
        if fn is not None:
            body = module.node(fn.body)
            found: list[ts.Node] = []
            for n in _walk(body):
                if n.start_byte >= at:
                    break
                if n.type == "init_declarator":
                    ident, _, _ = _declared(n.child_by_field_name("declarator"))
                    declared_as = _text(module, ident) if ident is not None else None
                    valued = n.child_by_field_name("value") is not None
                    if declared_as == block and valued and _scope_holds(n, at):
                        found.append(n)
                vexing = n.parent is not None and n.parent.type == "declaration"
                if n.type == "function_declarator" and vexing:
                    declared = n.child_by_field_name("declarator")
                    if declared is not None and _text(module, declared) == block and _scope_holds(n, at):
                        found.append(n)
            # The declaration in scope at the launch: the last one before it whose block holds it
            # (``if (..) { dim3 b(32); k<32><<<g, b>>>; } else { dim3 b(1024); ... }``).
            if found:
                n = found[-1]
                value = n.child_by_field_name("value" if n.type == "init_declarator" else "parameters")
                assert value is not None
                inner = value
                if value.type in ("argument_list", "initializer_list", "parameter_list"):
                    named = _unit_trimmed(module, value)
                    if len(named) != 1:
                        return None
                    inner = named[0]
                return " ".join(_text(module, inner).split())
            # REACH (launch layer): ``dim3 b; b.x = EXPR;`` assigns the block field by field.
            fields = dim3_field_assignments(module.source, body, block, at)
            if "x" in fields and all(_text(module, fields[k]).strip() == "1" for k in fields if k != "x"):
                return " ".join(_text(module, fields["x"]).split())
        return block
    if block.startswith("dim3(") and block.endswith(")"):
        arg = block[5:-1].strip()
        return None if "," in arg else arg
    return block


def _scope_holds(decl: ts.Node, at: int) -> bool:
    """Whether the block that declares ``decl`` still encloses the byte ``at`` (a use there sees it)."""
    scope = decl.parent
    while scope is not None and scope.type not in ("compound_statement", "for_statement"):
        scope = scope.parent
    return scope is None or scope.start_byte <= at < scope.end_byte


def _unit_trimmed(module: Module, args: ts.Node) -> list[ts.Node]:
    """REACH (launch layer): ``dim3 block(X, 1, 1)`` is the 1-D block ``X``: trailing 1s dropped."""
    named = [c for c in args.named_children if c.type != "comment"]
    while len(named) > 1 and _text(module, named[-1]).strip() == "1":
        named.pop()
    return named


# -- entry points --------------------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[Module, dict[str, KernelIndex]] = weakref.WeakKeyDictionary()


def kernel_index(module: Module, fn: Function) -> KernelIndex:
    """The index facts of ``fn`` in ``module``, computed once per module and kernel."""
    per = _CACHE.setdefault(module, {})
    key = f"{fn.name}@{fn.span.start}"
    if key not in per:
        per[key] = KernelIndex(module, fn)
    return per[key]


def thread_index(module: Module, fn: Function, axis: str = "x") -> ThreadIndex | None:
    return kernel_index(module, fn).thread_index(axis)


def guard_of(module: Module, fn: Function, var: str) -> Guard | None:
    return kernel_index(module, fn).guard_of(var)


def loop_shape(module: Module, fn: Function, loop: Loop) -> LoopShape | None:
    return kernel_index(module, fn).loop_shape(loop)


def accesses(module: Module, fn: Function, node: ts.Node | None = None) -> tuple[MemRef, ...]:
    return kernel_index(module, fn).accesses(node)


def affine_of(module: Module, fn: Function, node: ts.Node) -> Affine | None:
    return kernel_index(module, fn).affine(node)


__all__ = [
    "BDIM_X",
    "BID_X",
    "GDIM_X",
    "LOAD_INTRINSICS",
    "STORE_INTRINSICS",
    "TID_X",
    "Affine",
    "BlockAlias",
    "Guard",
    "KernelIndex",
    "LoopShape",
    "MemRef",
    "PointerDef",
    "ThreadIndex",
    "accesses",
    "affine_of",
    "guard_of",
    "intrinsic_kind",
    "kernel_index",
    "loop_shape",
    "thread_index",
]
