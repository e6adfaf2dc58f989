"""Extents: which elements a kernel's accesses reach at one launch, against its buffers' sizes.

Verification compares outputs; a spec whose extent is too small (a grid-stride loop walking
4096 tokens into a buffer of 256 rows) makes the original kernel write past its buffers, and
nothing compares what lies beyond. This is the source-reading half of the bounds check: given
one launch (grid, block, dynamic shared memory, the scalars' and template parameters' values,
each buffer's element count: a :class:`PointValues`, made by the spec side), it says of every
access one of three things (:class:`AccessCheck`):

* ``in_bounds``: the interval of elements it can touch (:mod:`ktx.ir.facts.intervals`) lies
  inside its buffer;
* ``out_of_bounds``: a :class:`~ktx.ir.facts.witness.Witness` was found: a concrete block,
  thread and loop values at which it touches an element outside (only this blocks a spec);
* ``unproven``: it cannot be bounded (data-dependent or opaque index, a pointer the kernel
  moves, a buffer handed to a call), or its bound passes the end and no witness was found (a
  bound is not a reachable index: issue 21's strided 16-byte loads).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir.affine import KernelIndex, MemRef, _index_node, kernel_index
from ktx.ir.consteval import SIZEOF, int_literal
from ktx.ir.facts.intervals import Intervals, Range, Unknown, expression
from ktx.ir.facts.kinds import access_kind
from ktx.ir.facts.witness import Witness, find_witness
from ktx.ir.module import Module, parse
from ktx.ir.nodes import Function
from ktx.ir.syntax import text as node_text
from ktx.ir.syntax import walk

Status = Literal["in_bounds", "out_of_bounds", "unproven"]
_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast"})


@dataclass(frozen=True)
class PointValues:
    """One launch of the kernel, in plain numbers: what the spec says at one shape point."""

    name: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int
    scalars: tuple[tuple[str, int], ...] = ()
    """Scalar parameters' values."""
    template_args: tuple[str, ...] = ()
    """The kernel's template arguments as written, placeholders filled (``"float", "128"``)."""
    extents: tuple[tuple[str, int], ...] = ()
    """Each buffer parameter's size in elements."""


@dataclass(frozen=True)
class AccessCheck:
    """What the bounds check says of one access at one point."""

    status: Status
    kind: str
    """``load``, ``store``... (``unproven`` ones from a call: ``call``)."""
    text: str
    buffer: str
    line: int
    col: int
    point: str
    extent: int = 0
    reach: Range | None = None
    witness: Witness | None = None
    why: str = ""

    def message(self, shape: str = "") -> str:
        """The one-line report (``shape``: `` (shape [n, d])``), the access's place not included."""
        if self.status == "out_of_bounds" and self.witness is not None:
            w = self.witness
            bad = w.last if w.last >= self.extent else w.first
            before = " (before its start)" if bad < 0 else ""
            wide = f", {w.last - w.first + 1} elements" if w.last > w.first else ""
            return (
                f"{self.kind} {self.text} reaches element {bad:,}{before} but {self.buffer} has "
                f"{self.extent:,} elements{shape} at {self.point}: {w} (index {w.first:,}{wide})"
            )
        if self.status == "in_bounds" and self.reach is not None:
            return (
                f"{self.text}: in bounds (elements {self.reach.lo:,}..{self.reach.hi:,} of {self.extent:,})"
            )
        if self.reach is not None:
            return (
                f"{self.text}: not proven: bounded by elements {self.reach.lo:,}..{self.reach.hi:,} of "
                f"{self.buffer}'s {self.extent:,}, but no block, thread and loop values tried reach "
                "past it (a bound, not a reachable index)"
            )
        return f"{self.text}: cannot bound {self.why}"


class KernelExtents:
    """The bounds check of one kernel: its accesses read once, checked at any number of points."""

    def __init__(self, module: Module, fn: Function) -> None:
        self.module = module
        self.fn = fn
        self.ix: KernelIndex = kernel_index(module, fn)
        self.refs = (*self.ix.accesses(), *_shared_refs(self.ix))
        self.moved = _moved_pointers(self.ix)
        self.static_shared = _static_shared(self.ix)

    def escapes(self) -> list[AccessCheck]:
        """A buffer handed to a call as a pointer (``load_global<16>(data, vals + offset + i)``,
        DeepSpeed's fake quantizer) is read or written by code the analysis does not follow: not
        proven. Without this, such a kernel's only accesses are invisible and ``--check`` would
        say every access is in bounds while 16-byte loads run past a group of one element."""
        buffers = {p.name for p in self.fn.params if p.is_pointer}
        out: list[AccessCheck] = []
        for n in walk(self.ix.body):
            callee = n.child_by_field_name("function") if n.type == "call_expression" else None
            arguments = n.child_by_field_name("arguments")
            if callee is None or arguments is None:
                continue
            name_node = callee.child_by_field_name("name") if callee.type == "template_function" else callee
            name = node_text(self.module, name_node) if name_node is not None else ""
            if name in _CASTS:
                continue
            for arg in arguments.named_children:
                root = _pointer_root(self.module, arg)
                if root in buffers:
                    text = " ".join(node_text(self.module, arg).split())
                    why = f"what {name} does through {root} (a call ktx does not read)"
                    line, col = arg.start_point[0] + 1, arg.start_point[1] + 1
                    out.append(AccessCheck("unproven", "call", text, root, line, col, "", why=why))
        return out

    def check(self, point: PointValues) -> list[AccessCheck]:
        """Every access the check reads, at ``point`` (accesses to registers left out)."""
        extents = dict(point.extents)
        values = self.values(point)
        for name, shared in self.ix.shared.items():
            if shared.extern:
                width = SIZEOF.get(shared.type.replace("const", "").strip())
                if width:
                    extents.setdefault(name, point.shared // width)
            else:
                # Sized by the point's template values (the spec's), not the launcher's.
                size = _static_count(self.ix, shared.dims, values)
                if size is not None:
                    extents.setdefault(name, size)
        state = Intervals(self.ix, dict(values))
        out: list[AccessCheck] = []
        for ref in self.refs:
            if ref.root and ref.root in self.ix.locals and ref.root not in self.ix.shared:
                continue  # a local array: registers
            if not ref.root and _in_registers(self.ix, ref.pointer):
                continue  # a field of a local struct (a Pack's ``v[]``): registers
            if ref.root and ref.root not in extents:
                continue  # a buffer the spec does not size (a static shared array of unknown size)
            out.append(self._one(state, values, ref, point, extents.get(ref.root, 0)))
        return out

    def _one(
        self, state: Intervals, values: dict[str, Range], ref: MemRef, point: PointValues, count: int
    ) -> AccessCheck:
        text = " ".join(node_text(self.module, ref.node).split())
        place = (ref.kind, text, ref.root, ref.line, ref.node.start_point[1] + 1, point.name)
        try:
            if ref.root in self.moved:
                raise Unknown(f"{ref.root} (the kernel moves the pointer at line {self.moved[ref.root]})")
            reach = state.reach(ref)
        except Unknown as exc:
            return AccessCheck("unproven", *place, extent=count, why=str(exc))
        if reach.lo >= 0 and reach.hi < count:
            return AccessCheck("in_bounds", *place, extent=count, reach=reach)
        witness = find_witness(self.ix, ref, values, point.grid, point.block, count)
        status: Status = "out_of_bounds" if witness is not None else "unproven"
        return AccessCheck(status, *place, extent=count, reach=reach, witness=witness)

    def values(self, point: PointValues) -> dict[str, Range]:
        """The symbols' values at ``point``: builtins' ranges, scalars, template values."""
        values: dict[str, Range] = {}
        for i, axis in enumerate(("x", "y", "z")):
            g = point.grid[i] if i < len(point.grid) else 1
            b = point.block[i] if i < len(point.block) else 1
            values[f"threadIdx.{axis}"] = Range(0, max(b - 1, 0))
            values[f"blockIdx.{axis}"] = Range(0, max(g - 1, 0))
            values[f"blockDim.{axis}"] = Range.point(b)
            values[f"gridDim.{axis}"] = Range.point(g)
        for name, v in point.scalars:
            values[name] = Range.point(v)
        for tp, text in zip(self.fn.template_params, point.template_args, strict=False):
            literal = int_literal(text.strip()) if tp.kind == "value" else None
            if literal is not None:
                values[tp.name] = Range.point(literal)
        return values


@functools.lru_cache(maxsize=64)
def first_out_of_bounds(
    path: str, source: str, kernel: str, points: tuple[PointValues, ...]
) -> AccessCheck | None:
    """The first witnessed out-of-bounds access of ``kernel`` (in ``source``, read from
    ``path``) over ``points``, or None (kept: every command loads the spec, some several times)."""
    module = parse(source, path)
    fn = next((k for k in module.kernels if k.name == kernel), None)
    if fn is None:
        return None
    extents = KernelExtents(module, fn)
    for point in points:
        for found in extents.check(point):
            if found.status == "out_of_bounds":
                return found
    return None


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
            MemRef(access_kind(n), "subscript", name, name, ix.affine(index), "", 1, n, n.start_point[0] + 1)
        )
    return out


def _in_registers(ix: KernelIndex, pointer: str) -> bool:
    """``in.v`` where ``in`` is a local that is neither a pointer nor a reference, or ``h``
    where every ``h = reinterpret_cast<const T*>(&v)`` points at such a local (a 16-byte pack
    read as 8 halves) and nothing assigns ``h`` again: registers, not a buffer."""
    m = re.match(r"\s*(\w+)\s*(\.|$)", pointer)
    if m is None:
        return False
    name = m.group(1)
    local = ix.locals.get(name)
    if local is None or "&" in local.type or name in ix.shared:
        return False
    if m.group(2) == ".":
        return not local.pointer
    if not local.pointer:
        return False
    values = []
    for n in walk(ix.body):
        if n.type in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
            if target is not None and node_text(ix.module, target).strip() == name:
                return False
        if n.type == "init_declarator":
            declared = n.child_by_field_name("declarator")
            while declared is not None and declared.type == "pointer_declarator":
                declared = declared.child_by_field_name("declarator")
            if declared is not None and node_text(ix.module, declared) == name:
                values.append(n.child_by_field_name("value"))
    targets = [_address_of(ix, v) if v is not None else None for v in values]
    held = [ix.locals.get(t) if t is not None else None for t in targets]
    return bool(held) and all(
        h is not None and not h.pointer and "&" not in h.type and t not in ix.shared
        for h, t in zip(held, targets, strict=True)
    )


def _address_of(ix: KernelIndex, node: ts.Node) -> str | None:
    """``v`` in ``&v``, ``(T*)&v``, ``reinterpret_cast<T*>(&v)``; None for anything else."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and node.child_by_field_name("value") is not None:
            node = node.child_by_field_name("value")  # type: ignore[assignment]
        elif node.type == "call_expression":
            callee = node.child_by_field_name("function")
            name = (
                callee.child_by_field_name("name")
                if callee is not None and callee.type == "template_function"
                else None
            )
            arguments = node.child_by_field_name("arguments")
            if name is None or node_text(ix.module, name) not in _CASTS or arguments is None:
                return None
            if arguments.named_child_count != 1:
                return None
            node = arguments.named_children[0]
        elif node.type == "pointer_expression":
            op, arg = node.child_by_field_name("operator"), node.child_by_field_name("argument")
            if op is None or op.type != "&" or arg is None or arg.type != "identifier":
                return None
            return node_text(ix.module, arg)
        else:
            return None


def _static_shared(ix: KernelIndex) -> int:
    """Bytes of the kernel's ``__shared__`` arrays of a size known from the source."""
    total = 0
    for shared in ix.shared.values():
        if shared.extern:
            continue
        count = _static_count(ix, shared.dims)
        width = SIZEOF.get(shared.type.replace("const", "").strip())
        if count is not None and width:
            total += count * width
    return total


def _static_count(
    ix: KernelIndex, dims: Sequence[str], values: Mapping[str, Range] | None = None
) -> int | None:
    """Elements of a ``__shared__`` array of ``dims``, from template values (the launcher's,
    overridden by ``values``) and constants; None when a dimension is not one number."""
    known = {n: Range.point(v) for n, v in ix.template_values.items()}
    known.update(values or {})
    count = 1
    for d in dims:
        node = expression(d)
        if node is None:
            return None
        try:
            r = Intervals(ix, known).node(node, ix.body, own=False)  # parsed on its own
        except Unknown:
            return None
        if r.lo != r.hi:
            return None
        count *= r.lo
    return count
