"""A kernel's parameters as ``ktx init`` reads them from its body: roles, extents, sizes.

For each parameter the drafter asks the body:

* the role (:func:`role_of`): read only is ``in``, stored to is ``out``, both is ``inout``;
* the extent of an array (:func:`subscript_extent`, :func:`affine_extent`): ``p[i]`` under
  ``if (i < n)`` is ``[n]``; a row pointer ``row = p + r * c`` indexed by ``j < c`` is
  ``[rows, c]``, from the bounds on the indices (:func:`read_kernel` collects them: guards,
  early returns, the grid);
* whether an integer is a size (:func:`size_use`): compared with an index, or passed where a
  size goes.

The answers are expressions over parameter names, in the spec's expression language
(:mod:`ktx.ir.expr`), or None where the body does not say.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.access import _index_node, terms
from ktx.ir.affine import Affine, kernel_index
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr
from ktx.ir.facts import assign
from ktx.ir.facts.kinds import access_kind as _kind
from ktx.ir.facts.launcher import LaunchDraft
from ktx.ir.memref import Term
from ktx.ir.nodes import Function, Param

if TYPE_CHECKING:
    from ktx.ir.module import Module


@dataclass
class KernelBody:
    """The kernel body as the parameter questions read it: the bounds its guards put on names
    (filled by :func:`read_kernel`, then the grid's by :func:`grid_bounds`), its locals and the
    pointers derived from parameters."""

    module: Module
    fn: Function
    body: ts.Node
    bounds: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, list[str]] = field(default_factory=dict)
    locals_: dict[str, ts.Node] = field(default_factory=dict)
    pointers: dict[str, tuple[str, ts.Node | None]] = field(default_factory=dict)
    #: arrays whose extent :func:`affine_extent` counted from the launch's threads on an axis
    #: the kernel does not bound (grid times block): name -> that dimension
    spanned: dict[str, str] = field(default_factory=dict)

    def text(self, node: ts.Node) -> str:
        return " ".join(syntax.text(self.module, node).split())


def read_kernel(module: Module, fn: Function) -> KernelBody:
    node = syntax.function_node(module, fn)
    body = node.child_by_field_name("body") or node
    k = KernelBody(module, fn, body)
    params = {p.name for p in fn.params if p.is_pointer}
    for n in syntax.walk(body):
        if n.type == "declaration":
            for decl in n.children_by_field_name("declarator"):
                if decl.type != "init_declarator":
                    continue
                ident = syntax.declarator_identifier(decl)
                value = decl.child_by_field_name("value")
                if ident is None or value is None:
                    continue
                name = syntax.text(module, ident)
                base = _pointer_base(module, value, params, k.pointers)
                if (
                    base is not None
                    and decl.child_by_field_name("declarator") is not None
                    and (
                        decl.child_by_field_name("declarator").type == "pointer_declarator"  # type: ignore[union-attr]
                    )
                ):
                    k.pointers[name] = base
                else:
                    k.locals_[name] = value
        elif n.type in ("for_statement", "while_statement"):
            cond = n.child_by_field_name("condition")
            if cond is not None:
                _bounds_from(k, cond, k.bounds)
        elif n.type == "if_statement":
            cond = n.child_by_field_name("condition")
            then = n.child_by_field_name("consequence")
            returns = then is not None and "return" in syntax.text(module, then).split(";")[0]
            if cond is not None:
                _bounds_from(k, cond, k.bounds, negated=returns)
    scalars = {p.name for p in fn.params if not p.is_pointer}
    for var, found in k.candidates.items():
        # A bound over the kernel's scalar parameters (``d``), not over locals (``num_packs``).
        plain = [b for b in found if set(re.findall(r"\b[A-Za-z_]\w*\b", b)) <= scalars]
        k.bounds[var] = (plain or found)[0]
    return k


def grid_bounds(k: KernelBody, grid: Sequence[str]) -> None:
    """``r = blockIdx.x`` ranges over the grid's x extent (the launch's, in spec variables);
    not when the kernel steps it (``r += gridDim.x``: a grid-stride walk that the grid does
    not bound; its loop condition does)."""
    stepped = assign.assigned(k.module, k.body)
    for name, value in k.locals_.items():
        if name in stepped:
            continue
        m = re.fullmatch(r"(?:\(\w[\w\s]*\))?\s*blockIdx\.([xyz])", k.text(value))
        axis = "xyz".index(m.group(1)) if m else -1
        if m and axis < len(grid) and name not in k.bounds:
            k.bounds[name] = f"__grid{axis}"


def _pointer_base(
    module: Module, value: ts.Node, params: set[str], known: Mapping[str, tuple[str, ts.Node | None]]
) -> tuple[str, ts.Node | None] | None:
    """``P + off`` or ``P`` (P a pointer parameter or a pointer derived from one): (P, off)."""
    while value.type in ("parenthesized_expression", "cast_expression"):
        inner = value.child_by_field_name("value") if value.type == "cast_expression" else None
        value = inner or value.named_children[0]
    text = syntax.text(module, value)
    if value.type == "identifier" and (text in params or text in known):
        return known.get(text, (text, None))
    if value.type == "binary_expression":
        op = value.child_by_field_name("operator")
        left, right = value.child_by_field_name("left"), value.child_by_field_name("right")
        if op is not None and op.type == "+" and left is not None and right is not None:
            base = _pointer_base(module, left, params, known)
            if base is not None and base[1] is None:
                return (base[0], right)
    return None


def _bounds_from(k: KernelBody, cond: ts.Node, out: dict[str, str], negated: bool = False) -> None:
    """``v < E`` (or ``v >= E`` guarding a return) records E as v's exclusive bound."""
    for n in syntax.walk(cond):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op is None or left is None or right is None or left.type != "identifier":
            continue
        if (op.type == "<" and not negated) or (op.type == ">=" and negated):
            k.candidates.setdefault(syntax.text(k.module, left), []).append(k.text(right))


def role_of(k: KernelBody, p: Param, depth: int = 2) -> tuple[str | None, list[ts.Node]]:
    """``in``/``out``/``inout`` from the subscripts that reach ``p``; and those subscripts.

    A kernel that only hands ``p`` (or ``p + offset``) on to a ``__device__`` function of the
    file (apex's ``cuApplyRMSNorm`` -> ``cuApplyLayerNorm_``) has the role that function's
    parameter has there (``depth`` calls deep); the subscripts are still the kernel's own."""
    reads = writes = False
    subs: list[ts.Node] = []
    for n in syntax.walk(k.body):
        if n.type != "subscript_expression":
            continue
        base = n.child_by_field_name("argument")
        if base is None:
            continue
        name = syntax.text(k.module, base)
        root = name if name == p.name else k.pointers.get(name, ("", None))[0]
        if root != p.name:
            continue
        subs.append(n)
        kind = _kind(n)
        reads |= kind in ("load", "update")
        writes |= kind in ("store", "update")
    if not subs:
        # No subscript: ``*p`` (a scalar through a pointer) and the project's vector load and
        # store helpers (``vec.load(p + off)``, ``store_global<16>(p + off, buf)``) tell.
        uses = pointer_uses(k, p)
        reads, writes = uses.reads, uses.writes
    if p.const:
        return "in", subs
    if reads and writes:
        return "inout", subs
    if writes:
        return "out", subs
    if reads:
        return "in", subs
    if depth > 0:
        roles = set()
        for callee, param in _handed_to(k, p.name, pointer=True):
            q = next(x for x in callee.params if x.name == param)
            role, _ = role_of(read_kernel(k.module, callee), q, depth - 1)
            if role is not None:
                roles.add(role)
        if roles:
            return ("inout" if len(roles) > 1 else roles.pop()), subs
    return None, subs


@dataclass(frozen=True)
class PointerUses:
    """What a kernel does with a pointer parameter besides subscripting it: reads and writes
    through ``*p`` or a load/store helper, and whether ``*p`` is all it does (one element)."""

    reads: bool
    writes: bool
    deref_only: bool


def _helper_kind(call: ts.Node, module: Module) -> str | None:
    """``load``/``store`` for a call whose function's own name says so (``vec.load``,
    ``mem_access::store_global<16>``, ``cast_load``), else None."""
    fn = call.child_by_field_name("function")
    if fn is None:
        return None
    text = re.sub(r"<[^<>]*>", "", syntax.text(module, fn))
    last = re.split(r"::|\.|->", text)[-1].lower()
    if "store" in last or "write" in last:
        return "store"
    if "load" in last or "read" in last or re.fullmatch(r"_*ld[a-z]{0,2}", last):  # __ldg, Ldg, ldcs
        return "load"
    return None


def pointer_uses(k: KernelBody, p: Param) -> PointerUses:
    """Reads and writes of ``p`` (or a pointer the kernel derives from it) by ``*p`` and by
    load/store helpers; ``deref_only`` when every mention of ``p`` is a ``*p`` (apex's
    ``*growth_tracker = 0``: an extent of one element)."""
    names = {p.name} | {n for n, (root, _) in k.pointers.items() if root == p.name}
    reads = writes = False
    for r in kernel_index(k.module, k.fn).accesses():
        # through a view (``reinterpret_cast<float4*>(out)[i] = v``): no subscript of p's own
        if r.root == p.name and r.width is not None and r.width > 1:
            reads |= r.kind in ("load", "update", "address")
            writes |= r.kind in ("store", "update", "address")
    mentions = derefs = 0
    for n in syntax.walk(k.body):
        if n.type == "identifier" and syntax.text(k.module, n) in names:
            mentions += 1
        elif n.type == "pointer_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            while arg is not None and arg.type == "parenthesized_expression":
                arg = arg.named_children[0] if arg.named_children else None
            deref = op is not None and op.type == "*" and arg is not None and arg.type == "identifier"
            if deref and arg is not None and syntax.text(k.module, arg) in names:
                derefs += 1
                access = _kind(n)
                reads |= access in ("load", "update", "address")
                writes |= access in ("store", "update", "address")
        elif n.type == "call_expression":
            kind = _helper_kind(n, k.module)
            args = n.child_by_field_name("arguments")
            if kind is None or args is None:
                continue
            if any(a.type == "identifier" and syntax.text(k.module, a) in names for a in syntax.walk(args)):
                reads |= kind == "load"
                writes |= kind == "store"
    return PointerUses(reads, writes, mentions > 0 and derefs == mentions)


def subscript_extent(
    k: KernelBody, p: Param, subs: Sequence[ts.Node], params: Mapping[str, str]
) -> str | None:
    """``[n]`` or ``[rows, c]`` from the first subscript whose index ktx can read."""
    env = _environment(k, params)
    for sub in subs:
        index = _index_node(sub)
        base = sub.child_by_field_name("argument")
        if index is None or base is None:
            continue
        got = _index_extent(k, index, offset_of(k, base), env)
        if got is not None:
            return got
    return None


def _environment(k: KernelBody, params: Mapping[str, str]) -> dict[str, str]:
    # A bound may name a kernel local (``int N = B * T;``): its initialiser, then the parameters.
    env = {n: _in_shape_vars(k.text(v), params) for n, v in k.locals_.items() if n not in params}
    env.update(params)
    return env


def _index_extent(
    k: KernelBody, index: ts.Node, offset: ts.Node | None, env: Mapping[str, str]
) -> str | None:
    """The extent one index (plus the offset of the local pointer it is taken from) reads."""
    if offset is None:
        modulo = _modulo_extent(k, index, env)
        if modulo is not None:
            return modulo
    flat = _flattened(k, k.text(index))
    if flat is not None and offset is None:
        return "[" + _in_shape_vars(k.bounds[flat], env) + "]"
    parts = list(terms(index))
    if offset is not None:
        parts += terms(offset)
    return _terms_extent(k, parts, env)


def _terms_extent(k: KernelBody, parts: Sequence[Term], env: Mapping[str, str]) -> str | None:
    """The extent an index's additive terms read (``r * pitch + j``: [bound(r), pitch])."""
    dims = _dims(k, [k.text(t.node) for t in parts if t.sign > 0], len(parts))
    if dims is not None:
        return "[" + ", ".join(_in_shape_vars(d, env) for d in dims) + "]"
    return None


@dataclass(frozen=True)
class Address:
    """An address of a pointer parameter's element handed to a call (``load_global<16>(buf,
    p + off)``, ``Store(p + ti * ld + di, v)``, ``helper(row)`` with ``row = p + r * d``): the
    call reaches ``p`` at the sum of ``offset``'s terms and, ktx does not see how far, past it."""

    call: ts.Node
    callee: str
    offset: tuple[Term, ...]
    text: str
    """The offset as written (the argument less the pointer)."""
    helper: bool
    """The callee's own name says load or store (:func:`_helper_kind`)."""


def _strip(node: ts.Node) -> ts.Node:
    while node.type in ("parenthesized_expression", "cast_expression"):
        inner = node.child_by_field_name("value") if node.type == "cast_expression" else None
        node = inner or node.named_children[0]
    return node


def handed_addresses(k: KernelBody, p: Param) -> list[Address]:
    """Every call argument that is ``p`` plus an offset (``p + a + b``, in any order, or a local
    pointer so derived from ``p``), in source order: the kernel's only view of where it
    reaches ``p`` when it never subscripts it (a project's vector load/store helpers)."""
    out: list[Address] = []
    for n in syntax.walk(k.body):
        if n.type != "call_expression":
            continue
        fn, args = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        if fn is None or args is None:
            continue
        for a in args.named_children:
            parts = terms(_strip(a))
            at = [
                i
                for i, t in enumerate(parts)
                if _strip(t.node).type == "identifier"
                and k.pointers.get(
                    syntax.text(k.module, _strip(t.node)), (syntax.text(k.module, _strip(t.node)), None)
                )[0]
                == p.name
            ]
            if len(at) != 1 or parts[at[0]].sign < 0:
                continue
            base = k.pointers.get(syntax.text(k.module, _strip(parts[at[0]].node)), ("", None))[1]
            offset = [t for i, t in enumerate(parts) if i != at[0]] + (
                terms(base) if base is not None else []
            )
            if not offset:
                continue  # handed on as it is: :func:`handed_extent`
            callee = re.sub(r"<[^<>]*>", "", syntax.text(k.module, fn))
            text = " + ".join(k.text(t.node) if t.sign > 0 else f"-{k.text(t.node)}" for t in offset)
            out.append(Address(n, callee, tuple(offset), text, _helper_kind(n, k.module) is not None))
    return out


def view_extent(k: KernelBody, p: Param, params: Mapping[str, str]) -> str | None:
    """The extent of a pointer the kernel indexes only through a vector view
    (``reinterpret_cast<const float4*>(x)[i]`` under ``i < n / 4``): the view's index read as
    a subscript's, its innermost dimension then counted in ``p``'s elements (times the view's
    width: ``[n]``)."""
    env = _environment(k, params)
    for r in kernel_index(k.module, k.fn).accesses():
        if r.root != p.name or not r.width or r.width < 2 or r.node.type != "subscript_expression":
            continue
        index = _index_node(r.node)
        got = _index_extent(k, index, None, env) if index is not None else None
        if got is not None:
            dims = extent_dims(got)
            return "[" + ", ".join([*dims[:-1], _times(dims[-1], r.width)]) + "]"
    return None


def _modulo_extent(k: KernelBody, offset: ts.Node, env: Mapping[str, str]) -> str | None:
    """``p + (i % n)``: the offset stays below ``n`` (a bias row repeated over the rows)."""
    while offset.type == "parenthesized_expression" and offset.named_children:
        offset = offset.named_children[0]
    op = offset.child_by_field_name("operator") if offset.type == "binary_expression" else None
    right = offset.child_by_field_name("right")
    if op is None or op.type != "%" or right is None or right.type not in ("identifier", "number_literal"):
        return None
    return "[" + _in_shape_vars(k.text(right), env) + "]"


def address_extent(
    k: KernelBody,
    p: Param,
    params: Mapping[str, str],
    targ: Mapping[str, str],
    launch: LaunchDraft,
) -> tuple[str, Address] | None:
    """The extent of a pointer the kernel reaches only through addresses it hands to calls:
    each address's offset read as an index (its guard's bound, ``i % n``, or the index
    analysis' dense chain), the first that reads. The call may reach past the offset (a 16-byte
    load of a vector); a bounded offset that steps by the vector's width (``offset < total``)
    counts the elements, the load's width does not."""
    env = _environment(k, params)
    ix = kernel_index(k.module, k.fn)
    for address in handed_addresses(k, p):
        one = address.offset[0].node if len(address.offset) == 1 and address.offset[0].sign > 0 else None
        got = _index_extent(k, one, None, env) if one is not None else _terms_extent(k, address.offset, env)
        if got is None and all(t.sign > 0 for t in address.offset):
            index: Affine | None = None
            for t in address.offset:
                part = ix.affine(t.node)
                index = None if part is None else part if index is None else index + part
                if index is None:
                    break
            got = affine_extent(k, p, params, targ, launch, index=index) if index is not None else None
        if got is not None:
            return got, address
    return None


def valid_extent(text: str) -> bool:
    """Every dimension an expression the spec loader reads (a guess built from pieces can be
    ``[()]`` when a piece did not translate)."""
    try:
        return all(Expr.parse(d) is not None for d in extent_dims(text))
    except (KtxError, SyntaxError):
        return False


def moved_line(k: KernelBody, p: Param) -> int | None:
    """The first line where the kernel reassigns pointer parameter ``p`` (``p += row * d``):
    its subscripts are then relative to a moving base."""
    writes = assign.assigned(k.module, k.body).get(p.name, [])
    return min(w.start_point[0] + 1 for w in writes) if writes else None


def affine_extent(
    k: KernelBody,
    p: Param,
    env: Mapping[str, str],
    targ: Mapping[str, str],
    launch: LaunchDraft,
    index: Affine | None = None,
) -> str | None:
    """The extent from the index analysis (:mod:`ktx.ir.affine`) when the subscripts' text did
    not give one: ``(t * TOPK + k) * d + i`` is ``2*d*t + d*k + i``; each term's varying
    symbol (a loop or guard variable, a thread or block index) with its bound is a dimension,
    the term's stride its pitch: ``[num_tokens, 2, d]``. Only dense chains (each stride the
    product of the dimensions inside it) and a padded 2-D row are taken; the draft's bounds
    check then tries the guess at every shape point."""
    ix = kernel_index(k.module, k.fn)
    names = {**env, **targ}
    for axis, i in (("x", 0), ("y", 1), ("z", 2)):
        if launch.grid is not None and i < len(launch.grid):
            names[f"gridDim.{axis}"] = launch.grid[i]
            names[f"blockIdx.{axis}"] = launch.grid[i]
        if launch.block is not None and i < len(launch.block):
            names[f"blockDim.{axis}"] = launch.block[i]
            names[f"threadIdx.{axis}"] = launch.block[i]
    varying = {n: b for n, b in k.bounds.items() if not b.startswith("__grid")}
    indices = (
        [(index, 1)]
        if index is not None
        else [(r.index, r.width or 1) for r in ix.accesses() if r.root == p.name]
    )
    for found, width in indices:
        if found is None:
            continue
        casts = _cast_atoms(found, names)
        if casts is None:
            continue
        lanes = found.terms
        if width > 1:
            # ``reinterpret_cast<float4*>(x)[i]`` is ``4*i`` in x's elements: the chain over the
            # view's elements, its innermost dimension then counted in x's (times 4)
            if any(coef % width for mono, coef in lanes if mono):
                continue
            lanes = tuple((mono, coef // width) for mono, coef in lanes if mono)
        dims = _chain(lanes, varying, {**names, **casts})
        launched: list[str] = []
        if dims is None:  # ``row * ncols + col``, each a global thread index: one term each
            terms, spans, launched = _global_threads(lanes, k, names)
            dims = _chain(terms, {**varying, **spans}, {**names, **casts})
        if dims is not None:
            unguarded = [spans[v] for v in launched if spans[v] in dims]
            if unguarded:
                k.spanned[p.name] = unguarded[0]
            if width > 1:
                dims = [*dims[:-1], _times(dims[-1], width)]
            return "[" + ", ".join(dims) + "]"
    return None


def _times(dim: str, width: int) -> str:
    """``n // 4`` times 4 is ``n`` (the view's count of a row whose length it divides)."""
    try:
        tree = ast.parse(dim.strip(), mode="eval").body
    except SyntaxError:
        return f"{_paren(dim)} * {width}"
    divides = isinstance(tree, ast.BinOp) and isinstance(tree.op, (ast.FloorDiv, ast.Div))
    if divides and isinstance(tree.right, ast.Constant) and tree.right.value == width:  # type: ignore[attr-defined]
        return ast.unparse(tree.left)  # type: ignore[attr-defined]
    return f"{_paren(dim)} * {width}"


def moved_extent(
    k: KernelBody, p: Param, env: Mapping[str, str], targ: Mapping[str, str], launch: LaunchDraft
) -> str | None:
    """The extent of a pointer parameter the kernel moves once, at its top, before any access
    (``dst += ((sample * nchannels + channel) * nrows + row) * ncols;`` then ``dst[col]``): the
    offset plus each access's index read as one index (:func:`affine_extent`'s dense chain).
    None for any other move (in a loop or a branch, twice, after an access) or an offset the
    chain cannot read (strides given as parameters: their values are the caller's)."""
    writes = assign.assigned(k.module, k.body).get(p.name, [])
    if len(writes) != 1:
        return None
    write = writes[0]
    op, right = write.child_by_field_name("operator"), write.child_by_field_name("right")
    top = write.parent is not None and write.parent.parent is not None and write.parent.parent.id == k.body.id
    if write.type != "assignment_expression" or op is None or op.type != "+=" or right is None or not top:
        return None
    ix = kernel_index(k.module, k.fn)
    offset = ix.affine(right)
    refs = [r for r in ix.accesses() if r.root == p.name]
    if offset is None or offset.atoms or not refs or any(r.node.start_byte < write.end_byte for r in refs):
        return None
    for ref in refs:
        if ref.index is None or ref.index.atoms:
            continue
        moved = Affine(tuple((offset + ref.index).terms))
        found = affine_extent(k, p, env, targ, launch, index=moved)
        if found is not None:
            return found
    return None


#: ``int64_t(d)``, ``(size_t)d``: a widening cast of one name, which an extent reads as the name
_CAST = re.compile(
    r"\(*\s*(?:\(\s*)?(?:const\s+)?(?:unsigned\s+)?(?:int|long|long long|size_t|u?int(?:32|64)_t)"
    r"\s*(?:\)\s*(\w+)|\(\s*(\w+)\s*\))\s*\)*"
)


def _cast_atoms(index: Affine, names: Mapping[str, str]) -> dict[str, str] | None:
    """The index's atoms that are integer casts of one name (``(int64_t(d))``), each as that
    name's value; None when another atom remains (``(i / C)``: not a dense chain)."""
    out: dict[str, str] = {}
    for text, _ in index.atoms:
        m = _CAST.fullmatch(text.strip())
        if m is None:
            return None
        name = m.group(1) or m.group(2)
        out[text] = names.get(name, name)
    return out


def _global_threads(
    terms: Sequence[tuple[tuple[str, ...], int]], k: KernelBody, names: Mapping[str, str]
) -> tuple[list[tuple[tuple[str, ...], int]], dict[str, str], list[str]]:
    """``(blockIdx.a * blockDim.a + threadIdx.a) * s``, two terms of one stride, as one index
    ``__thread.a`` over the launch's threads on axis a: the bound of the kernel's local set to
    that sum (``if (col >= ncols) return;``), else grid times block on that axis (listed
    third: a bound the kernel does not check). So a row index of a 2-D launch
    (``row * ncols + col``) is one dimension, not two."""
    out = list(terms)
    spans: dict[str, str] = {}
    launched: list[str] = []
    for axis in "xyz":
        bid, bdim, tid = f"blockIdx.{axis}", f"blockDim.{axis}", f"threadIdx.{axis}"
        for mono, coef in list(out):
            if bid not in mono or bdim not in mono:
                continue
            rest = tuple(s for s in mono if s not in (bid, bdim))
            partner = next((t for t in out if t[1] == coef and sorted(t[0]) == sorted((*rest, tid))), None)
            if partner is None:
                continue
            var = f"__thread.{axis}"
            bound = _thread_bound(k, axis)
            if bound is None:
                grid, block = names.get(bid), names.get(bdim)
                if grid is None or block is None:
                    continue
                parts = [_paren(x) for x in (grid, block) if x.strip() != "1"]
                bound = " * ".join(parts) or "1"
                launched.append(f"__thread.{axis}")
            out.remove((mono, coef))
            out.remove(partner)
            out.append((tuple(sorted((*rest, var))), coef))
            spans[var] = bound
            break
    return out, spans, launched


def _thread_bound(k: KernelBody, axis: str) -> str | None:
    """The bound of a kernel local set to the global thread index on ``axis``."""
    want = {f"blockIdx.{axis}*blockDim.{axis}", f"blockDim.{axis}*blockIdx.{axis}"}
    for name, value in k.locals_.items():
        text = re.sub(r"\s+|\((?:unsigned|int|u?int(?:32|64)_t|size_t|long)\)", "", k.text(value))
        parts = text.strip("()").split("+")
        ours = len(parts) == 2 and f"threadIdx.{axis}" in parts and bool(set(parts) & want)
        if ours and name in k.bounds and not k.bounds[name].startswith("__grid"):
            return k.bounds[name]
    return None


def _chain(
    terms: Sequence[tuple[tuple[str, ...], int]], bounds: Mapping[str, str], names: Mapping[str, str]
) -> list[str] | None:
    """Dimensions outermost first, or None."""
    by_var: dict[str, tuple[str, str]] = {}  # var -> (stride text, bound text)
    for monomial, coef in terms:
        moving = [s for s in monomial if s in bounds or s.startswith(("threadIdx.", "blockIdx."))]
        if not moving:
            continue  # an offset inside the row (``+ d``): the bounds check sees whether it fits
        if len(moving) != 1 or moving[0] in by_var:
            return None
        var = moving[0]
        rest = [s for s in monomial if s != var]
        if any(s not in names and not s.startswith(("blockDim.", "gridDim.")) for s in rest):
            return None
        stride = " * ".join([str(coef)] * (coef != 1) + [_paren(names.get(s, s)) for s in rest]) or "1"
        bound = names.get(var) if var.startswith(("threadIdx.", "blockIdx.")) else bounds.get(var)
        if bound is None:
            return None  # a launch ktx could not translate
        bound = _in_shape_vars(bound, names)
        by_var[var] = (stride, bound)
    if not by_var:
        return None
    try:
        free = sorted({n for s, b in by_var.values() for n in Expr.parse(f"{s} + {b}").names})
        samples = [dict(zip(free, itertools.cycle(primes), strict=False)) for primes in _SAMPLES]
        strides = {v: [Expr.parse(s).evaluate_int(e) for e in samples] for v, (s, _) in by_var.items()}
        sizes = {v: [Expr.parse(b).evaluate_int(e) for e in samples] for v, (_, b) in by_var.items()}
        order = sorted(by_var, key=lambda v: (strides[v][0], sizes[v][0]))
        dims: list[str] = []
        inner = [1] * len(samples)
        for v in order:
            stride, bound = by_var[v]
            if strides[v] != inner:
                # ``r * pitch + j`` with ``pitch >= bound(j)``: a padded row, [bound(r), pitch].
                wide = all(a >= b for a, b in zip(strides[v], inner, strict=True))
                padded = len(order) == 2 and len(dims) == 1 and wide
                return [bound, stride] if padded else None
            dims.append(bound)
            inner = [a * b for a, b in zip(inner, sizes[v], strict=True)]
    except KtxError:
        return None
    return list(reversed(dims))


#: Values tried for the shape variables when comparing a stride with a product of dimensions.
_SAMPLES = ((3, 5, 7, 11, 13), (17, 19, 23, 29, 31))


def _paren(text: str) -> str:
    return text if re.fullmatch(r"\w+", text) else f"({text})"


def offset_of(k: KernelBody, base: ts.Node) -> ts.Node | None:
    return k.pointers.get(syntax.text(k.module, base), ("", None))[1]


def _flattened(k: KernelBody, text: str) -> str | None:
    """``b * T + t`` with ``b = i / T`` and ``t = i % T``: the flat index ``i`` (when bounded)."""
    m = re.fullmatch(r"(\w+)\s*\*\s*(\w+)\s*\+\s*(\w+)", text)
    if m is None:
        return None
    outer, pitch, inner = m.groups()
    div, mod = k.locals_.get(outer), k.locals_.get(inner)
    if div is None or mod is None:
        return None
    d = re.fullmatch(rf"(\w+)\s*/\s*{re.escape(pitch)}", k.text(div))
    r = re.fullmatch(rf"(\w+)\s*%\s*{re.escape(pitch)}", k.text(mod))
    if d is None or r is None or d.group(1) != r.group(1) or d.group(1) not in k.bounds:
        return None
    return d.group(1)


def _dims(k: KernelBody, texts: list[str], count: int) -> list[str] | None:
    if len(texts) != count or not texts:
        return None
    by_stride: dict[str, str] = {}
    for text in texts:
        m = re.fullmatch(r"(\w+)(?:\s*\*\s*(.+))?", text) or None
        var, stride = (m.group(1), m.group(2) or "1") if m else ("", "")
        if not m or var not in k.bounds:
            m2 = re.fullmatch(r"(.+?)\s*\*\s*(\w+)", text)
            if m2 is None or m2.group(2) not in k.bounds:
                return None
            var, stride = m2.group(2), m2.group(1)
        by_stride[stride.strip("() ")] = var
    # Innermost first: the unit-stride variable, then each next stride is the row pitch of the
    # dimensions inside it (``r * pitch + j``: [bound(r), pitch], rows may be padded).
    inner = by_stride.pop("1", None)
    if inner is None:
        return None
    if not by_stride:
        return [k.bounds[inner]]
    if len(by_stride) != 1:
        return None
    pitch, outer = next(iter(by_stride.items()))
    return [k.bounds[outer], pitch]


def _in_shape_vars(text: str, env: Mapping[str, str]) -> str:
    """A kernel-side expression over kernel parameters, in terms of the spec's variables."""

    def sub(m: re.Match[str]) -> str:
        value = env.get(m.group(0))
        if value is None:
            return m.group(0)
        return value if re.fullmatch(r"\w+", value) else f"({value})"

    text = re.sub(r"\b[A-Za-z_]\w*\b", sub, text)
    return text.replace("/", "//").replace("////", "//")


def extent_dims(shape: str) -> list[str]:
    """``"[n, 2 * d]"`` -> ``["n", "2 * d"]`` (top-level commas only)."""
    tree = ast.parse(shape.strip(), mode="eval").body
    if not isinstance(tree, ast.List):
        raise SyntaxError(shape)
    return [ast.unparse(e) for e in tree.elts]


_RELATIONAL = frozenset({"<", "<=", ">", ">=", "==", "!="})


def size_use(k: KernelBody, name: str, depth: int = 2, bound: bool = False) -> ts.Node | None:
    """Where the kernel uses the scalar ``name`` as a size, else None.

    A size is compared (a bound, a loop limit), reaches a subscript or offsets a pointer
    (``query + token * head_size``), directly or through a local computed from it by
    arithmetic. A shift's amount (``1 << num_bits``) passes nothing on: a bit count is no size
    even when its result is later compared. A kernel that hands ``name`` on, as it is, to a
    ``__device__`` function of the file (apex's ``cuApplyRMSNorm`` calls ``cuApplyLayerNorm_``
    with its ``n1, n2``) uses it as that function uses its parameter (``depth`` calls deep).
    ``bound``: only a comparison counts (``c < n2``): a bound, where a subscript or an offset
    alone may be a stride's (``i * nb01``), which is no size of its own.
    """
    found = _size_use_here(k, name, bound)
    if found is not None or depth <= 0:
        return found
    for callee, param in _handed_to(k, name):
        inner = size_use(read_kernel(k.module, callee), param, depth - 1, bound)
        if inner is not None:
            return inner
    return None


def _handed_to(k: KernelBody, name: str, pointer: bool = False) -> list[tuple[Function, str]]:
    """The functions of the module the kernel calls with ``name`` itself as an argument (or, for
    a ``pointer``, ``name + offset``), and the parameter that receives it (one definition of
    that name and arity; templates too), of the same kind: a pointer or a scalar."""
    return [(f, f.params[i].name) for f, i, _, _ in _handed_calls(k, name, pointer)]


def _handed_calls(k: KernelBody, name: str, pointer: bool) -> list[tuple[Function, int, list[ts.Node], bool]]:
    """:func:`_handed_to`'s calls: the callee, the argument's position, the call's arguments,
    and whether the argument is ``name`` exactly (not ``name + offset``)."""
    out: list[tuple[Function, int, list[ts.Node], bool]] = []
    for n in syntax.walk(k.body):
        if n.type != "call_expression":
            continue
        fn, arguments = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        if fn is None or arguments is None:
            continue
        callee = syntax.text(
            k.module, fn.child_by_field_name("name") or fn if fn.type == "template_function" else fn
        )
        args = list(arguments.named_children)
        for i, a in enumerate(args):
            exact = True
            op = a.child_by_field_name("operator") if a.type == "binary_expression" else None
            if pointer and op is not None and op.type == "+" and syntax.text(k.module, a.children[0]) == name:
                a, exact = a.children[0], False  # p + offset: still p's memory
            if a.type != "identifier" or syntax.text(k.module, a) != name:
                continue
            defs = [
                f for f in k.module.functions
                if f.name == callee.split("::")[-1].strip() and len(f.params) == len(args) and f is not k.fn
            ]  # fmt: skip
            if len(defs) == 1 and defs[0].params[i].is_pointer == pointer:
                out.append((defs[0], i, args, exact))
    return out


def handed_extent(
    k: KernelBody,
    p: Param,
    env: Mapping[str, str],
    targ: Mapping[str, str],
    launch: LaunchDraft,
    depth: int = 2,
) -> str | None:
    """The extent of a pointer the kernel only hands on, as it is, to a ``__device__`` function
    of the file (apex's ``cuApplyRMSNorm`` -> ``cuApplyLayerNorm_(output_vals, ..., n1, n2)``):
    that function's parameter's extent, its scalar parameters named as the kernel passes them
    (``[n1, n2]``). None unless every name of it is one the kernel's arguments give."""
    for callee, i, args, exact in _handed_calls(k, p.name, pointer=True):
        if not exact:
            continue
        ck = read_kernel(k.module, callee)
        if launch.grid is not None:
            grid_bounds(ck, launch.grid)
        inner: dict[str, str] = {}
        for q, a in zip(callee.params, args, strict=False):
            text = syntax.text(k.module, a).strip()
            if q.is_pointer:
                continue
            if text in env:
                inner[q.name] = env[text]
            elif re.fullmatch(r"\d+", text):
                inner[q.name] = text
        q = callee.params[i]
        _, subs = role_of(ck, q, 0)
        got = subscript_extent(ck, q, subs, inner) or affine_extent(ck, q, inner, targ, launch)
        if got is None and depth > 1:
            got = handed_extent(ck, q, inner, targ, launch, depth - 1)
        if got is None:
            continue
        known = {w for v in (*inner.values(), *targ.values()) for w in re.findall(r"\b[A-Za-z_]\w*\b", v)}
        if set(re.findall(r"\b[A-Za-z_]\w*\b", got)) <= known | {"min", "max"}:
            return got
    return None


def _size_use_here(k: KernelBody, name: str, bound: bool = False) -> ts.Node | None:
    sized = {name}
    # Every declaration, not ``k.locals_`` (one per name): two loops may each declare a
    # ``token_head``, one from this scalar, one from another.
    decls: list[tuple[str, ts.Node]] = []
    for n in syntax.walk(k.body):
        if n.type == "init_declarator":
            ident, value = syntax.declarator_identifier(n), n.child_by_field_name("value")
            if ident is not None and value is not None:
                decls.append((syntax.text(k.module, ident), value))
    changed = True
    while changed:  # locals computed from a size, to a fixed point
        changed = False
        for local, value in decls:
            if local not in sized and _carries(k, value, sized):
                sized.add(local)
                changed = True
    pointers = {p.name for p in k.fn.params if p.is_pointer} | set(k.pointers)
    for n in syntax.walk(k.body):
        if n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            if op is not None and op.type in _RELATIONAL and _carries(k, n, sized):
                return n
            if bound:
                continue
            if op is not None and op.type in ("+", "-") and _carries(k, n, sized):
                base = _pointer_base(k.module, n, pointers, {})
                if base is not None and base[1] is not None and _carries(k, base[1], sized):
                    return n
        elif n.type == "subscript_expression" and not bound:
            index = _index_node(n)
            if index is not None and _carries(k, index, sized):
                return n
    return None


def passed_to(k: KernelBody, name: str) -> str | None:
    """The first function the kernel hands ``name`` to (as an argument), other than casts and
    math: what it does with the value is out of sight, so the TODO must not say "no size"."""
    for n in syntax.walk(k.body):
        if n.type != "call_expression":
            continue
        fn, arguments = n.child_by_field_name("function"), n.child_by_field_name("arguments")
        if fn is None or arguments is None:
            continue
        callee = syntax.text(
            k.module, fn.child_by_field_name("name") or fn if fn.type == "template_function" else fn
        )
        if callee.split("::")[-1] in _PLAIN_CALLS:
            continue
        if any(_carries(k, a, {name}) for a in arguments.named_children):
            return " ".join(callee.split())
    return None


#: Calls whose arguments are values, not sizes ktx would have to follow.
_PLAIN_CALLS = frozenset(
    {"static_cast", "reinterpret_cast", "const_cast", "min", "max", "fminf", "fmaxf", "abs", "fabsf", "float",
     "int", "powf", "exp2f", "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "printf", "assert"}
)  # fmt: skip


def mentions(k: KernelBody, name: str) -> bool:
    return any(n.type == "identifier" and syntax.text(k.module, n) == name for n in syntax.walk(k.body))


def _carries(k: KernelBody, node: ts.Node, names: set[str]) -> bool:
    """Whether ``node`` mentions one of ``names`` outside a shift's amount."""
    if node.type == "identifier":
        return syntax.text(k.module, node) in names
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and op.type in ("<<", ">>"):
            left = node.child_by_field_name("left")
            return left is not None and _carries(k, left, names)
    return any(_carries(k, c, names) for c in node.children)


def read_only_when(k: KernelBody, subs: Sequence[ts.Node]) -> str | None:
    """The condition every read among ``subs`` (a pointer's subscripts, from :func:`role_of`)
    sits under, when each is in a branch (``if``, ``?:``) whose condition names a scalar
    parameter or a template parameter of the kernel: ``has_ff`` of ``has_ff ? ff[i] : 1.0f``,
    ``set_rows_stride != 0``, ``add_residual``. Else None (a read on every path, or no read).

    Such a read is the caller's choice: ggml passes no ``freq_factors`` at all where the
    template says ``has_ff = false``, and exllamav2's ``y`` is only written unless
    ``add_residual``. A draft that gives the pointer role ``in`` (or ``inout``) and random data
    runs a path the project may never take, so the drafter puts a TODO over the role.
    """
    knobs = {p.name for p in k.fn.params if not p.is_pointer} | {t.name for t in k.fn.template_params}
    found: str | None = None
    sides: dict[int, set[bool]] = {}
    for sub in subs:
        if _kind(sub) not in ("load", "update"):
            continue
        branch = _branch_condition(k, sub, knobs)
        if branch is None:
            return None
        node, then, cond = branch
        sides.setdefault(node.id, set()).add(then)
        found = found or (cond if then else f"!({cond})")
    if any(len(s) > 1 for s in sides.values()):
        return None  # read in both branches of one test (``if (!fp32) {w2[c]} else {w2[c]}``)
    return found


def _branch_condition(k: KernelBody, node: ts.Node, knobs: set[str]) -> tuple[ts.Node, bool, str] | None:
    """The nearest branch around ``node`` whose condition names one of ``knobs``: (the branch,
    whether ``node`` is on its taken side, the condition's text)."""
    child, parent = node, node.parent
    while parent is not None and child.id != k.body.id:
        if parent.type in ("if_statement", "conditional_expression"):
            cond = parent.child_by_field_name("condition")
            names = (
                set()
                if cond is None
                else {syntax.text(k.module, n) for n in syntax.walk(cond) if n.type == "identifier"}
            )
            # a test of the knobs alone (``has_ff``, ``set_rows_stride != 0``), not a bound
            # on an index (``i0 < ne00``) that every thread's read meets
            if cond is not None and child.id != cond.id and names and names <= knobs:
                text = k.text(cond)
                text = text[1:-1].strip() if text.startswith("(") and text.endswith(")") else text
                other = parent.child_by_field_name("alternative")
                return parent, other is None or child.id != other.id, text
        child, parent = parent, parent.parent
    return None


def view_type(k: KernelBody, p: Param, subs: Sequence[ts.Node]) -> str | None:
    """The element type of a view the kernel indexes ``p`` through, when it is not ``p``'s own:
    ``const half2* w2 = (const half2*) w; ... w2[column]`` gives ``half2``. Subscripts of such a
    view count its elements (two halves each), so an extent read from them is not in ``p``'s
    elements. None when every subscript is of ``p`` or of a view of its own type."""
    aliases = {syntax.text(k.module, a) for s in subs if (a := s.child_by_field_name("argument")) is not None}
    # a view of p itself (``(const half2*) w``), not of a row of it (``(half2*)(x + r * d)``,
    # whose offset is in p's elements and whose extent the drafter reads in those)
    aliases = {a for a in aliases if a != p.name and k.pointers.get(a, ("", None)) == (p.name, None)}
    own = " ".join(p.base_type.replace("const", " ").split())
    for n in syntax.walk(k.body):
        if n.type != "declaration":
            continue
        for decl in n.children_by_field_name("declarator"):
            ident = syntax.declarator_identifier(decl) if decl.type == "init_declarator" else None
            if ident is None or syntax.text(k.module, ident) not in aliases:
                continue
            kind = n.child_by_field_name("type")
            text = syntax.text(k.module, kind) if kind is not None else ""
            name = " ".join(text.replace("const", " ").split())
            if name and name != own:
                return name
    return None
